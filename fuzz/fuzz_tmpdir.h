/* SPDX-License-Identifier: MIT */
/* The harnesses' scratch directory: one per fuzzer process under $TMPDIR
 * (else /tmp), emptied after every input, subdirectories too (outputs
 * must not fill the disk), and removed at exit. */
#ifndef PG_FUZZ_TMPDIR_H
#define PG_FUZZ_TMPDIR_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_tmpdir[1024] = "/tmp/perfgraft-fuzz-XXXXXX";
static int fuzz_have_tmpdir;
static unsigned long fuzz_swept;

static int fuzz_sweep_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	if (f->level == 0)
		return 0;	/* the directory itself stays */
	if (type == FTW_DP) {
		(void)rmdir(path);
	} else if (unlink(path) == 0) {
		fuzz_swept++;
	}
	return 0;
}

/* Removes everything under dir (not dir); returns how many files, other
 * than directories, there were. */
static unsigned long fuzz_sweep_dir(const char *dir)
{
	fuzz_swept = 0;
	(void)nftw(dir, fuzz_sweep_one, 16, FTW_DEPTH | FTW_PHYS);
	return fuzz_swept;
}

static unsigned long fuzz_tmpdir_sweep(void)
{
	return fuzz_sweep_dir(fuzz_tmpdir);
}

static void fuzz_tmpdir_remove(void)
{
	if (fuzz_have_tmpdir) {
		fuzz_tmpdir_sweep();
		(void)rmdir(fuzz_tmpdir);
	}
}

/* 0, or -1 after saying what is not exercised without a directory. */
static int fuzz_tmpdir_make(const char *who, const char *without)
{
	const char *base = getenv("TMPDIR");

	if (!base || !*base || strlen(base) > sizeof(fuzz_tmpdir) - 64)
		base = "/tmp";
	snprintf(fuzz_tmpdir, sizeof(fuzz_tmpdir), "%s/perfgraft-fuzz-XXXXXX", base);
	if (!mkdtemp(fuzz_tmpdir)) {
		fprintf(stderr, "%s: mkdtemp: %s; %s\n", who, strerror(errno), without);
		return -1;
	}
	fuzz_have_tmpdir = 1;
	atexit(fuzz_tmpdir_remove);
	return 0;
}

#endif
