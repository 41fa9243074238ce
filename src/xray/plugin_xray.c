/* SPDX-License-Identifier: MIT */
/* libtraceevent plugin for the xray:* events that `perfgraft xray` writes
 * into perf.data: perf script prints xray:function_entry, function_exit and
 * tail_exit as a call graph, in the style of ftrace's function_graph tracer:
 *
 *   xray:function_entry:     tree::work() {
 *   xray:function_entry:       tree::top(int) {
 *   xray:function_exit:        } /+ tree::top(int) 1.372 us +/
 *   xray:tail_exit:            } /+ caller 0.210 us, tail call +/
 *   xray:function_exit:      } /+ tree::work() 95.118 us +/
 *
 * (with real comment delimiters).  Entries and exits are indented by two
 * spaces per call depth; exits show the duration in microseconds and the
 * flags perfgraft set: [inferred] (the frame's own exit was lost; closed by
 * the exit of a deeper function), [unfinished] (never exited; closed at the
 * thread's last timestamp), [no entry] (an exit whose entry is not in the
 * trace; no duration).
 *
 * Install it where perf looks for traceevent plugins: $TRACEEVENT_PLUGIN_DIR,
 * ~/.local/lib/traceevent/plugins or the system directory (Debian:
 * /usr/lib/traceevent/plugins).  Without it perf script prints the events'
 * own print fmt ("name=... id=... depth=...").
 *
 * ABI: perf 6.1 carries its own copy of libtraceevent and exports its
 * symbols; this module is deliberately not linked against libtraceevent.so,
 * so the tep_* and trace_seq_* calls below bind to perf's copy when perf
 * dlopen()s it (libtraceevent 1.x programs such as trace-cmd work the same
 * way).  Only the long-stable subset is used: the handler and loader
 * signatures, tep_register_event_handler / tep_unregister_event_handler,
 * tep_get_field_val, tep_get_field_raw and trace_seq_printf / trace_seq_puts.
 * struct tep_record, struct tep_event and struct trace_seq are only passed
 * through as pointers, never dereferenced here, so a difference in their
 * layout between perf's copy and the headers used to build this file cannot
 * matter. */
#include <stdint.h>
#include <string.h>

#include <event-parse.h>
#include <trace-seq.h>

#define XRAY_SYSTEM "xray"

enum {
	XRAY_FLAG_INFERRED = 1,
	XRAY_FLAG_UNFINISHED = 2,
	XRAY_FLAG_NO_ENTRY = 4,
};

/* Deeper calls are still indented, but no further than this. */
#define MAX_INDENT_DEPTH 200

enum exit_kind { KIND_EXIT, KIND_TAIL_EXIT };

static const enum exit_kind kind_exit = KIND_EXIT;
static const enum exit_kind kind_tail_exit = KIND_TAIL_EXIT;

static void indent(struct trace_seq *s, unsigned long long depth)
{
	if (depth > MAX_INDENT_DEPTH)
		depth = MAX_INDENT_DEPTH;
	trace_seq_printf(s, "%*s", (int)(2 * depth), "");
}

/* The function's name from the __data_loc field "name": at most len bytes,
 * up to the first NUL.  Sets *n to its length; NULL if the field is absent
 * or empty (then the caller prints "#id"). */
static const char *get_name(struct trace_seq *s, struct tep_event *event,
			    struct tep_record *record, int *n)
{
	int len = 0;
	const char *p = tep_get_field_raw(s, event, "name", record, &len, 0);

	if (!p || len <= 0)
		return NULL;
	*n = (int)strnlen(p, (size_t)len);
	return *n > 0 ? p : NULL;
}

/* "name" as given, or "#ID" when the event carries no name. */
static void put_name(struct trace_seq *s, const char *name, int n,
		     unsigned long long id)
{
	if (name)
		trace_seq_printf(s, "%.*s", n, name);
	else
		trace_seq_printf(s, "#%llu", id);
}

static int entry_handler(struct trace_seq *s, struct tep_record *record,
			 struct tep_event *event, void *context)
{
	unsigned long long depth = 0, id = 0;
	const char *name;
	int n = 0;

	(void)context;
	if (tep_get_field_val(s, event, "depth", record, &depth, 1) ||
	    tep_get_field_val(s, event, "func_id", record, &id, 1))
		return 0;
	name = get_name(s, event, record, &n);
	indent(s, depth);
	put_name(s, name, n, id);
	/* Demangled C++ names already carry their parameter list. */
	if (!name || !memchr(name, '(', (size_t)n))
		trace_seq_puts(s, "()");
	trace_seq_puts(s, " {");
	return 0;
}

static int exit_handler(struct trace_seq *s, struct tep_record *record,
			struct tep_event *event, void *context)
{
	const enum exit_kind *kind = context;
	unsigned long long depth = 0, id = 0, duration = 0, flags = 0;
	const char *name;
	int n = 0;

	if (tep_get_field_val(s, event, "depth", record, &depth, 1) ||
	    tep_get_field_val(s, event, "func_id", record, &id, 1) ||
	    tep_get_field_val(s, event, "duration", record, &duration, 1) ||
	    tep_get_field_val(s, event, "flags", record, &flags, 1))
		return 0;
	name = get_name(s, event, record, &n);
	indent(s, depth);
	trace_seq_puts(s, "} /* ");
	put_name(s, name, n, id);
	if (!(flags & XRAY_FLAG_NO_ENTRY))
		trace_seq_printf(s, " %llu.%03llu us", duration / 1000,
				 duration % 1000);
	if (kind && *kind == KIND_TAIL_EXIT)
		trace_seq_puts(s, ", tail call");
	if (flags & XRAY_FLAG_INFERRED)
		trace_seq_puts(s, " [inferred]");
	if (flags & XRAY_FLAG_UNFINISHED)
		trace_seq_puts(s, " [unfinished]");
	if (flags & XRAY_FLAG_NO_ENTRY)
		trace_seq_puts(s, " [no entry]");
	flags &= ~(unsigned long long)(XRAY_FLAG_INFERRED | XRAY_FLAG_UNFINISHED |
				       XRAY_FLAG_NO_ENTRY);
	if (flags)
		trace_seq_printf(s, " [flags 0x%llx]", flags);
	trace_seq_puts(s, " */");
	return 0;
}

int TEP_PLUGIN_LOADER(struct tep_handle *tep);
void TEP_PLUGIN_UNLOADER(struct tep_handle *tep);

int TEP_PLUGIN_LOADER(struct tep_handle *tep)
{
	tep_register_event_handler(tep, -1, XRAY_SYSTEM, "function_entry",
				   entry_handler, NULL);
	tep_register_event_handler(tep, -1, XRAY_SYSTEM, "function_exit",
				   exit_handler, (void *)&kind_exit);
	tep_register_event_handler(tep, -1, XRAY_SYSTEM, "tail_exit",
				   exit_handler, (void *)&kind_tail_exit);
	return 0;
}

void TEP_PLUGIN_UNLOADER(struct tep_handle *tep)
{
	tep_unregister_event_handler(tep, -1, XRAY_SYSTEM, "function_entry",
				     entry_handler, NULL);
	tep_unregister_event_handler(tep, -1, XRAY_SYSTEM, "function_exit",
				     exit_handler, (void *)&kind_exit);
	tep_unregister_event_handler(tep, -1, XRAY_SYSTEM, "tail_exit",
				     exit_handler, (void *)&kind_tail_exit);
}
