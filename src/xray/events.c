/* SPDX-License-Identifier: MIT */
/* The xray:* events in perf.data: their formats and their records, side
 * by side so that each event's fields and the bytes written for them
 * change together.
 *
 * The formats travel in the tracing data (trace-cmd "tracing" blob,
 * version 0.6), so that perf script, perf report -s trace_fields and
 * libtraceevent decode the events by field name.  The function's address
 * is the sample's IP (perf script -F +ip,+sym), not a field of the
 * per-call events: with tens of millions of them every byte counts.
 *
 * The records are tracepoint samples composed in the conversion's record
 * buffer (xray/convert.h), called by convert.c as it rebuilds the stacks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xray/events.h"

#define COMMON \
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" \
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" \
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" \
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"

/* Events carry the function's ID only: its name, address and source line
 * travel once, in the xray:function event written before the first event
 * that names it.  Trace time is the sample's time (the TSC converted with
 * the trace's cycle frequency).  Exits carry the latency twice: duration
 * in ns (rounded) for people, ticks and the trace's cycle frequency (freq,
 * 0 when the header says 0) for xray-account.py, which needs them to
 * print llvm-xray account's 7 significant digits. */
#define EXIT_FIELDS \
	"\tfield:u64 duration;\toffset:8;\tsize:8;\tsigned:0;\n" \
	"\tfield:u32 func_id;\toffset:16;\tsize:4;\tsigned:0;\n" \
	"\tfield:u32 depth;\toffset:20;\tsize:4;\tsigned:0;\n" \
	"\tfield:u32 flags;\toffset:24;\tsize:4;\tsigned:0;\n" \
	"\tfield:u64 ticks;\toffset:28;\tsize:8;\tsigned:0;\n" \
	"\tfield:u64 freq;\toffset:36;\tsize:8;\tsigned:0;\n\n" \
	"print fmt: \"id=%u depth=%u duration=%llu flags=%s\", " \
	"REC->func_id, REC->depth, REC->duration, __print_flags(REC->flags, \"|\", " \
	"{ 1, \"inferred\" }, { 2, \"unfinished\" }, { 4, \"no_entry\" })\n"

static const struct {
	const char *name;
	unsigned id;
	const char *body;
} formats[] = {
	{ "function_entry", PG_XRAY_EV_ENTRY,
	  "\tfield:u32 func_id;\toffset:8;\tsize:4;\tsigned:0;\n"
	  "\tfield:u32 depth;\toffset:12;\tsize:4;\tsigned:0;\n\n"
	  "print fmt: \"id=%u depth=%u\", REC->func_id, REC->depth\n" },
	{ "function_exit", PG_XRAY_EV_EXIT, EXIT_FIELDS },
	{ "tail_exit", PG_XRAY_EV_TAIL_EXIT, EXIT_FIELDS },
	{ "call_args", PG_XRAY_EV_CALL_ARGS,
	  "\tfield:u64 value;\toffset:8;\tsize:8;\tsigned:0;\n"
	  "\tfield:u32 func_id;\toffset:16;\tsize:4;\tsigned:0;\n"
	  "\tfield:u32 index;\toffset:20;\tsize:4;\tsigned:0;\n\n"
	  "print fmt: \"id=%u index=%u value=0x%llx\", REC->func_id, REC->index, REC->value\n" },
	{ "custom_event", PG_XRAY_EV_CUSTOM,
	  "\tfield:u32 size;\toffset:8;\tsize:4;\tsigned:0;\n"
	  "\tfield:__data_loc unsigned char[] data;\toffset:12;\tsize:4;\tsigned:0;\n\n"
	  "print fmt: \"size=%u data=%s\", REC->size, "
	  "__print_hex(__get_dynamic_array(data), __get_dynamic_array_len(data))\n" },
	{ "typed_event", PG_XRAY_EV_TYPED,
	  "\tfield:u32 size;\toffset:8;\tsize:4;\tsigned:0;\n"
	  "\tfield:u32 event_type;\toffset:12;\tsize:4;\tsigned:0;\n"
	  "\tfield:__data_loc unsigned char[] data;\toffset:16;\tsize:4;\tsigned:0;\n\n"
	  "print fmt: \"type=%u size=%u data=%s\", REC->event_type, REC->size, "
	  "__print_hex(__get_dynamic_array(data), __get_dynamic_array_len(data))\n" },
	{ "function", PG_XRAY_EV_FUNCTION,
	  "\tfield:u64 addr;\toffset:8;\tsize:8;\tsigned:0;\n"
	  "\tfield:u32 func_id;\toffset:16;\tsize:4;\tsigned:0;\n"
	  "\tfield:u32 line;\toffset:20;\tsize:4;\tsigned:0;\n"
	  "\tfield:u32 column;\toffset:24;\tsize:4;\tsigned:0;\n"
	  "\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n"
	  "\tfield:__data_loc char[] file;\toffset:32;\tsize:4;\tsigned:0;\n\n"
	  "print fmt: \"id=%u addr=0x%llx name=%s file=%s line=%u column=%u\", REC->func_id, "
	  "REC->addr, __get_str(name), __get_str(file), REC->line, REC->column\n" },
};

