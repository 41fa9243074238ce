/* SPDX-License-Identifier: MIT */
/* Writes one memory-layout image of N functions and counts the library's
 * write system calls, for test_memory_layout.py (an image written one
 * pwrite a function made the kernel's per-call work the bulk of a large
 * inject).  Linked with -Wl,--wrap for pwrite64, pwritev64 (what pwrite
 * and pwritev are with 64-bit offsets) and write: the
 * calls the library's own objects make are counted (libelf's are not).
 *
 *   write_calls N DIR
 *
 * Function i (id i + 1, 40 + i % 200 bytes of the byte (i * 7) & 0xff)
 * is at 0x100000 + 256 * i, and every 64th leaves a 64 KiB gap (a hole of
 * the image).  Prints "calls C" (pwrite + pwritev + write), then one line
 * per function: IMAGE PATH<tab>PGOFF (hex)<tab>SIZE<tab>BYTE (hex).  Exit
 * status 0, or 1 with the error on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <perfgraft/code.h>
#include <perfgraft/elfimage.h>

static unsigned long calls;

ssize_t __real_pwrite64(int fd, const void *p, size_t n, off_t off);
ssize_t __real_pwritev64(int fd, const struct iovec *iov, int n, off_t off);
ssize_t __real_write(int fd, const void *p, size_t n);

ssize_t __wrap_pwrite64(int fd, const void *p, size_t n, off_t off)
{
	calls++;
	return __real_pwrite64(fd, p, n, off);
}

ssize_t __wrap_pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
	calls++;
	return __real_pwritev64(fd, iov, n, off);
}

ssize_t __wrap_write(int fd, const void *p, size_t n)
{
	calls++;
	return __real_write(fd, p, n);
}

int main(int argc, char **argv)
{
	struct pg_diag diag = { 0 };
	struct pg_code_process proc = {
		.pid = 4242, .elf_mach = 62 /* EM_X86_64 */, .is_64bit = true, .timestamp = 777,
	};
	struct pg_elfset_opts opts = { .sz = sizeof(opts), .memory_layout = true, .prefix = "wc" };
	struct pg_elf_place *pl;
	uint8_t *code;
	pg_elfset *set;
	long n;
	int ret = 0;

	if (argc != 3 || (n = strtol(argv[1], NULL, 10)) <= 0 || n > 1000000) {
		fprintf(stderr, "usage: write_calls N DIR\n");
		return 2;
	}
	opts.dir = argv[2];
	code = malloc(256 * 256);
	pl = calloc((size_t)n, sizeof(*pl));
	if (!code || !pl)
		return 1;
	for (int b = 0; b < 256; b++)
		memset(code + 256 * b, b, 256);
	if (pg_elfset_new(&proc, "/some/where/jit-4242.dump", &opts, &diag, &set) < 0) {
		fprintf(stderr, "%s\n", diag.err);
		return 1;
	}
	for (long i = 0; i < n && !ret; i++) {
		int byte = (int)((i * 7) & 0xff);
		struct pg_code_event ev = {
			.kind = PG_CODE_LOAD, .pid = 4242, .tid = 4242, .time = (uint64_t)i + 1,
			.id = (uint64_t)i + 1, .addr = 0x100000 + 256 * (uint64_t)i + 0x10000 * (uint64_t)(i / 64),
			.size = 40 + (uint64_t)(i % 200), .name = "f", .code = code + 256 * byte,
		};

		ret = pg_elfset_add(set, &ev, &pl[i]) < 0;
	}
	calls = 0;
	if (!ret)
		ret = pg_elfset_finish(set) < 0 || pg_elfset_commit(set) < 0;
	if (ret) {
		fprintf(stderr, "%s\n", diag.err);
		pg_elfset_discard(set);
	} else {
		size_t nm;
		const struct pg_elf_map *m = pg_elfset_maps(set, &nm);

		printf("calls %lu\n", calls);
		for (size_t k = 0; k < nm; k++)
			if (m[k].kind == PG_ELF_MAP_LOAD)
				printf("%s\t%llx\t%llu\t%x\n", pg_elfset_image(set, m[k].image)->path,
				       (unsigned long long)m[k].pgoff, (unsigned long long)m[k].size,
				       (unsigned)(((m[k].id - 1) * 7) & 0xff));
		pg_elfset_keep(set);
	}
	pg_elfset_free(set);
	free(pl);
	free(code);
	return ret;
}
