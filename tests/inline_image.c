/* SPDX-License-Identifier: MIT */
/* Writes ELF images of a hand-made code model with inline chains, for
 * test_inline_dwarf.py.
 *
 *   inline_image [--be] [--32] [--per-function] [--hostile] DIR
 *
 * Default: x86-64, little-endian; --be: PowerPC 64 big-endian (with --32:
 * PowerPC 32); --32: i386.  The LOADs (all packed into one image unless
 * --per-function):
 *
 *   outer_a (id 1, 64 bytes; a.js)
 *     [16,24) helper (lib.js:100) inlined into outer_a at a.js:11
 *     [24,32) inner (lib.js:200) inlined into helper at lib.js:101,
 *             helper inlined into outer_a at a.js:11 (the same call as
 *             the chain before it: one helper DIE over [16,32))
 *     [40,48) inner (lib.js:201) inlined into outer_a at a.js:13
 *   outer_b (id 2, 48 bytes; b.js)
 *     [8,16)  helper (lib.js:100) inlined into outer_b at b.js:20
 *     [16,24) inner (lib.js:200) inlined into helper at lib.js:102,
 *             helper inlined into outer_b at b.js:21 (another call)
 *   plain (id 3, 32 bytes; no chains)
 *
 * --hostile adds LOADs whose chains are invalid (left out with one
 * warning per LOAD) or absurdly deep (cut), and one with 70000 chains
 * (past 16-bit counts; llvm-dwarfdump --verify took 37 s at 100000) and
 * a million invalid ones.
 *
 * Prints one line per LOAD: NAME<tab>IMAGE PATH<tab>PGOFF (hex)<tab>SIZE,
 * then the warnings, each on a line starting "warning: ".  Exit status 0,
 * or 1 with the error on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/code.h>
#include <perfgraft/elfimage.h>

#define EM_386_ 3
#define EM_PPC_ 20
#define EM_PPC64_ 21
#define EM_X86_64_ 62

static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	printf("warning: %s\n", msg);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* outer_a */
static const struct pg_code_line lines_a[] = {
	{ .off = 0, .file = "a.js", .line = 10 },
	{ .off = 16, .file = "lib.js", .line = 100 },
	{ .off = 24, .file = "lib.js", .line = 200 },
	{ .off = 32, .file = "a.js", .line = 12 },
	{ .off = 40, .file = "lib.js", .line = 201 },
	{ .off = 48, .file = "a.js", .line = 14 },
};
static const struct pg_code_frame fa1[] = {
	{ "helper", "lib.js", 100 }, { "outer_a", "a.js", 11 },
};
static const struct pg_code_frame fa2[] = {
	{ "inner", "lib.js", 200 }, { "helper", "lib.js", 101 }, { "outer_a", "a.js", 11 },
};
static const struct pg_code_frame fa3[] = {
	{ "inner", "lib.js", 201 }, { "outer_a", "a.js", 13 },
};
static const struct pg_code_inline inl_a[] = {
	{ 16, 8, 2, fa1 }, { 24, 8, 3, fa2 }, { 40, 8, 2, fa3 },
};

/* outer_b */
static const struct pg_code_line lines_b[] = {
	{ .off = 0, .file = "b.js", .line = 19 },
	{ .off = 8, .file = "lib.js", .line = 100 },
	{ .off = 16, .file = "lib.js", .line = 200 },
	{ .off = 24, .file = "b.js", .line = 22 },
};
static const struct pg_code_frame fb1[] = {
	{ "helper", "lib.js", 100 }, { "outer_b", "b.js", 20 },
};
static const struct pg_code_frame fb2[] = {
	{ "inner", "lib.js", 200 }, { "helper", "lib.js", 102 }, { "outer_b", "b.js", 21 },
};
static const struct pg_code_inline inl_b[] = {
	{ 8, 8, 2, fb1 }, { 16, 8, 3, fb2 },
};

static const struct pg_code_line lines_p[] = {
	{ .off = 0, .file = "p.js", .line = 5 },
};

/* hostile: every chain but the three valid ones is left out */
static const struct pg_code_frame fh_null[] = {
	{ NULL, "lib.js", 1 }, { "hostile", "h.js", 2 },
};
static const struct pg_code_frame fh_ok[] = {
	{ "helper", NULL, 0 }, { "hostile", NULL, 0 },
};
static const struct pg_code_frame fh_ok2[] = {
	{ "inner", "", 7 }, { "hostile", "h.js", 3 },
};
static const struct pg_code_inline inl_h[] = {
	{ 0, 8, 1, fh_ok },		/* fewer than 2 frames */
	{ 0, 8, 2, NULL },		/* no frames */
	{ 0, 8, 2, fh_null },		/* NULL func */
	{ 0, 0, 2, fh_ok },		/* empty */
	{ 64, 8, 2, fh_ok },		/* at the end */
	{ 60, 8, 2, fh_ok },		/* past the end */
	{ 8, UINT64_MAX, 2, fh_ok },	/* wraps */
	{ 8, 8, 2, fh_ok },		/* valid */
	{ 12, 8, 2, fh_ok },		/* overlaps */
	{ 0, 4, 2, fh_ok },		/* before */
	{ 16, 8, 2, fh_ok2 },		/* valid, unknown file names */
	{ 16, 8, 2, fh_ok2 },		/* the same range again */
	{ 40, 8, 2, fh_ok },		/* valid */
};

#define DEEP 100

