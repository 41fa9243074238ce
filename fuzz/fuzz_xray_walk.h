/* SPDX-License-Identifier: MIT */
/* What the XRay trace harnesses do with an input, once its header has been
 * forced to the mode under test:
 *  1. walk it in file order and in time order, reading every payload byte,
 *     so ASan sees any length that escapes the input;
 *  2. convert it (as a file in the scratch directory) into perf.data in
 *     both file and pipe mode, which runs the stack recovery and the
 *     record encoders on whatever the reader let through;
 *  3. account it (xray --account) with options picked by the input's
 *     bytes: the stacks, -d's search, the percentiles and account's sort
 *     on whatever the reader let through. */
#ifndef PG_FUZZ_XRAY_WALK_H
#define PG_FUZZ_XRAY_WALK_H

#include <fcntl.h>
#include <stdint.h>

#include <perfgraft/xray.h>
#include "fuzz_tmpdir.h"
#if __has_include("xray/account.h")	/* internal: the instrumented copy of the library */
#include "xray/account.h"
#define FUZZ_ACCOUNT 1
#endif

static volatile uint64_t xray_sink;

static void xray_walk(const uint8_t *data, size_t size, unsigned flags)
{
	struct pg_diag diag = { 0 };
	struct pg_xr_record r;
	pg_xray *t;

	if (pg_xray_open_mem(data, size, "fuzz", flags, &diag, &t) < 0)
		return;
	while (pg_xray_next(t, &r) > 0) {
		uint64_t sum = r.tsc + r.func_id + r.nargs;

		for (uint32_t i = 0; i < r.payload_size; i++)
			sum += r.payload[i];
		for (uint32_t i = 0; i < r.nargs; i++)
			sum += r.args[i];
		xray_sink += sum;
	}
	pg_xray_close(t);
}

static int xray_fuzz_one(const uint8_t *data, size_t size)
{
	static int have_dir = -1;
	char in[sizeof(fuzz_tmpdir) + 16], out[sizeof(fuzz_tmpdir) + 16];
	const char *traces[1] = { in };
	struct pg_xray_stats ts = { .sz = sizeof(ts) };
	struct pg_xray_convert_stats st = { .sz = sizeof(st), .trace = &ts };
	struct pg_diag diag = { 0 };
	int fd;

	xray_walk(data, size, PG_XRAY_FILE_ORDER);
	xray_walk(data, size, 0);
	if (have_dir < 0)
		have_dir = fuzz_tmpdir_make("fuzz_xray", "conversion not exercised") == 0;
	if (!have_dir)
		return 0;
	snprintf(in, sizeof(in), "%s/t", fuzz_tmpdir);
	snprintf(out, sizeof(out), "%s/o", fuzz_tmpdir);
	fd = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	close(fd);
	for (int pipe = 0; pipe < 2; pipe++) {
		struct pg_xray_opts o = {
			.sz = sizeof(o),
			.traces = traces, .ntraces = 1, .output = out, .pipe = pipe,
			.frequency = 10000,	/* 100 us grid */
			.max_gap_ns = 100000,	/* at most one sample per thread and gap */
			/* thin after 2 samples (the pipe pass) so that short
			 * inputs reach the thinning; the file pass keeps the
			 * default */
			.thin_after = pipe ? 2 : 0,
		};

		(void)pg_xray_convert(&o, &diag, &st);
	}
#ifdef FUZZ_ACCOUNT
	{
		static FILE *null;
		uint8_t k = size > 4 ? data[4] : 0, s = size > 5 ? data[5] : 0;
		struct pg_xray_account_opts ao = {
			.trace = in, .keep_going = !(k & 1), .deduce_sibling_calls = !(k & 2),
			.recursive_calls_only = k & 4, .csv = k & 8, .descending = k & 16,
			.sort = (enum pg_xa_sort)(s % 9), .top = (k >> 5) & 3,
		};
		struct pg_xray_account_stats as;

		if (!null)
			null = fopen("/dev/null", "w");
		if (null)
			(void)pg_xray_account(&ao, null, &diag, &as);
	}
#endif
	fuzz_tmpdir_sweep();
	return 0;
}

#endif
