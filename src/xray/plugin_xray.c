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
 * The events carry only the function's ID; its name comes once, in the
 * xray:function event written before the first event that names it.  The
 * plugin keeps those names (ID -> name) as perf prints them, so a --time
 * window that starts after a function's xray:function event shows "#ID".
 *
 * Install it where perf looks for traceevent plugins: $TRACEEVENT_PLUGIN_DIR,
 * ~/.local/lib/traceevent/plugins or the system directory (Debian:
 * /usr/lib/traceevent/plugins).  Without it perf script prints the events'
 * own print fmt ("id=... depth=...").
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
#include <stdlib.h>
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

/* ID -> name, from the xray:function events: open addressing, keys + 1
 * (0 = empty), grown at half load. */
struct name_slot {
	unsigned long long key;
	char *name;
};
static struct name_slot *names;
static size_t names_n, names_cap;

static size_t slot_of(unsigned long long key, size_t cap)
{
	return (size_t)(key * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

static const char *name_of(unsigned long long id)
{
	if (!names_cap)
		return NULL;
	for (size_t j = slot_of(id + 1, names_cap);; j = (j + 1) & (names_cap - 1)) {
		if (names[j].key == id + 1)
			return names[j].name;
		if (!names[j].key)
			return NULL;
	}
}

static void remember(unsigned long long id, const char *p, size_t n)
{
	char *copy;
	size_t j;

	if (2 * (names_n + 1) > names_cap) {
		size_t cap = names_cap ? 2 * names_cap : 256;
		struct name_slot *t = calloc(cap, sizeof(*t));

		if (!t)
			return;
		for (size_t i = 0; i < names_cap; i++) {
			if (!names[i].key)
				continue;
			for (j = slot_of(names[i].key, cap); t[j].key; j = (j + 1) & (cap - 1))
				;
			t[j] = names[i];
		}
		free(names);
		names = t;
		names_cap = cap;
	}
	for (j = slot_of(id + 1, names_cap); names[j].key; j = (j + 1) & (names_cap - 1))
		if (names[j].key == id + 1)
			return;		/* the first name stays */
	if (!(copy = malloc(n + 1)))
		return;
	memcpy(copy, p, n);
	copy[n] = 0;
	names[j].key = id + 1;
	names[j].name = copy;
	names_n++;
}

/* A __data_loc string field: at most len bytes, up to the first NUL.  Sets
 * *n to its length; NULL if the field is absent or empty. */
static const char *get_str(struct trace_seq *s, struct tep_event *event,
			   struct tep_record *record, const char *field, int *n)
{
	int len = 0;
	const char *p = tep_get_field_raw(s, event, field, record, &len, 0);

	if (!p || len <= 0)
		return NULL;
	*n = (int)strnlen(p, (size_t)len);
	return *n > 0 ? p : NULL;
}

/* The function's name, or "#ID" when no xray:function named it. */
static const char *put_name(struct trace_seq *s, unsigned long long id)
{
	const char *name = name_of(id);

	if (name)
		trace_seq_puts(s, name);
	else
		trace_seq_printf(s, "#%llu", id);
	return name;
}

static int function_handler(struct trace_seq *s, struct tep_record *record,
			    struct tep_event *event, void *context)
{
	unsigned long long id = 0, line = 0, col = 0;
	const char *name, *file;
	int n = 0, fn = 0;

	(void)context;
	if (tep_get_field_val(s, event, "func_id", record, &id, 1))
		return 0;
	tep_get_field_val(s, event, "line", record, &line, 0);
	tep_get_field_val(s, event, "column", record, &col, 0);
	name = get_str(s, event, record, "name", &n);
	file = get_str(s, event, record, "file", &fn);
	if (name)
		remember(id, name, (size_t)n);
	trace_seq_printf(s, "#%llu = ", id);
	put_name(s, id);
	if (file)
		trace_seq_printf(s, " at %.*s:%llu:%llu", fn, file, line, col);
	return 0;
}

static int entry_handler(struct trace_seq *s, struct tep_record *record,
			 struct tep_event *event, void *context)
{
	unsigned long long depth = 0, id = 0;
	const char *name;

	(void)context;
	if (tep_get_field_val(s, event, "depth", record, &depth, 1) ||
	    tep_get_field_val(s, event, "func_id", record, &id, 1))
		return 0;
	indent(s, depth);
	name = put_name(s, id);
	/* Demangled C++ names already carry their parameter list. */
	if (!name || !strchr(name, '('))
		trace_seq_puts(s, "()");
	trace_seq_puts(s, " {");
	return 0;
}

static int exit_handler(struct trace_seq *s, struct tep_record *record,
			struct tep_event *event, void *context)
{
	const enum exit_kind *kind = context;
	unsigned long long depth = 0, id = 0, duration = 0, flags = 0;

	if (tep_get_field_val(s, event, "depth", record, &depth, 1) ||
	    tep_get_field_val(s, event, "func_id", record, &id, 1) ||
	    tep_get_field_val(s, event, "duration", record, &duration, 1) ||
	    tep_get_field_val(s, event, "flags", record, &flags, 1))
		return 0;
	indent(s, depth);
	trace_seq_puts(s, "} /* ");
	put_name(s, id);
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
	tep_register_event_handler(tep, -1, XRAY_SYSTEM, "function",
				   function_handler, NULL);
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
	tep_unregister_event_handler(tep, -1, XRAY_SYSTEM, "function",
				     function_handler, NULL);
	tep_unregister_event_handler(tep, -1, XRAY_SYSTEM, "function_entry",
				     entry_handler, NULL);
	tep_unregister_event_handler(tep, -1, XRAY_SYSTEM, "function_exit",
				     exit_handler, (void *)&kind_exit);
	tep_unregister_event_handler(tep, -1, XRAY_SYSTEM, "tail_exit",
				     exit_handler, (void *)&kind_tail_exit);
	for (size_t i = 0; i < names_cap; i++)
		free(names[i].name);
	free(names);
	names = NULL;
	names_n = names_cap = 0;
}