/* A ring-buffer page as the kernel describes it; perf wants it non-empty. */
static const char header_page[] =
	"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
	"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
	"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
	"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";

static const char header_event[] =
	"# compressed entry header\n"
	"\ttype_len    :    5 bits\n"
	"\ttime_delta  :   27 bits\n"
	"\tarray       :   32 bits\n";

static void sized_text(struct pg_buf *b, const char *s)
{
	pg_buf_u64(b, strlen(s));
	pg_buf_add(b, s, strlen(s));
}

void pg_xray_tracing_data(struct pg_buf *b)
{
	static const char magic[] = { 0x17, 0x08, 0x44, 't', 'r', 'a', 'c', 'i', 'n', 'g' };
	char text[4096];

	pg_buf_add(b, magic, sizeof(magic));
	pg_buf_str(b, "0.6");
	pg_buf_u8(b, b->big_endian);
	pg_buf_u8(b, 8);		/* sizeof(long) */
	pg_buf_u32(b, 4096);		/* page size */
	pg_buf_str(b, "header_page");
	sized_text(b, header_page);
	pg_buf_str(b, "header_event");
	sized_text(b, header_event);
	pg_buf_u32(b, 0);		/* no ftrace formats */
	pg_buf_u32(b, 1);		/* one system */
	pg_buf_str(b, "xray");
	pg_buf_u32(b, sizeof(formats) / sizeof(formats[0]));
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		snprintf(text, sizeof(text), "name: %s\nID: %u\nformat:\n" COMMON "%s",
			 formats[i].name, formats[i].id, formats[i].body);
		sized_text(b, text);
	}
	pg_buf_u32(b, 0);		/* kallsyms */
	pg_buf_u32(b, 0);		/* printk formats */
	pg_buf_u64(b, 0);		/* saved cmdlines */
}

/* ---------------------------------------------------------------- records */

/* Each event's tracepoint id (attr.config and common_type), by attr. */
const uint32_t pg_xray_tp_ids[NATTRS] = {
	0, PG_XRAY_EV_ENTRY, PG_XRAY_EV_EXIT, PG_XRAY_EV_TAIL_EXIT, PG_XRAY_EV_CALL_ARGS,
	PG_XRAY_EV_CUSTOM, PG_XRAY_EV_TYPED, PG_XRAY_EV_FUNCTION,
};

/* cv->rec's appenders, short for the field lists below */
static inline void r64(struct conv *cv, uint64_t v) { pg_rec_u64(&cv->rec, v); }
static inline void r32(struct conv *cv, uint32_t v) { pg_rec_u32(&cv->rec, v); }

static const char *func_name(struct conv *cv, uint32_t id, char *buf, size_t n)
{
	const struct pg_xray_func *f = func_of(cv, id);

	if (f)
		return f->name;
	snprintf(buf, n, "#%u", id);
	return buf;
}

/* A tracepoint sample: its fields, then RAW (common fields first). */
static void tp_start(struct conv *cv, int attr, const struct thread *th, uint64_t ip,
		     uint64_t time)
{
	struct pg_synth_sample smp = sample_of(th, time, (uint64_t)attr + 1);

	smp.ip = ip;
	pg_synth_sample_start(&cv->rec, ST_TP, PG_PERF_RECORD_MISC_USER, &smp);
	cv->raw_at = pg_synth_tp_start(&cv->rec, (uint16_t)pg_xray_tp_ids[attr], th->tid);
}

