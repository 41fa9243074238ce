/* SPDX-License-Identifier: MIT */
/* perfgraft xray --account: llvm-xray account's function latency table
 * straight from a trace (account.c), through the time-order reader of
 * trace.c and the instrumentation map of instrmap.c.  Internal (the CLI's). */
#ifndef PG_XRAY_ACCOUNT_H
#define PG_XRAY_ACCOUNT_H

#include <stdio.h>

#include <perfgraft/xray.h>

/* account's -sort fields, in its order; FUNC (by name) is perfgraft's:
 * account lists it but does not implement it */
enum pg_xa_sort { PG_XA_FUNCID, PG_XA_COUNT, PG_XA_MIN, PG_XA_MED, PG_XA_90P, PG_XA_99P,
		  PG_XA_MAX, PG_XA_SUM, PG_XA_FUNC };

struct pg_xray_account_opts {
	const char *trace;
	const char *binary;		/* ELF or YAML map; NULL: IDs only */
	bool keep_going;		/* -k: skip the records account rejects */
	bool deduce_sibling_calls;	/* -d */
	bool recursive_calls_only;
	bool csv;
	enum pg_xa_sort sort;
	bool descending;
	long top;			/* <= 0: every row */
};

struct pg_xray_account_stats {
	uint64_t records;		/* function records read */
	uint64_t threads;
	uint64_t calls;			/* latencies counted */
	uint64_t functions;		/* with at least one latency */
	uint64_t exits_empty;		/* exits on an empty stack (rejected) */
	uint64_t exits_unmatched;	/* exits matching no open frame (rejected) */
	uint64_t deduced;		/* frames closed by an outer exit (-d) */
	uint64_t unfinished;		/* frames still open at the end (dropped) */
	uint64_t latency_bytes;		/* memory holding the latencies, at the peak */
};

/* Reads the trace in time order, accounts every call as llvm-xray 14's
 * account does on the YAML of the same trace, and prints the table (or
 * CSV) to out.  Returns 0, or a negative errno with the message in diag
 * (a record account rejects, without keep_going, is -EINVAL naming its
 * offset; nothing is printed then). */
int pg_xray_account(const struct pg_xray_account_opts *o, FILE *out, struct pg_diag *diag,
		    struct pg_xray_account_stats *st);

#endif
