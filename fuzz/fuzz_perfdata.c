/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the perf.data reader and writer.
 *
 * For every input:
 * 1. pg_perfdata_open_mem() over it; read every attr (raw bytes, ids) and
 *    feature body; walk every record with pg_perfdata_next(), reading every
 *    byte of the record and of the payload after it (types 66/71), and
 *    decode MMAP/MMAP2 records with pg_perfdata_mmap();
 * 2. during the same walk, pass every record through a pg_pdw writer
 *    (same mode and byte order as the input) on a file in a private
 *    directory (/tmp/perfgraft-fuzz-pd-XXXXXX, made once, removed at
 *    exit), with the input's attrs and features, plus one pg_pdw_mmap2()
 *    and one pg_pdw_build_id() after the k-th record; pg_pdw_close();
 * 3. rewind (pg_perfdata_rewind) and walk again: the second walk must
 *    return the same records (inject walks file-mode input twice);
 * 4. read the written file back: it must hold every record written plus
 *    the MMAP2 (and in pipe mode the HEADER_BUILD_ID record), and no error.
 * A broken invariant calls abort() with a message on stderr.
 *
 * Build: like fuzz_jitdump (fuzz/README.md); then
 *     build-fuzz/fuzz/fuzz_perfdata -max_total_time=60 SCRATCH fuzz/corpus-perfdata
 * (fuzz/make-perfdata-seeds.py rewrites the seeds).  To keep a campaign
 * going past known reader bugs: FUZZ_PERFDATA_PAD_HEADER=1 (see pad_header)
 * and ASAN_OPTIONS=max_allocation_size_mb=1024:allocator_may_return_null=1
 * with -malloc_limit_mb=100000 (HEADER_ATTR with attr.size near 2^32). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_tmpdir.h"
#include "fuzz_touch.h"
#include <perfgraft/common.h>
#include <perfgraft/perfdata.h>

/* FUZZ_PERFDATA_PAD_HEADER=1: inputs shorter than the 104-byte file header
 * are copied into a zero-padded 104-byte buffer (the length passed stays
 * the input's), so that the reader's header reads before its length check
 * do not stop a campaign. */
static int pad_header;
static char outpath[sizeof(fuzz_tmpdir) + 16];

static uint64_t touch_bytes(const uint8_t *p, uint64_t n)
{
	uint64_t sum = 0;

	if (!p && n)
		abort();
	for (uint64_t i = 0; i < n; i++)
		sum += p[i];
	return sum;
}

static uint64_t touch_meta(const pg_perfdata *pd)
{
	uint64_t sum = pg_perfdata_pipe(pd) + pg_perfdata_big_endian(pd) +
		       pg_perfdata_data_size(pd) + touch_str(pg_perfdata_name(pd));
	const struct pg_pd_time_conv *tc = pg_perfdata_time_conv(pd);

	for (size_t i = 0; i < pg_perfdata_nattrs(pd); i++) {
		const struct pg_pd_attr *a = pg_perfdata_attr(pd, i);

		if (!a || !a->raw || a->raw_size < 64)
			abort();
		sum += touch_bytes(a->raw, a->raw_size) + a->type + a->config +
		       a->sample_type + a->flags + a->sample_id_all + a->use_clockid +
		       (uint32_t)a->clockid;
		for (size_t j = 0; j < a->nr_ids; j++)
			sum += a->ids[j];
	}
	if (pg_perfdata_attr(pd, pg_perfdata_nattrs(pd)))
		abort();
	for (size_t i = 0; i < pg_perfdata_nfeatures(pd); i++) {
		const struct pg_pd_feature *f = pg_perfdata_feature(pd, i);

		if (!f || f->bit >= PG_FEAT_MAX)
			abort();
		if (i && f->bit <= pg_perfdata_feature(pd, i - 1)->bit)
			abort();	/* not ascending */
		sum += f->bit + touch_bytes(f->data, f->size);
	}
	if (tc)
		sum += tc->time_shift + tc->time_mult + tc->time_zero +
		       tc->time_cycles + tc->time_mask;
	return sum;
}

/* What pg_perfdata_next() decoded (owning attr, time, pid/tid). */
static uint64_t decoded(const struct pg_pd_rec *r)
{
	return (uint32_t)r->attr * 3 + r->has_time * 5 + r->has_tid * 7 + r->time +
	       r->pid * 11 + r->tid * 13;
}

