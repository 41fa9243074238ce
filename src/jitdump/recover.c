/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "jitdump/recover.h"
#include "util/util.h"

/* bytes node may have overwritten at the start of a name */
#define V8_DAMAGED_PREFIX 16

const struct pg_jd_line *pg_jd_recover_names(const struct pg_jd_header *hdr,
					     const struct pg_jd_load *ld,
					     struct pg_jd_line **scratch,
					     size_t *scratch_cap, char **script)
{
	const struct pg_jd_debug *dbg = ld->debug;
	const char *name = ld->name, *end = name + strlen(name), *p = end;
	struct pg_jd_line *out;
	size_t slen;
	int colons = 0;

	*script = NULL;
	if (!hdr->v8 || !dbg)
		return dbg ? dbg->lines : NULL;
	/* strip ":<line>:<column>" */
	while (p > name && colons < 2) {
		p--;
		if (*p == ':')
			colons++;
		else if (*p < '0' || *p > '9')
			return dbg->lines;
	}
	if (colons < 2)
		return dbg->lines;
	slen = (size_t)(p - name);
	if (!pg_grow((void **)scratch, scratch_cap, dbg->nr_lines, sizeof(*out)))
		return dbg->lines;
	out = *scratch;
	for (size_t i = 0; i < dbg->nr_lines; i++) {
		const struct pg_jd_line *l = &dbg->lines[i];
		size_t n = l->damaged_len, keep = n > V8_DAMAGED_PREFIX ? V8_DAMAGED_PREFIX : n;
		const char *cand = name + slen - n;

		out[i] = *l;
		if (l->file || !l->damaged || !n || n >= slen || cand[-1] != ' ' ||
		    memcmp(cand + keep, l->damaged + keep, n - keep))
			continue;
		if (!*script) {
			*script = strndup(cand, n);
			if (!*script)
				return dbg->lines;
		}
		out[i].file = *script;
	}
	return *script ? out : dbg->lines;
}
