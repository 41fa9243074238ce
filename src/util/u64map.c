/* SPDX-License-Identifier: MIT */
/* u64 key -> fixed-size value, open addressing with linear probing and
 * tombstones.  One table for every place that maps ids or addresses:
 * the image builder's code_index map, the JVMTI agent's live methods
 * (which deletes on UNLOAD) and XRay's seen function ids.  No iteration:
 * the users look up and never walk the map, so slot order cannot leak
 * into an output. */
#include <stdlib.h>
#include <string.h>
#include "util/util.h"

enum { EMPTY, USED, DEAD };

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* slot i: the key, then the value at the next 8-byte boundary */
static inline uint8_t *entry(const struct pg_u64map *m, uint8_t *slots, size_t i)
{
	return slots + i * m->stride;
}

void pg_u64map_init(struct pg_u64map *m, size_t vsize)
{
	*m = (struct pg_u64map)PG_U64MAP_INIT(vsize);
}

/* The slot of key, or (for_put) the first free one on its probe path. */
static size_t find(const struct pg_u64map *m, uint64_t key, bool for_put, bool *found)
{
	size_t mask = m->nslots - 1, free_at = SIZE_MAX;

	*found = false;
	for (size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
		uint64_t k;

		if (m->state[i] == EMPTY)
			return for_put && free_at != SIZE_MAX ? free_at : i;
		if (m->state[i] == DEAD) {
			if (free_at == SIZE_MAX)
				free_at = i;
			continue;
		}
		memcpy(&k, entry(m, m->slots, i), 8);
		if (k == key) {
			*found = true;
			return i;
		}
	}
}

/* Rehashes into a table at most a third full, dropping tombstones: as
 * doubling would, for inserts alone; the same size again when most of
 * what filled it was deleted. */
static bool rehash(struct pg_u64map *m)
{
	struct pg_u64map nm;
	size_t n = 64;

	if (!m->stride)		/* zeroed, never initialised: values of vsize 0 */
		*m = (struct pg_u64map)PG_U64MAP_INIT(m->vsize);
	nm = *m;

	while (n < 3 * (m->n + 1))
		n *= 2;
	if (n > SIZE_MAX / m->stride)
		return false;
	nm.nslots = n;
	nm.state = calloc(n, 1);
	nm.slots = malloc(n * m->stride);
	if (!nm.state || !nm.slots) {
		free(nm.state);
		free(nm.slots);
		return false;
	}
	nm.ndead = 0;
	for (size_t i = 0; i < m->nslots; i++) {
		uint64_t k;
		bool found;
		size_t j;

		if (m->state[i] != USED)
			continue;
		memcpy(&k, entry(m, m->slots, i), 8);
		j = find(&nm, k, true, &found);
		nm.state[j] = USED;
		memcpy(entry(&nm, nm.slots, j), entry(m, m->slots, i), m->stride);
	}
	free(m->state);
	free(m->slots);
	*m = nm;
	return true;
}

void *pg_u64map_get(const struct pg_u64map *m, uint64_t key)
{
	bool found;
	size_t i;

	if (!m->n)
		return NULL;
	i = find(m, key, false, &found);
	return found ? entry(m, m->slots, i) + 8 : NULL;
}

void *pg_u64map_put(struct pg_u64map *m, uint64_t key, bool *added)
{
	bool found;
	size_t i;
	uint8_t *e;

	/* at most half the slots used or dead: probes stay short */
	if (2 * (m->n + m->ndead + 1) > m->nslots && !rehash(m))
		return NULL;
	i = find(m, key, true, &found);
	e = entry(m, m->slots, i);
	if (!found) {
		m->ndead -= m->state[i] == DEAD;
		m->state[i] = USED;
		m->n++;
		memcpy(e, &key, 8);
		memset(e + 8, 0, m->stride - 8);
	}
	if (added)
		*added = !found;
	return e + 8;
}

bool pg_u64map_del(struct pg_u64map *m, uint64_t key)
{
	bool found;
	size_t i;

	if (!m->n)
		return false;
	i = find(m, key, false, &found);
	if (!found)
		return false;
	m->state[i] = DEAD;
	m->n--;
	m->ndead++;
	return true;
}

void pg_u64map_free(struct pg_u64map *m)
{
	free(m->state);
	free(m->slots);
	pg_u64map_init(m, m->vsize);
}
