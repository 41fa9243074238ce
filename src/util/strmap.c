/* SPDX-License-Identifier: MIT */
/* Open-addressing string interning table: the DWARF file table and the
 * JSON/CLI layers need name -> small dense index, nothing more. */
#include <stdlib.h>
#include <string.h>
#include "util/util.h"

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static bool grow(struct pg_strmap *m)
{
	size_t nslots = m->nslots ? m->nslots * 2 : 64;
	uint32_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return false;
	for (size_t i = 0; i < m->n; i++) {
		size_t j = hash_str(m->keys[i]) & (nslots - 1);

		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = (uint32_t)i + 1;
	}
	free(m->slots);
	m->slots = slots;
	m->nslots = nslots;
	return true;
}

long pg_strmap_intern(struct pg_strmap *m, const char *key, bool *added)
{
	size_t j;

	*added = false;
	if ((m->n + 1) * 2 > m->nslots && !grow(m))
		return -1;
	j = hash_str(key) & (m->nslots - 1);
	while (m->slots[j]) {
		uint32_t idx = m->slots[j] - 1;

		if (!strcmp(m->keys[idx], key))
			return idx;
		j = (j + 1) & (m->nslots - 1);
	}
	if (m->n >= UINT32_MAX - 1 ||
	    !pg_grow((void **)&m->keys, &m->cap, m->n + 1, sizeof(*m->keys)))
		return -1;
	m->keys[m->n] = key;
	m->slots[j] = (uint32_t)m->n + 1;
	*added = true;
	return (long)m->n++;
}

void pg_strmap_free(struct pg_strmap *m)
{
	free(m->keys);
	free(m->slots);
	memset(m, 0, sizeof(*m));
}