int main(int argc, char **argv)
{
	struct pg_diag diag = { .warn = on_warn };
	struct pg_code_process proc = {
		.pid = 4711, .elf_mach = EM_X86_64_, .is_64bit = true, .timestamp = 12345,
	};
	struct pg_elfset_opts opts = { .sz = sizeof(opts) };
	bool be = false, b32 = false, hostile = false;
	const char *dir = NULL;
	struct pg_code_event ev[8];
	size_t nev = 0;
	uint8_t *code;
	struct pg_code_frame deep[DEEP + 1];
	char deep_names[DEEP][16];
	struct pg_code_inline deep_inl[2];
	struct pg_code_inline *many = NULL;
	struct pg_code_frame long_fr[2];
	struct pg_code_inline long_inl[2];
	char *longname = NULL;
	pg_elfset *set;
	int ret = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--be"))
			be = true;
		else if (!strcmp(argv[i], "--32"))
			b32 = true;
		else if (!strcmp(argv[i], "--per-function"))
			opts.per_function = true;
		else if (!strcmp(argv[i], "--hostile"))
			hostile = true;
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "usage: inline_image [--be] [--32] [--per-function] [--hostile] DIR\n");
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "usage: inline_image [--be] [--32] [--per-function] [--hostile] DIR\n");
		return 2;
	}
	proc.big_endian = be;
	proc.is_64bit = !b32;
	proc.elf_mach = be ? (b32 ? EM_PPC_ : EM_PPC64_) : (b32 ? EM_386_ : EM_X86_64_);
	opts.dir = dir;
	opts.prefix = "inl";

	/* x86 nops and a ret (bytes only: no tool runs them) */
	code = malloc(200000);
	if (!code)
		return 1;
	memset(code, 0x90, 200000);

#define LOAD(nm, id_, sz, ln, nln, il, nil) do { \
		ev[nev] = (struct pg_code_event){ .kind = PG_CODE_LOAD, .pid = 4711, .tid = 4711, \
			.id = (id_), .addr = 0x10000 * (id_), .size = (sz), .name = (nm), \
			.code = code, .lines = (ln), .nlines = (nln), .inlines = (il), \
			.ninlines = (nil) }; \
		nev++; \
	} while (0)
	code[63] = code[47] = code[31] = 0xc3;
	LOAD("outer_a", 1, 64, lines_a, N(lines_a), inl_a, N(inl_a));
	LOAD("outer_b", 2, 48, lines_b, N(lines_b), inl_b, N(inl_b));
	LOAD("plain", 3, 32, lines_p, N(lines_p), NULL, 0);
	if (hostile) {
		size_t nmany = 1070000;

		LOAD("hostile", 4, 64, lines_p, N(lines_p), inl_h, N(inl_h));
		/* DEEP inlined frames: d0 (innermost) in d1 ... in d99 in deep */
		for (int k = 0; k < DEEP; k++) {
			snprintf(deep_names[k], sizeof(deep_names[k]), "d%d", k);
			deep[k] = (struct pg_code_frame){ deep_names[k], "deep.js", (uint32_t)(1000 + k) };
		}
		deep[DEEP] = (struct pg_code_frame){ "deep", "deep.js", 1 };
		deep_inl[0] = (struct pg_code_inline){ 0, 16, DEEP + 1, deep };
		deep_inl[1] = (struct pg_code_inline){ 16, 16, 3, deep + DEEP - 2 };
		LOAD("deep", 5, 64, lines_p, N(lines_p), deep_inl, 2);
		/* 70000 one-byte chains alternating between two outer calls,
		 * then a million left out */
		many = calloc(nmany, sizeof(*many));
		if (!many)
			return 1;
		for (size_t i = 0; i < nmany; i++) {
			many[i].off = i < 70000 ? i : 70000 + i;
			many[i].len = 1;
			many[i].nframes = 3;
			many[i].frames = i % 2 ? fa2 : fb2;
		}
		LOAD("many", 6, 70000, lines_p, N(lines_p), many, nmany);
		/* an inlined function named by 1 MiB + 1 bytes: left out (a
		 * chain of 64 such names would carry DWARF past 32-bit offsets) */
		longname = malloc((1u << 20) + 2);
		if (!longname)
			return 1;
		memset(longname, 'x', (1u << 20) + 1);
		longname[(1u << 20) + 1] = 0;
		long_fr[0] = (struct pg_code_frame){ longname, "l.js", 1 };
		long_fr[1] = (struct pg_code_frame){ "longname", "l.js", 2 };
		long_inl[0] = (struct pg_code_inline){ 0, 8, 2, long_fr };
		long_inl[1] = (struct pg_code_inline){ 8, 8, 2, fh_ok };
		LOAD("longname", 7, 64, lines_p, N(lines_p), long_inl, 2);
	}

	if (pg_elfset_new(&proc, "/some/where/jit-4711.dump", &opts, &diag, &set) < 0) {
		fprintf(stderr, "inline_image: %s\n", diag.err);
		return 1;
	}
	{
		struct pg_elf_place pl[8];

		for (size_t i = 0; i < nev && !ret; i++)
			ret = pg_elfset_add(set, &ev[i], &pl[i]) < 0;
		if (!ret)
			ret = pg_elfset_finish(set) < 0 || pg_elfset_commit(set) < 0;
		if (ret) {
			fprintf(stderr, "inline_image: %s\n", diag.err);
			pg_elfset_discard(set);
		} else {
			for (size_t i = 0; i < nev; i++)
				printf("%s\t%s\t%llx\t%llu\n", ev[i].name,
				       pg_elfset_image(set, pl[i].image)->path,
				       (unsigned long long)pl[i].pgoff,
				       (unsigned long long)ev[i].size);
			pg_elfset_keep(set);
		}
	}
	pg_elfset_free(set);
	free(many);
	free(longname);
	free(code);
	return ret;
}
