/* SPDX-License-Identifier: MIT */
/* perfgraft: shared conventions of the public API.
 *
 * Functions return 0 (or a count) on success and a negative errno on
 * failure; the failure's readable message is left in the caller's
 * struct pg_diag.  Non-fatal findings (a truncated tail, an unknown record)
 * go to the diag's warn callback.  The library keeps no global state. */
#ifndef PERFGRAFT_COMMON_H
#define PERFGRAFT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PG_ERRMSG_MAX 1024

typedef void (*pg_warn_fn)(void *ctx, const char *msg);

struct pg_diag {
	pg_warn_fn warn;	/* NULL: warnings are counted, not reported */
	void *ctx;
	unsigned long nwarn;	/* warnings issued so far */
	char err[PG_ERRMSG_MAX]; /* message of the last failure */
};

const char *pg_version(void);

#ifdef __cplusplus
}
#endif
#endif
