/* SPDX-License-Identifier: MIT */
/* The harnesses' scratch directory: one per fuzzer process, emptied after
 * every input (outputs must not fill the disk) and removed at exit. */
#ifndef PG_FUZZ_TMPDIR_H
#define PG_FUZZ_TMPDIR_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_tmpdir[] = "/tmp/perfgraft-fuzz-XXXXXX";
static int fuzz_have_tmpdir;

/* Unlinks every file in dir; returns how many there were. */
static unsigned long fuzz_sweep_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned long n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[4096];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (unlink(path) == 0)
			n++;
	}
	closedir(d);
	return n;
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
	if (!mkdtemp(fuzz_tmpdir)) {
		fprintf(stderr, "%s: mkdtemp: %s; %s\n", who, strerror(errno), without);
		return -1;
	}
	fuzz_have_tmpdir = 1;
	atexit(fuzz_tmpdir_remove);
	return 0;
}

#endif
