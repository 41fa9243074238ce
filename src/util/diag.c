/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include "util/util.h"

/* mapfile.c sets it with the first mapped input (the JVMTI agent, which
 * builds this file without it, maps none) */
_Atomic(pg_err_hook_fn) pg_err_hook;

const char *pg_version(void)
{
	return PG_VERSION;
}

int pg_err(struct pg_diag *d, int err, const char *fmt, ...)
{
	pg_err_hook_fn hook = atomic_load(&pg_err_hook);
	va_list ap;

	if (d) {
		va_start(ap, fmt);
		vsnprintf(d->err, sizeof(d->err), fmt, ap);
		va_end(ap);
	}
	if (hook)
		hook(d, err);
	return err;
}

void pg_warn(struct pg_diag *d, const char *fmt, ...)
{
	char msg[PG_ERRMSG_MAX];
	va_list ap;

	if (!d)
		return;
	d->nwarn++;
	if (!d->warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->warn(d->ctx, msg);
}
