/* SPDX-License-Identifier: MIT */
/* perfgraft dump for perf.data: header, attrs, features and records. */
#include <string.h>
#include <nettle/sha1.h>

#include <perfgraft/perfdata.h>
#include "cli/cli.h"

struct counts {
	uint64_t n[256], other;
};

/* The pid/tid to show: the record's own where it has them (perf prints
 * those), else the sample_id trailer's.  *id_differs: the trailer holds
 * others, shown beside them (perf's synthesized kernel MMAP: pid -1 in the
 * record, 0 in the trailer). */
static bool rec_tid(const pg_perfdata *pd, const struct pg_pd_rec *r, int32_t *pid,
		    int32_t *tid, bool *id_differs)
{
	*id_differs = false;
	if (pg_perfdata_own_tid(pd, r, pid, tid)) {
		*id_differs = r->has_tid && r->type != PG_PERF_RECORD_SAMPLE &&
			      ((uint32_t)*pid != r->pid || (uint32_t)*tid != r->tid);
		return true;
	}
	*pid = (int32_t)r->pid;
	*tid = (int32_t)r->tid;
	return r->has_tid;
}

static void text_rec(const pg_perfdata *pd, const struct pg_pd_rec *r)
{
	struct pg_pd_mmap mm;
	int32_t pid, tid;
	bool id_differs;

	printf("%10llu  %-16s size %5u misc 0x%04x", (unsigned long long)r->offset,
	       pg_perfdata_record_name(r->type), r->size, r->misc);
	if (r->type >= 22 && r->type < 64)
		printf(" type %u", r->type);
	if (r->has_time)
		printf(" time %llu", (unsigned long long)r->time);
	if (rec_tid(pd, r, &pid, &tid, &id_differs))
		printf(" pid %d tid %d", pid, tid);
	if (id_differs)
		printf(" (sample_id pid %d tid %d)", (int32_t)r->pid, (int32_t)r->tid);
	if (!pg_perfdata_mmap(pd, r, &mm)) {
		printf(" [0x%llx, +0x%llx) pgoff 0x%llx prot %u ", (unsigned long long)mm.start,
		       (unsigned long long)mm.len, (unsigned long long)mm.pgoff, mm.prot);
		out_escaped(stdout, mm.filename);
	} else if (r->type == PG_PERF_RECORD_COMM && r->size > 16 &&
		   memchr(r->data + 16, 0, r->size - 16u)) {
		printf(" ");
		out_escaped(stdout, (const char *)r->data + 16);
	}
	if (r->extra_size)
		printf(" +%llu bytes", (unsigned long long)r->extra_size);
	if (r->compressed)
		printf(" (compressed)");
	printf("\n");
}

static void json_rec(const pg_perfdata *pd, const struct pg_pd_rec *r, bool first)
{
	struct pg_pd_mmap mm;
	int32_t pid, tid;
	bool id_differs;

	printf("%s\n  {\"offset\":%llu,\"type\":%u,\"name\":\"%s\",\"misc\":%u,\"size\":%u,\"extra_size\":%llu",
	       first ? "" : ",", (unsigned long long)r->offset, r->type, pg_perfdata_record_name(r->type), r->misc,
	       r->size, (unsigned long long)r->extra_size);
	if (r->has_time)
		printf(",\"time\":%llu", (unsigned long long)r->time);
	if (rec_tid(pd, r, &pid, &tid, &id_differs))
		printf(",\"pid\":%d,\"tid\":%d", pid, tid);
	if (id_differs)
		printf(",\"sample_id_pid\":%d,\"sample_id_tid\":%d", (int32_t)r->pid,
		       (int32_t)r->tid);
	if (r->attr >= 0)
		printf(",\"attr\":%d", r->attr);
	if (!pg_perfdata_mmap(pd, r, &mm)) {
		printf(",\"start\":%llu,\"len\":%llu,\"pgoff\":%llu,\"prot\":%u,\"filename\":",
		       (unsigned long long)mm.start, (unsigned long long)mm.len,
		       (unsigned long long)mm.pgoff, mm.prot);
		json_str(stdout, mm.filename);
	} else if (r->type == PG_PERF_RECORD_COMM && r->size > 16 &&
		   memchr(r->data + 16, 0, r->size - 16u)) {
		printf(",\"comm\":");
		json_str(stdout, (const char *)r->data + 16);
	}
	if (r->compressed)
		printf(",\"compressed\":true");
	printf("}");
}

static void attr_out(const pg_perfdata *pd, bool json)
{
	for (size_t i = 0; i < pg_perfdata_nattrs(pd); i++) {
		const struct pg_pd_attr *a = pg_perfdata_attr(pd, i);

		if (json) {
			printf("%s{\"type\":%u,\"size\":%u,\"config\":%llu,\"sample_type\":%llu,\"flags\":%llu,\"sample_id_all\":%s,\"use_clockid\":%s,\"clockid\":%d,\"ids\":[",
			       i ? "," : "", a->type, a->raw_size, (unsigned long long)a->config,
			       (unsigned long long)a->sample_type, (unsigned long long)a->flags,
			       a->sample_id_all ? "true" : "false", a->use_clockid ? "true" : "false",
			       a->clockid);
			for (size_t k = 0; k < a->nr_ids; k++)
				printf("%s%llu", k ? "," : "", (unsigned long long)a->ids[k]);
			printf("],\"raw_hex\":\"");
			for (uint32_t k = 0; k < a->raw_size; k++)
				printf("%02x", a->raw[k]);
			printf("\"}");
		} else {
			printf("attr %zu: type %u size %u config 0x%llx sample_type 0x%llx%s%s clockid %d, %zu ids\n",
			       i, a->type, a->raw_size, (unsigned long long)a->config,
			       (unsigned long long)a->sample_type,
			       a->sample_id_all ? " sample_id_all" : "",
			       a->use_clockid ? " use_clockid" : "", a->clockid, a->nr_ids);
		}
	}
}

