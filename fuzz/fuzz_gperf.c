/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the gperftools CPU profile reader: header
 * detection, records and their summing, the trailer and the maps text are
 * read from memory and every stack and mapping read back; then the input
 * is converted (as a file in the scratch directory) into perf.data on
 * /dev/null (written in place: no disk traffic, which had made a loaded
 * machine's write() outlast the fuzzer's timeout), one sample per tick
 * up to a small budget and one per distinct stack above it, so that both
 * forms are exercised and a fuzzed count costs nothing. */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <perfgraft/gperf.h>
#include "fuzz_tmpdir.h"
#include "fuzz_touch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int have_dir = -1;
	char in[sizeof(fuzz_tmpdir) + 16];
	struct pg_gperf_stats ps = { .sz = sizeof(ps) };
	struct pg_gperf_convert_stats st = { .sz = sizeof(st), .profile = &ps };
	struct pg_diag diag = { 0 };
	pg_gperf *g;
	int fd;

	if (pg_gperf_open_mem(data, size, "fuzz", &diag, &g) == 0) {
		for (size_t i = 0; i < pg_gperf_stack_count(g); i++) {
			const struct pg_gperf_stack *s = pg_gperf_stack(g, i);

			sink += s->count + s->offset;
			for (uint32_t k = 0; k < s->depth; k++)
				sink += s->pcs[k];
		}
		for (size_t i = 0; i < pg_gperf_mapping_count(g); i++) {
			const struct pg_gperf_mapping *m = pg_gperf_mapping(g, i);

			sink += m->start + m->end + m->offset + m->inode + touch_str(m->path) +
				touch_str(m->perms);
		}
		pg_gperf_close(g);
	}
	if (have_dir < 0)
		have_dir = fuzz_tmpdir_make("fuzz_gperf", "conversion not exercised") == 0;
	if (!have_dir)
		return 0;
	snprintf(in, sizeof(in), "%s/p", fuzz_tmpdir);
	fd = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		close(fd);
		for (int pipe = 0; pipe < 2; pipe++) {
			struct pg_gperf_opts o = {
				.sz = sizeof(o),
				.profile = in, .output = "/dev/null", .pipe = pipe, .pid = -1,
				.root = pipe ? fuzz_tmpdir : NULL,	/* no real files */
				.max_samples = 64,	/* records can be 64 KiB each */
				.weighted = pipe,	/* and per stack whatever the counts */
				.pprof_frames = pipe,	/* pprof's frame removal */
			};

			(void)pg_gperf_convert(&o, &diag, &st);
		}
	} else {
		close(fd);
	}
	fuzz_tmpdir_sweep();
	return 0;
}
