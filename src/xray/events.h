/* SPDX-License-Identifier: MIT */
/* The xray:* events perfgraft writes into perf.data: their tracepoint
 * formats and their records (events.c).  Internal. */
#ifndef PG_XRAY_EVENTS_H
#define PG_XRAY_EVENTS_H

#include <perfgraft/xray.h>
#include "util/util.h"
#include "xray/convert.h"

/* The tracing data holding the formats (the TRACING_DATA feature). */
void pg_xray_tracing_data(struct pg_buf *b);

/* Each attr's tracepoint id (attr.config and the events' common_type);
 * 0 for ATTR_TIME, not a tracepoint. */
extern const uint32_t pg_xray_tp_ids[NATTRS];

/* The events of th at time, each written as a record (with, before the
 * first event naming a function, its xray:function).  0 or a negative
 * errno. */
int pg_xray_ev_entry(struct conv *cv, const struct thread *th, const struct pg_xr_record *r,
		     uint64_t time);
/* A call's latency: in ns (rounded) and as the trace gives it, ticks of
 * its cycle frequency (0: unknown), from which a reader computes what
 * llvm-xray account prints (ticks / frequency in doubles) to the digit. */
struct xr_dur {
	uint64_t ns, ticks, freq;
};

/* attr: ATTR_EXIT or ATTR_TAIL; flags: PG_XRAY_EXIT_* */
int pg_xray_ev_exit(struct conv *cv, const struct thread *th, int attr, uint32_t id,
		    struct xr_dur d, size_t depth, uint32_t flags, uint64_t time);
int pg_xray_ev_arg(struct conv *cv, const struct thread *th, uint32_t id, uint32_t index,
		   uint64_t value, uint64_t time);
/* a custom or typed event's payload (cut to MAX_PAYLOAD bytes) */
int pg_xray_ev_payload(struct conv *cv, const struct thread *th, const struct pg_xr_record *r,
		       uint64_t time);

#endif