/* A dynamic field, its __data_loc word at raw offset loc_at. */
static void tp_dyn(struct conv *cv, size_t loc_at, const void *p, size_t n, bool nul)
{
	pg_synth_tp_dyn(&cv->rec, cv->raw_at, loc_at, p, n, nul);
}

static int tp_end(struct conv *cv)
{
	pg_synth_raw_end(&cv->rec, cv->raw_at);
	return rec_end(cv);
}

/* 1 if id was seen before; 0 when it is marked now; <0 out of memory */
static int seen_test_set(struct seen *s, uint32_t id)
{
	if (id < SEEN_BITS) {
		uint64_t m = 1ull << (id & 63);

		if (!s->bits && !(s->bits = calloc(SEEN_BITS / 64, 8)))
			return -ENOMEM;
		if (s->bits[id >> 6] & m)
			return 1;
		s->bits[id >> 6] |= m;
		return 0;
	}
	{
		bool added;

		if (!pg_u64map_put(&s->big, id, &added))
			return -ENOMEM;
		return !added;
	}
}

/* xray:function, written once per function just before the first event
 * that names it (same time, so perf's stable time order keeps it first):
 * the events themselves carry only the ID, the name travels once. */
static int ev_function_new(struct conv *cv, const struct thread *th, uint32_t id, uint64_t time)
{
	const struct pg_xray_func *f = func_of(cv, id);
	char nb[16];
	const char *name = func_name(cv, id, nb, sizeof(nb));
	const char *file = f && f->file ? f->file : "";
	uint64_t addr = func_addr(cv, id);
	int ret = seen_test_set(&cv->seen, id);

	if (ret)
		return ret < 0 ? pg_err(cv->diag, ret, "out of memory") : 0;
	tp_start(cv, ATTR_FUNC, th, addr, time);
	r64(cv, addr);
	r32(cv, id);
	r32(cv, f ? f->line : 0);
	r32(cv, f ? f->column : 0);
	r32(cv, 0);	/* name's __data_loc */
	r32(cv, 0);	/* file's */
	tp_dyn(cv, 28, name, strnlen(name, MAX_NAME), true);
	tp_dyn(cv, 32, file, strnlen(file, MAX_NAME), true);
	cv->st->events++;
	cv->st->functions++;
	return tp_end(cv);
}

/* ev_function_new() the first time id is named: every event asks, so the
 * common answer (seen) is a bit test. */
static inline int ev_function(struct conv *cv, const struct thread *th, uint32_t id, uint64_t time)
{
	if (id < SEEN_BITS && cv->seen.bits && (cv->seen.bits[id >> 6] >> (id & 63) & 1))
		return 0;
	return ev_function_new(cv, th, id, time);
}

/* The fixed-size tracepoint samples (entry, exit, call_args: every event
 * but the first of each function and the payloads), stored straight into
 * cv->rec: the bytes tp_start(), the fields and tp_end() write, without
 * their per-field checks.  fields: the event's own bytes (after the
 * common fields); returns where they go.  be is a constant at each call,
 * so that every store compiles to a plain one. */
static inline __attribute__((always_inline)) uint8_t *
tp_fixed(struct conv *cv, int attr, const struct thread *th, uint64_t ip, uint64_t time,
	 size_t fields, bool be)
{
	size_t raw = 4 + 8 + fields, size = 48 + pg_align(raw, 8);
	uint8_t *p = cv->rec.p;	/* RECBUF bytes free (rec_commit) */

	memset(p + size - 8, 0, 8);	/* the RAW padding */
	p = pg_rec_st32(p, PG_PERF_RECORD_SAMPLE, be);
	p = pg_rec_st16(p, PG_PERF_RECORD_MISC_USER, be);
	p = pg_rec_st16(p, (uint16_t)size, be);
	p = pg_rec_st64(p, (uint64_t)attr + 1, be);	/* IDENTIFIER */
	p = pg_rec_st64(p, ip, be);
	p = pg_rec_st32(p, th->pid, be);
	p = pg_rec_st32(p, th->tid, be);
	p = pg_rec_st64(p, time, be);
	p = pg_rec_st32(p, th->cpu, be);
	p = pg_rec_st32(p, 0, be);
	p = pg_rec_st32(p, (uint32_t)(pg_align(raw, 8) - 4), be);	/* RAW size */
	p = pg_rec_st16(p, (uint16_t)pg_xray_tp_ids[attr], be);	/* common_type */
	p = pg_rec_st16(p, 0, be);	/* flags, preempt_count */
	p = pg_rec_st32(p, th->tid, be);	/* common_pid */
	cv->rec.len = size;
	return p;
}

