/* SPDX-License-Identifier: MIT */
/* perf.data synthesis: the header pieces and records that are not on a
 * hot path, encoded into a caller's buffer (see synth.h; no writer here). */
#include <string.h>

#include "perfdata/synth.h"

void pg_synth_comm(struct pg_rec *r, uint32_t pid, uint32_t tid, const char *comm,
		   size_t name_size, uint64_t sample_type, const struct pg_synth_sample *s)
{
	char name[16] = { 0 };

	strncpy(name, comm, sizeof(name) - 1);
	if (!name_size || name_size > sizeof(name))
		name_size = pg_align(strlen(name) + 1, 8);
	pg_rec_start(r, PG_PERF_RECORD_COMM, 0);
	pg_rec_u32(r, pid);
	pg_rec_u32(r, tid);
	pg_rec_add(r, name, name_size);
	pg_synth_sample_id(r, sample_type, s);
}

void pg_synth_mmap2(struct pg_rec *r, const struct pg_pdw_mmap2 *m, uint64_t sample_type,
		    const struct pg_synth_sample *s)
{
	size_t n = strlen(m->filename), nlen = pg_align(n + 1, 8);
	uint8_t *p;

	pg_rec_start(r, PG_PERF_RECORD_MMAP2, PG_PERF_RECORD_MISC_USER);
	pg_rec_u32(r, m->pid);
	pg_rec_u32(r, m->tid);
	pg_rec_u64(r, m->start);
	pg_rec_u64(r, m->len);
	pg_rec_u64(r, m->pgoff);
	pg_rec_u32(r, m->maj);
	pg_rec_u32(r, m->min);
	pg_rec_u64(r, m->ino);
	pg_rec_u64(r, m->ino_generation);
	pg_rec_u32(r, m->prot);
	pg_rec_u32(r, m->flags);
	if ((p = pg_rec_claim(r, nlen))) {
		memset(p, 0, nlen);
		memcpy(p, m->filename, n);
	}
	pg_synth_sample_id(r, sample_type, s);
}

void pg_synth_attr_raw(uint8_t raw[PG_SYNTH_ATTR_SIZE], bool big_endian,
		       const struct pg_synth_attr *a)
{
	struct pg_rec r = { .p = raw, .cap = PG_SYNTH_ATTR_SIZE, .big_endian = big_endian };

	memset(raw, 0, PG_SYNTH_ATTR_SIZE);
	pg_rec_u32(&r, a->type);
	pg_rec_u32(&r, PG_SYNTH_ATTR_SIZE);
	pg_rec_u64(&r, a->config);
	pg_rec_u64(&r, a->period);
	pg_rec_u64(&r, a->sample_type);
	pg_rec_u64(&r, a->read_format);
	pg_rec_u64(&r, a->flags);
	r.len = 92;	/* after wakeup, bp, branch, regs and stack fields */
	pg_rec_u32(&r, (uint32_t)a->clockid);
}

void pg_synth_str(struct pg_buf *b, const char *str)
{
	size_t n = pg_align(strlen(str) + 1, 64);

	pg_buf_u32(b, (uint32_t)n);
	if (pg_buf_reserve(b, n)) {
		memset(b->p + b->len, 0, n);
		memcpy(b->p + b->len, str, strlen(str));
		b->len += n;
	}
}

void pg_synth_event_desc(struct pg_buf *b, const struct pg_synth_attr *a, size_t n)
{
	uint8_t raw[PG_SYNTH_ATTR_SIZE];

	pg_buf_u32(b, (uint32_t)n);
	pg_buf_u32(b, PG_SYNTH_ATTR_SIZE);
	for (size_t i = 0; i < n; i++) {
		pg_synth_attr_raw(raw, b->big_endian, &a[i]);
		pg_buf_add(b, raw, sizeof(raw));
		pg_buf_u32(b, (uint32_t)a[i].nr_ids);
		pg_synth_str(b, a[i].name ? a[i].name : "");
		for (size_t k = 0; k < a[i].nr_ids; k++)
			pg_buf_u64(b, a[i].ids[k]);
	}
}