static uint64_t touch_rec(const pg_perfdata *pd, const struct pg_pd_rec *r)
{
	uint64_t sum = r->type + r->misc + r->size + r->offset + r->compressed;
	struct pg_pd_mmap mm;
	int32_t pid, tid;

	if (r->size < 8 || !r->data)
		abort();
	if (pg_pd_u16(pd, r->data + 6) != r->size || pg_pd_u32(pd, r->data) != r->type)
		abort();	/* decoded header disagrees with the bytes */
	if (r->attr >= (int)pg_perfdata_nattrs(pd) && r->attr != -1 && pg_perfdata_nattrs(pd))
		abort();
	sum += touch_bytes(r->data, r->size);
	sum += touch_bytes(r->extra, r->extra_size);
	if (pg_perfdata_own_tid(pd, r, &pid, &tid)) {
		/* the record's own words: a SAMPLE's are the decoded ones, an
		 * MMAP's are what pg_perfdata_mmap() reads */
		if (r->type == PG_PERF_RECORD_SAMPLE &&
		    ((uint32_t)pid != r->pid || (uint32_t)tid != r->tid))
			abort();
		sum += (uint32_t)pid * 17u + (uint32_t)tid * 19u;
	}
	if ((r->type == PG_PERF_RECORD_MMAP || r->type == PG_PERF_RECORD_MMAP2) &&
	    pg_perfdata_mmap(pd, r, &mm) == 0) {
		if (mm.filename < (const char *)r->data ||
		    mm.filename >= (const char *)r->data + r->size)
			abort();
		if (!pg_perfdata_own_tid(pd, r, &pid, &tid) || (uint32_t)pid != mm.pid ||
		    (uint32_t)tid != mm.tid)
			abort();
		sum += mm.pid + mm.tid + mm.start + mm.len + mm.pgoff + mm.prot +
		       mm.exec + touch_str(mm.filename);
	}
	return sum;
}

/* A file name from the input: short normally, sometimes too long for a
 * record (the writer must refuse it, not overflow). */
static void make_name(char *buf, size_t cap, const uint8_t *data, size_t size, size_t salt)
{
	size_t n = 24;

	if (size > salt && data[salt] == 0xff)
		n = cap - 1;	/* ~70000 bytes: larger than a record can hold */
	else if (size > salt)
		n = 8 + data[salt] % 200;
	if (n >= cap)
		n = cap - 1;
	memset(buf, 'a', n);
	memcpy(buf, "/tmp/jit/", n < 9 ? n : 9);
	buf[n] = 0;
}

struct walk {
	uint64_t records, sum, dec;
	bool inband_attr;	/* a HEADER_ATTR record in a file-mode data section */
	int last;		/* 0 end, negative error */
};

static void walk(pg_perfdata *pd, pg_pdw *w, size_t inject_at, struct walk *res,
		 uint64_t *written, int *w_err, const uint8_t *data, size_t size)
{
	static char name[70000];
	struct pg_pd_rec r;
	int ret;
	bool injected = false;

	memset(res, 0, sizeof(*res));
	while ((ret = pg_perfdata_next(pd, &r)) > 0) {
		res->sum += touch_rec(pd, &r);
		res->dec = res->dec * 31 + decoded(&r);
		res->records++;
		if (r.type == PG_PERF_RECORD_HEADER_ATTR && !pg_perfdata_pipe(pd))
			res->inband_attr = true;
		if (w && !*w_err) {
			*w_err = pg_pdw_write(w, r.data, r.size, r.extra, r.extra_size);
			if (!*w_err)
				(*written)++;
		}
		if (w && !*w_err && !injected && res->records == inject_at) {
			struct pg_pdw_mmap2 m;
			static const uint8_t id[20] = { 1, 2, 3, 4, 5 };

			memset(&m, 0, sizeof(m));
			make_name(name, sizeof(name), data, size, 3);
			m.pid = m.tid = 42;
			m.start = 0x1000;
			m.len = 0x2000;
			m.prot = 5;
			m.flags = 2;
			m.filename = name;
			m.time = r.has_time ? r.time : 1;
			m.id = 7;
			if (pg_pdw_mmap2(w, pg_perfdata_attr(pd, 0), &m) == 0)
				(*written)++;
			make_name(name, sizeof(name), data, size, 5);
			if (pg_pdw_build_id(w, -1, 2, id, size > 6 ? data[6] % 24 : 20, name) == 0 &&
			    pg_perfdata_pipe(pd))
				(*written)++;
			injected = true;
		}
	}
	res->last = ret;
}

