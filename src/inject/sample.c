/* SPDX-License-Identifier: MIT */
/* The layout of a SAMPLE record, read as the kernel writes it
 * (perf_output_sample) and perf parses it (evsel__parse_sample), for the
 * one thing inject needs from the samples: the words a user stack may
 * hold as frames.  Apart from inject.c because it is a parser of hostile
 * bytes with its own invariant (every size is checked against the bytes
 * left before a pointer moves), tested on its own by test_hostile_inject
 * and fuzz_inject. */
#include <errno.h>

#include "inject/sample.h"
#include "util/util.h"

/* A sample's bytes not yet parsed.  Every field is taken through skip(),
 * which compares its size with the bytes left (never adds to a pointer
 * first): the sizes come from the file and may be anything. */
struct cursor {
	const uint8_t *p;
	size_t left;
};

static bool skip(struct cursor *c, uint64_t k)
{
	if (k > c->left)
		return false;
	c->p += k;
	c->left -= (size_t)k;
	return true;
}

/* k fields of `size` bytes each; false when they are not all there
 * (k * size is never formed before the division says it fits) */
static bool skip_n(struct cursor *c, uint64_t k, uint64_t size)
{
	if (size && k > c->left / size)
		return false;
	return skip(c, k * size);
}

long pg_inj_sample_words(const pg_perfdata *pd, const struct pg_pd_rec *r, bool is64,
			 uint64_t **words, size_t *cap)
{
	const struct pg_pd_attr *a;
	struct cursor c;
	uint64_t st, rf = 0, bst = 0, regs = 0, nr;
	size_t n = 0;

#define WORD(v) do { \
		if (n == *cap && !pg_grow((void **)words, cap, n + 1, 8)) \
			return -ENOMEM; \
		(*words)[n++] = (v); \
	} while (0)
	if (r->attr < 0 || (size_t)r->attr >= pg_perfdata_nattrs(pd) || r->size < 8)
		return 0;
	c = (struct cursor){ .p = r->data + 8, .left = r->size - 8u };
	a = pg_perfdata_attr(pd, (size_t)r->attr);
	st = a->sample_type;
	if (a->raw_size >= 40)
		rf = pg_pd_u64(pd, a->raw + 32);
	if (a->raw_size >= 80)
		bst = pg_pd_u64(pd, a->raw + 72);
	if (a->raw_size >= 88)
		regs = pg_pd_u64(pd, a->raw + 80);
	if ((st & PG_SAMPLE_IDENTIFIER) && !skip(&c, 8))
		return (long)n;
	if (st & PG_SAMPLE_IP) {
		if (c.left < 8)
			return (long)n;
		WORD(pg_pd_u64(pd, c.p));
		skip(&c, 8);
	}
	/* tid, time, addr, id, stream_id, cpu, period */
	if (!skip_n(&c, !!(st & PG_SAMPLE_TID) + !!(st & PG_SAMPLE_TIME) + !!(st & PG_SAMPLE_ADDR) +
		   !!(st & PG_SAMPLE_ID) + !!(st & PG_SAMPLE_STREAM_ID) +
		   !!(st & PG_SAMPLE_CPU) + !!(st & PG_SAMPLE_PERIOD), 8))
		return (long)n;
	if (st & PERF_SAMPLE_READ_BIT) {
		/* read_format: TOTAL_TIME_ENABLED 1, _RUNNING 2, ID 4, GROUP 8, LOST 16 */
		unsigned per = 1 + !!(rf & 4) + !!(rf & 16);	/* value, id, lost */
		unsigned times = !!(rf & 1) + !!(rf & 2);

		if (rf & 8) {	/* a group: nr, times, then nr values */
			if (c.left < 8)
				return (long)n;
			nr = pg_pd_u64(pd, c.p);
			if (!skip_n(&c, 1 + times, 8) || !skip_n(&c, nr, 8ull * per))
				return (long)n;
		} else if (!skip_n(&c, per + times, 8)) {
			return (long)n;
		}
	}
	if (st & PG_SAMPLE_CALLCHAIN) {
		if (c.left < 8)
			return (long)n;
		nr = pg_pd_u64(pd, c.p);
		skip(&c, 8);
		if (nr > c.left / 8)
			return (long)n;
		for (uint64_t i = 0; i < nr; i++) {
			WORD(pg_pd_u64(pd, c.p));
			skip(&c, 8);
		}
	}
	if (st & PG_SAMPLE_RAW) {
		if (c.left < 4)
			return (long)n;
		nr = pg_pd_u32(pd, c.p);
		skip(&c, 4);
		if (!skip(&c, nr))
			return (long)n;
	}
	if (st & PERF_SAMPLE_BRANCH_STACK_BIT) {
		/* nr, hw_idx with PERF_SAMPLE_BRANCH_HW_INDEX (bit 17), nr
		 * entries {from, to, flags}, then nr u64 counters with
		 * PERF_SAMPLE_BRANCH_COUNTERS (bit 19) */
		uint64_t entry = 24 + ((bst & (1u << 19)) ? 8 : 0);

		if (c.left < 8)
			return (long)n;
		nr = pg_pd_u64(pd, c.p);
		skip(&c, 8);
		if ((bst & (1u << 17)) && !skip(&c, 8))
			return (long)n;
		if (!skip_n(&c, nr, entry))
			return (long)n;
	}
	if (st & PERF_SAMPLE_REGS_USER_BIT) {
		uint64_t abi;

		if (c.left < 8)
			return (long)n;
		abi = pg_pd_u64(pd, c.p);
		skip(&c, 8);
		if (abi) {	/* none when 0 */
			unsigned k = (unsigned)__builtin_popcountll(regs);

			if (k > c.left / 8)
				return (long)n;
			for (unsigned i = 0; i < k; i++) {
				WORD(pg_pd_u64(pd, c.p));
				skip(&c, 8);
			}
		}
	}
	if (st & PERF_SAMPLE_STACK_USER_BIT) {
		uint64_t size, dyn, w = is64 ? 8 : 4;

		/* size, size bytes, dyn_size (the part the kernel copied);
		 * nothing after size when it is 0 */
		if (c.left < 8)
			return (long)n;
		size = pg_pd_u64(pd, c.p);
		skip(&c, 8);
		if (!size || c.left < 8 || size > c.left - 8)
			return (long)n;
		dyn = pg_pd_u64(pd, c.p + size);
		if (dyn < size)
			size = dyn;
		for (uint64_t o = 0; size - o >= w; o += w)
			WORD(is64 ? pg_pd_u64(pd, c.p + o) : pg_pd_u32(pd, c.p + o));
	}
#undef WORD
	return (long)n;
}