int pg_xray_ev_entry(struct conv *cv, const struct thread *th, const struct pg_xr_record *r,
		     uint64_t time)
{
	int ret = ev_function(cv, th, r->func_id, time);
	bool be = cv->rec.big_endian;
	uint8_t *p;

	if (ret < 0)
		return ret;
	if (be) {
		p = tp_fixed(cv, ATTR_ENTRY, th, func_addr(cv, r->func_id), time, 8, true);
		p = pg_rec_st32(p, r->func_id, true);
		pg_rec_st32(p, (uint32_t)th->depth, true);
	} else {
		p = tp_fixed(cv, ATTR_ENTRY, th, func_addr(cv, r->func_id), time, 8, false);
		p = pg_rec_st32(p, r->func_id, false);
		pg_rec_st32(p, (uint32_t)th->depth, false);
	}
	cv->st->events++;
	return rec_commit(cv, cv->rec.len);
}

int pg_xray_ev_exit(struct conv *cv, const struct thread *th, int attr, uint32_t id,
		    struct xr_dur d, size_t depth, uint32_t flags, uint64_t time)
{
	int ret = ev_function(cv, th, id, time);
	bool be = cv->rec.big_endian;
	uint8_t *p;

	if (ret < 0)
		return ret;
#define EXIT_FIELDS_AT(p, be) do { \
		p = pg_rec_st64(p, d.ns, be); \
		p = pg_rec_st32(p, id, be); \
		p = pg_rec_st32(p, (uint32_t)depth, be); \
		p = pg_rec_st32(p, flags, be); \
		p = pg_rec_st64(p, d.ticks, be); \
		pg_rec_st64(p, d.freq, be); \
	} while (0)
	if (be) {
		p = tp_fixed(cv, attr, th, func_addr(cv, id), time, 36, true);
		EXIT_FIELDS_AT(p, true);
	} else {
		p = tp_fixed(cv, attr, th, func_addr(cv, id), time, 36, false);
		EXIT_FIELDS_AT(p, false);
	}
#undef EXIT_FIELDS_AT
	cv->st->events++;
	return rec_commit(cv, cv->rec.len);
}

int pg_xray_ev_arg(struct conv *cv, const struct thread *th, uint32_t id, uint32_t index,
		   uint64_t value, uint64_t time)
{
	bool be = cv->rec.big_endian;
	uint8_t *p;

	p = be ? tp_fixed(cv, ATTR_ARGS, th, func_addr(cv, id), time, 16, true)
	       : tp_fixed(cv, ATTR_ARGS, th, func_addr(cv, id), time, 16, false);
	p = pg_rec_st64(p, value, be);
	p = pg_rec_st32(p, id, be);
	pg_rec_st32(p, index, be);
	cv->st->events++;
	return rec_commit(cv, cv->rec.len);
}

int pg_xray_ev_payload(struct conv *cv, const struct thread *th, const struct pg_xr_record *r,
		       uint64_t time)
{
	bool typed = r->kind == PG_XR_TYPED;
	uint32_t n = r->payload_size > MAX_PAYLOAD ? MAX_PAYLOAD : r->payload_size;
	uint64_t ip = th->depth ? func_addr(cv, th->stack[th->depth - 1].id) : 0;

	tp_start(cv, typed ? ATTR_TYPED : ATTR_CUSTOM, th, ip, time);
	r32(cv, r->payload_size);
	if (typed)
		r32(cv, r->event_type);
	r32(cv, 0);
	cv->st->events++;
	tp_dyn(cv, typed ? 16 : 12, r->payload, n, false);
	return tp_end(cv);
}