static void one_input(const uint8_t *data, size_t size)
{
	struct pg_diag diag, wdiag;
	struct pg_pdw_opts wo;
	struct walk first, second;
	pg_perfdata *pd = NULL;
	pg_pdw *w = NULL;
	uint64_t written = 0;
	int w_err = 0, ret;
	size_t inject_at = size ? 1 + data[size - 1] % 8 : 1;

	memset(&diag, 0, sizeof(diag));
	diag.warn = NULL;
	memset(&wdiag, 0, sizeof(wdiag));
	wdiag.warn = NULL;
	if (pg_perfdata_open_mem(data, size, "fuzz", &diag, &pd) < 0)
		return;
	sink += touch_meta(pd);

	if (fuzz_have_tmpdir) {
		memset(&wo, 0, sizeof(wo));
		wo.sz = sizeof(wo);
		wo.pipe = pg_perfdata_pipe(pd);
		wo.big_endian = pg_perfdata_big_endian(pd);
		if (pg_pdw_open(outpath, &wo, &wdiag, &w) < 0)
			w = NULL;
	}
	if (w && !wo.pipe) {
		for (size_t i = 0; !w_err && i < pg_perfdata_nattrs(pd); i++) {
			const struct pg_pd_attr *a = pg_perfdata_attr(pd, i);

			w_err = pg_pdw_add_attr(w, a->raw, a->raw_size, a->ids, a->nr_ids);
		}
		for (size_t i = 0; !w_err && i < pg_perfdata_nfeatures(pd); i++) {
			const struct pg_pd_feature *f = pg_perfdata_feature(pd, i);

			if (f->bit != PG_FEAT_COMPRESSED)
				w_err = pg_pdw_add_feature(w, f->bit, f->data, f->size);
		}
	}

	walk(pd, w, inject_at, &first, &written, &w_err, data, size);
	sink += first.sum + touch_meta(pd);

	/* the second walk must see the same records, decoded the same way.
	 * Not the decoding when a file-mode data section has a HEADER_ATTR
	 * record: the reader keeps the attrs it added across a rewind, so the
	 * second walk decodes the records before it against them (known). */
	size_t nattrs = pg_perfdata_nattrs(pd);

	if (pg_perfdata_rewind(pd) == 0) {
		walk(pd, NULL, 0, &second, NULL, NULL, data, size);
		if (second.records != first.records || second.sum != first.sum ||
		    (second.last < 0) != (first.last < 0) ||
		    (!first.inband_attr && (second.dec != first.dec ||
					    pg_perfdata_nattrs(pd) != nattrs))) {
			fprintf(stderr, "fuzz_perfdata: rewind: first walk %llu records (end %d, decoded %llx, %zu attrs), second %llu (end %d, decoded %llx, %zu attrs)\n",
				(unsigned long long)first.records, first.last,
				(unsigned long long)first.dec, nattrs,
				(unsigned long long)second.records, second.last,
				(unsigned long long)second.dec, pg_perfdata_nattrs(pd));
			abort();
		}
	}

	if (w) {
		bool nested = false;

		ret = w_err ? w_err : 0;
		if (w_err) {
			pg_pdw_abort(w);
		} else {
			ret = pg_pdw_close(w);
		}
		/* read it back.  Not when nothing was written in file mode: an
		 * empty data section has data.size 0, which the reader (like
		 * perf) takes for a recording that was killed, and then reads
		 * the feature table as records. */
		if (!ret && (written || wo.pipe)) {
			pg_perfdata *back = NULL;
			struct pg_pd_rec r;
			uint64_t n = 0;
			struct pg_diag bdiag;

			memset(&bdiag, 0, sizeof(bdiag));
			if (pg_perfdata_open(outpath, &bdiag, &back) < 0) {
				fprintf(stderr, "fuzz_perfdata: cannot read back what was written: %s\n",
					bdiag.err);
				abort();
			}
			while ((ret = pg_perfdata_next(back, &r)) > 0) {
				n++;
				if (r.compressed)
					nested = true;
				sink += touch_rec(back, &r);
			}
			/* a COMPRESSED record inside compressed data comes out as a
			 * record and is decompressed when read back: not counted */
			if (!nested && (ret < 0 || n != written || bdiag.nwarn)) {
				fprintf(stderr, "fuzz_perfdata: read back %llu records (end %d, %lu warnings: %s), %llu written\n",
					(unsigned long long)n, ret, bdiag.nwarn, bdiag.err,
					(unsigned long long)written);
				abort();
			}
			pg_perfdata_close(back);
		}
		(void)unlink(outpath);
		fuzz_tmpdir_sweep();
	}
	pg_perfdata_close(pd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *pad = getenv("FUZZ_PERFDATA_PAD_HEADER");

	(void)argc;
	(void)argv;
	pad_header = pad && *pad == '1';
	if (fuzz_tmpdir_make("fuzz_perfdata", "the writer is not exercised") == 0)
		snprintf(outpath, sizeof(outpath), "%s/out.data", fuzz_tmpdir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (pad_header && size < 104) {
		uint8_t buf[104] = { 0 };

		memcpy(buf, data, size);
		one_input(buf, size);
		return 0;
	}
	one_input(data, size);
	return 0;
}
