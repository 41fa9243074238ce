/* SPDX-License-Identifier: MIT */
/* The xray:* tracepoint formats perfgraft writes into perf.data. */
#ifndef PG_XRAY_EVENTS_H
#define PG_XRAY_EVENTS_H

#include <perfgraft/xray.h>
#include "util/util.h"

void pg_xray_tracing_data(struct pg_buf *b);

#endif
