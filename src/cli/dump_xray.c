/* SPDX-License-Identifier: MIT */
/* perfgraft dump for XRay traces: every record with its absolute time. */
#include <stdlib.h>
#include <string.h>

#include <perfgraft/xray.h>
#include "cli/cli.h"

static void hex(FILE *f, const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

static bool is_function(enum pg_xr_kind k)
{
	return k <= PG_XR_ENTER_ARG;
}

static void text_record(const struct pg_xr_record *r, const struct pg_xr_header *h)
{
	printf("%10llu  %-14s", (unsigned long long)r->offset, pg_xray_kind_name(r->kind));
	switch (r->kind) {
	case PG_XR_ENTER:
	case PG_XR_EXIT:
	case PG_XR_TAIL_EXIT:
	case PG_XR_ENTER_ARG:
		printf(" id %u tsc %llu", r->func_id, (unsigned long long)r->tsc);
		if (h->type == PG_XRAY_FDR)
			printf(" (%+lld)", (long long)r->delta);
		printf(" pid %u tid %u cpu %u", r->pid, r->tid, r->cpu);
		if (r->kind == PG_XR_ENTER_ARG) {
			printf(" args");
			for (uint32_t i = 0; i < r->nargs; i++)
				printf(" 0x%llx", (unsigned long long)r->args[i]);
		}
		break;
	case PG_XR_CUSTOM:
	case PG_XR_TYPED:
		printf(" tsc %llu", (unsigned long long)r->tsc);
		if (h->type == PG_XRAY_FDR && h->version >= 5)
			printf(" (%+lld)", (long long)r->delta);
		printf(" pid %u tid %u cpu %u", r->pid, r->tid, r->cpu);
		if (r->kind == PG_XR_TYPED)
			printf(" type %u", r->event_type);
		printf(" size %u data ", r->payload_size);
		hex(stdout, r->payload, r->payload_size > 64 ? 64 : r->payload_size);
		if (r->payload_size > 64)
			printf("...");
		break;
	case PG_XR_THREAD_END:
		printf(" pid %u tid %u tsc %llu", r->pid, r->tid, (unsigned long long)r->tsc);
		break;
	case PG_XR_NEW_BUFFER:
		printf(" tid %u", r->tid);
		break;
	case PG_XR_NEW_CPU:
		printf(" cpu %u tsc %llu", r->cpu, (unsigned long long)r->tsc);
		break;
	case PG_XR_TSC_WRAP:
		printf(" tsc %llu", (unsigned long long)r->tsc);
		break;
	case PG_XR_WALLCLOCK:
		printf(" %llu.%06u", (unsigned long long)r->value, r->usec);
		break;
	case PG_XR_BUFFER_EXTENTS:
		printf(" %llu bytes", (unsigned long long)r->value);
		break;
	case PG_XR_PID:
		printf(" pid %u", r->pid);
		break;
	case PG_XR_CALL_ARG:
		printf(" 0x%llx", (unsigned long long)r->value);
		if (h->type == PG_XRAY_BASIC)
			printf(" id %u pid %u tid %u", r->func_id, r->pid, r->tid);
		break;
	case PG_XR_SKIPPED:
		printf(" %llu bytes after the end of the buffer", (unsigned long long)r->value);
		break;
	case PG_XR_END_OF_BUFFER:
		break;
	}
	printf("\n");
}

static void json_record(const struct pg_xr_record *r, const struct pg_xr_header *h, bool first)
{
	printf("%s\n  {\"offset\":%llu,\"kind\":\"%s\",\"size\":%u", first ? "" : ",",
	       (unsigned long long)r->offset, pg_xray_kind_name(r->kind), r->size);
	if (is_function(r->kind) || r->kind == PG_XR_CUSTOM || r->kind == PG_XR_TYPED) {
		if (is_function(r->kind))
			printf(",\"func_id\":%u", r->func_id);
		printf(",\"tsc\":%llu,\"pid\":%u,\"tid\":%u,\"cpu\":%u", (unsigned long long)r->tsc,
		       r->pid, r->tid, r->cpu);
		if (h->type == PG_XRAY_FDR && (is_function(r->kind) || h->version >= 5))
			printf(",\"delta\":%lld", (long long)r->delta);
	}
	switch (r->kind) {
	case PG_XR_ENTER_ARG:
		printf(",\"args\":[");
		for (uint32_t i = 0; i < r->nargs; i++)
			printf("%s%llu", i ? "," : "", (unsigned long long)r->args[i]);
		printf("]");
		break;
	case PG_XR_TYPED:
		printf(",\"event_type\":%u", r->event_type);
		/* fall through */
	case PG_XR_CUSTOM:
		printf(",\"payload_size\":%u,\"data\":\"", r->payload_size);
		hex(stdout, r->payload, r->payload_size);
		printf("\"");
		break;
	case PG_XR_THREAD_END:
		printf(",\"pid\":%u,\"tid\":%u,\"tsc\":%llu", r->pid, r->tid, (unsigned long long)r->tsc);
		break;
	case PG_XR_NEW_BUFFER:
		printf(",\"tid\":%u", r->tid);
		break;
	case PG_XR_NEW_CPU:
		printf(",\"cpu\":%u,\"tsc\":%llu", r->cpu, (unsigned long long)r->tsc);
		break;
	case PG_XR_TSC_WRAP:
		printf(",\"tsc\":%llu", (unsigned long long)r->tsc);
		break;
	case PG_XR_WALLCLOCK:
		printf(",\"seconds\":%llu,\"usec\":%u", (unsigned long long)r->value, r->usec);
		break;
	case PG_XR_BUFFER_EXTENTS:
	case PG_XR_CALL_ARG:
		printf(",\"value\":%llu", (unsigned long long)r->value);
		if (r->kind == PG_XR_CALL_ARG && h->type == PG_XRAY_BASIC)
			printf(",\"func_id\":%u,\"pid\":%u,\"tid\":%u", r->func_id, r->pid, r->tid);
		break;
	case PG_XR_PID:
		printf(",\"pid\":%u", r->pid);
		break;
	case PG_XR_SKIPPED:
		printf(",\"size\":%llu", (unsigned long long)r->value);
		break;
	default:
		break;
	}
	printf("}");
}

int dump_xray(const char *path, bool json, bool time_order, struct cli_warnings *w)
{
	struct pg_diag diag;
	struct pg_xray_stats st = { .sz = sizeof(st) };
	struct pg_xr_record rec;
	const struct pg_xr_header *h;
	pg_xray *t;
	bool first = true;
	int ret;

	cli_diag_init(&diag, w);
	ret = pg_xray_open(path, time_order ? 0 : PG_XRAY_FILE_ORDER, &diag, &t);
	if (ret < 0) {
		if (json) {
			printf("{\"format\":\"xray\",\"file\":");
			json_str(stdout, cli_shown_path(path, true));
			printf(",\"header\":null,\"records\":[],\"warnings\":[],\"warnings_omitted\":0,\"error\":");
			json_shown_err(stdout, diag.err);
			printf("}\n");
		}
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	h = pg_xray_header(t);
	if (json) {
		printf("{\"format\":\"xray\",\"file\":");
		json_str(stdout, cli_shown_path(path, true));
		printf(",\"header\":{\"version\":%u,\"type\":\"%s\",\"flags\":%u,\"cycle_frequency\":%llu,\"buffer_size\":%llu,\"byte_order\":\"%s\"},\n\"records\":[",
		       h->version, h->type == PG_XRAY_FDR ? "fdr" : "basic", h->flags,
		       (unsigned long long)h->cycle_frequency, (unsigned long long)h->buffer_size,
		       h->big_endian ? "big" : "little");
	} else {
		printf("%s: XRay %s trace version %u, %s-endian, %llu ticks/s%s%s",
		       cli_shown_path(path, true), h->type == PG_XRAY_FDR ? "FDR" : "basic-mode",
		       h->version,
		       h->big_endian ? "big" : "little", (unsigned long long)h->cycle_frequency,
		       h->flags & 1 ? ", constant TSC" : "", h->flags & 2 ? ", nonstop TSC" : "");
		if (h->type == PG_XRAY_FDR)
			printf(", buffer size %llu", (unsigned long long)h->buffer_size);
		printf("\n%s    offset  record\n", time_order ? "records in time order (threads merged):\n" : "");
	}
	while ((ret = pg_xray_next(t, &rec)) > 0) {
		if (json)
			json_record(&rec, h, first);
		else
			text_record(&rec, h);
		first = false;
	}
	pg_xray_stats(t, &st);
	if (json) {
		printf("\n],");
		json_warnings_error(stdout, w, ret < 0 ? diag.err : NULL);
		printf(",\"summary\":{\"buffers\":%llu,\"records\":%llu,\"enters\":%llu,\"exits\":%llu,\"tail_exits\":%llu,\"args\":%llu,\"custom\":%llu,\"typed\":%llu,\"threads\":%llu,\"damaged_buffers\":%llu,\"truncated_bytes\":%llu,\"orphan_args\":%llu}}\n",
		       (unsigned long long)st.buffers, (unsigned long long)st.records,
		       (unsigned long long)st.enters, (unsigned long long)st.exits,
		       (unsigned long long)st.tail_exits, (unsigned long long)st.args,
		       (unsigned long long)st.custom, (unsigned long long)st.typed,
		       (unsigned long long)st.threads, (unsigned long long)st.damaged_buffers,
		       (unsigned long long)st.truncated_bytes, (unsigned long long)st.orphan_args);
	} else {
		printf("summary: %llu %s, %llu threads, %llu records: %llu entries (%llu arguments), %llu exits, %llu tail exits, %llu custom and %llu typed events",
		       (unsigned long long)st.buffers, h->type == PG_XRAY_FDR ? "buffers" : "chunks",
		       (unsigned long long)st.threads, (unsigned long long)st.records,
		       (unsigned long long)st.enters, (unsigned long long)st.args,
		       (unsigned long long)st.exits, (unsigned long long)st.tail_exits,
		       (unsigned long long)st.custom, (unsigned long long)st.typed);
		if (st.damaged_buffers)
			printf("; %llu damaged", (unsigned long long)st.damaged_buffers);
		if (st.truncated_bytes)
			printf("; %llu bytes cut off", (unsigned long long)st.truncated_bytes);
		printf("\n");
	}
	pg_xray_close(t);
	if (ret < 0) {
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	return 0;
}
