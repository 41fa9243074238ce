/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include "util/util.h"

const char *pg_version(void)
{
	return PG_VERSION;
}

int pg_err(struct pg_diag *d, int err, const char *fmt, ...)
{
	va_list ap;

	if (d) {
		va_start(ap, fmt);
		vsnprintf(d->err, sizeof(d->err), fmt, ap);
		va_end(ap);
	}
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
