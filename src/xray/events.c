/* SPDX-License-Identifier: MIT */
/* The tracing data (trace-cmd "tracing" blob, version 0.6) that carries the
 * xray:* event formats in perf.data, so that perf script, perf report -s
 * trace_fields and libtraceevent decode the events by field name.  The
 * function's address is the sample's IP (perf script -F +ip,+sym), not a
 * field of the per-call events: with tens of millions of them every byte
 * counts. */
#include <stdio.h>
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
 * the trace's cycle frequency). */
#define EXIT_FIELDS \
	"\tfield:u64 duration;\toffset:8;\tsize:8;\tsigned:0;\n" \
	"\tfield:u32 func_id;\toffset:16;\tsize:4;\tsigned:0;\n" \
	"\tfield:u32 depth;\toffset:20;\tsize:4;\tsigned:0;\n" \
	"\tfield:u32 flags;\toffset:24;\tsize:4;\tsigned:0;\n\n" \
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
