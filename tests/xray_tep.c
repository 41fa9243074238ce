/* SPDX-License-Identifier: MIT */
/* Reads a perf.data written by perfgraft xray the way a trace tool would:
 * the xray:* event formats are parsed out of the file's TRACING_DATA with
 * the system libtraceevent, and every tracepoint sample is decoded through
 * them.  Prints one line per event:
 *     EVENT tid=T name=... <field>=<value>... | <libtraceevent's print fmt output>
 * The Python tests compare these lines with the trace and with perf script.
 *
 * usage: xray_tep PERF.DATA */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <traceevent/event-parse.h>
#include <traceevent/trace-seq.h>

#include <perfgraft/perfdata.h>

static const uint8_t *skip_str(const uint8_t *p, const uint8_t *end)
{
	while (p < end && *p)
		p++;
	return p < end ? p + 1 : NULL;
}

/* Walks the blob to the event systems and parses each format. */
static int parse_blob(struct tep_handle *tep, const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;
	uint64_t sz;
	uint32_t cnt, nsys;

	if (n < 10 || memcmp(p, "\x17\x08\x44tracing", 10))
		return -1;
	p = skip_str(p + 10, end);	/* version */
	if (!p || end - p < 6)
		return -1;
	if (p[0])
		tep_set_file_bigendian(tep, TEP_BIG_ENDIAN);
	tep_set_long_size(tep, p[1]);
	tep_set_page_size(tep, (int)(p[2] | p[3] << 8 | p[4] << 16 | (uint32_t)p[5] << 24));
	p += 6;
	for (int i = 0; i < 2; i++) {	/* header_page, header_event */
		if (!(p = skip_str(p, end)) || end - p < 8)
			return -1;
		memcpy(&sz, p, 8);
		p += 8 + sz;
	}
	memcpy(&cnt, p, 4);		/* ftrace formats */
	p += 4;
	for (uint32_t i = 0; i < cnt; i++) {
		memcpy(&sz, p, 8);
		p += 8 + sz;
	}
	memcpy(&nsys, p, 4);
	p += 4;
	for (uint32_t s = 0; s < nsys; s++) {
		const char *sys = (const char *)p;

		if (!(p = skip_str(p, end)))
			return -1;
		memcpy(&cnt, p, 4);
		p += 4;
		for (uint32_t i = 0; i < cnt; i++) {
			memcpy(&sz, p, 8);
			p += 8;
			if (sz > (uint64_t)(end - p) ||
			    tep_parse_event(tep, (const char *)p, sz, sys) != 0) {
				fprintf(stderr, "xray_tep: libtraceevent cannot parse format %u of %s\n", i, sys);
				return -1;
			}
			p += sz;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct pg_diag diag = { 0 };
	struct tep_handle *tep = tep_alloc();
	struct pg_pd_rec rec;
	pg_perfdata *pd;
	bool have_blob = false;
	unsigned long nev = 0;
	int ret;

	if (argc != 2 || !tep) {
		fprintf(stderr, "usage: xray_tep PERF.DATA\n");
		return 2;
	}
	if (pg_perfdata_open(argv[1], &diag, &pd) < 0) {
		fprintf(stderr, "xray_tep: %s\n", diag.err);
		return 1;
	}
	for (size_t i = 0; i < pg_perfdata_nfeatures(pd); i++) {
		const struct pg_pd_feature *f = pg_perfdata_feature(pd, i);

		if (f->bit == PG_FEAT_TRACING_DATA) {
			if (parse_blob(tep, f->data, f->size) < 0) {
				fprintf(stderr, "xray_tep: bad tracing data\n");
				return 1;
			}
			have_blob = true;
		}
	}
	if (!have_blob) {
		fprintf(stderr, "xray_tep: no TRACING_DATA feature\n");
		return 1;
	}
	while ((ret = pg_perfdata_next(pd, &rec)) > 0) {
		const struct pg_pd_attr *a;
		const uint8_t *p = rec.data + 8, *end = rec.data + rec.size;
		struct tep_record tr = { 0 };
		struct tep_event *ev;
		struct trace_seq s;
		uint64_t st;
		uint32_t raw_size;

		if (rec.type != PG_PERF_RECORD_SAMPLE || rec.attr < 0)
			continue;
		a = pg_perfdata_attr(pd, (size_t)rec.attr);
		if (a->type != 2)
			continue;
		st = a->sample_type;
		/* the fields before RAW, in perf's order */
		p += 8 * (!!(st & PG_SAMPLE_IDENTIFIER) + !!(st & PG_SAMPLE_IP) +
			  !!(st & PG_SAMPLE_TID) + !!(st & PG_SAMPLE_TIME) + !!(st & PG_SAMPLE_ADDR) +
			  !!(st & PG_SAMPLE_ID) + !!(st & PG_SAMPLE_STREAM_ID) +
			  !!(st & PG_SAMPLE_CPU) + !!(st & (1u << 8)));
		if (st & (1u << 5)) {	/* CALLCHAIN */
			uint64_t nr;

			memcpy(&nr, p, 8);
			p += 8 + 8 * nr;
		}
		if (!(st & (1u << 10)) || p + 4 > end) {
			fprintf(stderr, "xray_tep: tracepoint sample without RAW at offset %llu\n",
				(unsigned long long)rec.offset);
			return 1;
		}
		memcpy(&raw_size, p, 4);
		tr.data = (void *)(p + 4);
		tr.size = (int)raw_size;
		tr.ts = rec.time;
		ev = tep_find_event_by_record(tep, &tr);
		if (!ev) {
			fprintf(stderr, "xray_tep: no format for the event at offset %llu\n",
				(unsigned long long)rec.offset);
			return 1;
		}
		trace_seq_init(&s);
		trace_seq_printf(&s, "%s tid=%u", ev->name, rec.tid);
		for (struct tep_format_field *f = ev->format.fields; f; f = f->next) {
			unsigned long long v;

			if (f->flags & TEP_FIELD_IS_DYNAMIC) {
				int len;
				const char *d = tep_get_field_raw(&s, ev, f->name, &tr, &len, 0);

				/* char[] is text; unsigned char[] is a payload */
				if (strstr(f->type, " char[]") && !strstr(f->type, "unsigned")) {
					trace_seq_printf(&s, " %s=%s", f->name, d ? d : "");
				} else {
					trace_seq_printf(&s, " %s=", f->name);
					for (int i = 0; d && i < len; i++)
						trace_seq_printf(&s, "%02x", (unsigned char)d[i]);
				}
			} else if (!tep_get_field_val(&s, ev, f->name, &tr, &v, 0)) {
				trace_seq_printf(&s, " %s=%llu", f->name, v);
			}
		}
		trace_seq_puts(&s, " | ");
		tep_print_event(tep, &s, &tr, "%s", TEP_PRINT_INFO);
		trace_seq_terminate(&s);
		printf("%s\n", s.buffer);
		trace_seq_destroy(&s);
		nev++;
	}
	pg_perfdata_close(pd);
	tep_free(tep);
	if (ret < 0) {
		fprintf(stderr, "xray_tep: %s\n", diag.err);
		return 1;
	}
	fprintf(stderr, "xray_tep: %lu events\n", nev);
	return 0;
}