int dump_perfdata(const char *path, bool json, struct cli_warnings *w)
{
	struct pg_diag diag;
	struct pg_pd_rec r;
	struct counts c = { { 0 }, 0 };
	pg_perfdata *pd;
	bool first = true;
	uint64_t nrec = 0;
	int ret;

	cli_diag_init(&diag, w);
	ret = pg_perfdata_open(path, &diag, &pd);
	if (ret < 0) {
		if (json) {
			printf("{\"format\":\"perf.data\",\"file\":");
			json_str(stdout, cli_shown_path(path, true));
			printf(",\"attrs\":[],\"features\":[],\"records\":[],\"warnings\":[],\"error\":");
			json_shown_err(stdout, diag.err);
			printf("}\n");
		}
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	if (json) {
		printf("{\"format\":\"perf.data\",\"file\":");
		json_str(stdout, cli_shown_path(path, true));
		printf(",\"mode\":\"%s\",\"byte_order\":\"%s\",\"header\":{\"version\":%d,\"data_size\":%llu},\n",
		       pg_perfdata_pipe(pd) ? "pipe" : "file",
		       pg_perfdata_big_endian(pd) ? "big" : "little", pg_perfdata_version(pd),
		       (unsigned long long)(pg_perfdata_pipe(pd) ? 0 : pg_perfdata_data_size(pd)));
		/* a pipe's attrs arrive with its records: listed after them */
		if (!pg_perfdata_pipe(pd)) {
			printf("\"attrs\":[");
			attr_out(pd, true);
			printf("],\n");
		}
		printf("\"features\":[");
		for (size_t i = 0; i < pg_perfdata_nfeatures(pd); i++) {
			const struct pg_pd_feature *f = pg_perfdata_feature(pd, i);
			struct sha1_ctx sc;
			uint8_t dig[SHA1_DIGEST_SIZE];

			sha1_init(&sc);
			sha1_update(&sc, (size_t)f->size, f->data);
			sha1_digest(&sc, sizeof(dig), dig);
			printf("%s{\"bit\":%u,\"name\":\"%s\",\"size\":%llu,\"sha1\":\"", i ? "," : "",
			       f->bit, pg_perfdata_feature_name(f->bit), (unsigned long long)f->size);
			for (size_t k = 0; k < sizeof(dig); k++)
				printf("%02x", dig[k]);
			printf("\"}");
		}
		printf("],\n\"records\":[");
	} else {
		printf("%s: perf.data%s, %s mode, %s-endian\n", path,
		       pg_perfdata_version(pd) == 1 ? " version 1 (PERFFILE)" : "",
		       pg_perfdata_pipe(pd) ? "pipe" : "file",
		       pg_perfdata_big_endian(pd) ? "big" : "little");
		attr_out(pd, false);
		for (size_t i = 0; i < pg_perfdata_nfeatures(pd); i++) {
			const struct pg_pd_feature *f = pg_perfdata_feature(pd, i);

			printf("feature %u %s: %llu bytes\n", f->bit, pg_perfdata_feature_name(f->bit),
			       (unsigned long long)f->size);
		}
		printf("    offset  record\n");
	}
	while ((ret = pg_perfdata_next(pd, &r)) > 0) {
		nrec++;
		if (r.type < 256)
			c.n[r.type]++;
		else
			c.other++;
		if (json)
			json_rec(pd, &r, first);
		else
			text_rec(pd, &r);
		first = false;
	}
	if (json) {
		printf("\n],\n");
		if (pg_perfdata_pipe(pd)) {
			printf("\"attrs\":[");
			attr_out(pd, true);
			printf("],");
		}
		printf("\"warnings\":[");
		for (size_t i = 0; i < w->n; i++) {
			if (i)
				printf(",");
			json_str(stdout, w->list[i]);
		}
		printf("],\"error\":");
		if (ret < 0)
			json_shown_err(stdout, diag.err);
		else
			printf("null");
		printf(",\"summary\":{\"records\":%llu,\"by_name\":{", (unsigned long long)nrec);
		first = true;
		for (unsigned t = 0; t < 256; t++)
			if (c.n[t]) {
				if (strcmp(pg_perfdata_record_name(t), "UNKNOWN"))
					printf("%s\"%s\":%llu", first ? "" : ",", pg_perfdata_record_name(t),
					       (unsigned long long)c.n[t]);
				else
					printf("%s\"UNKNOWN_%u\":%llu", first ? "" : ",", t,
					       (unsigned long long)c.n[t]);
				first = false;
			}
		printf("}}}\n");
	} else {
		printf("summary: %llu records:", (unsigned long long)nrec);
		for (unsigned t = 0; t < 256; t++)
			if (c.n[t])
				printf(" %llu %s", (unsigned long long)c.n[t], pg_perfdata_record_name(t));
		printf("\n");
	}
	pg_perfdata_close(pd);
	if (ret < 0) {
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	return 0;
}
