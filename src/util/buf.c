/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include "util/util.h"

bool pg_grow(void **v, size_t *cap, size_t n, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *p;

	if (n <= *cap)
		return true;
	while (c < n) {
		if (c > SIZE_MAX / 2)
			return false;
		c *= 2;
	}
	if (c > SIZE_MAX / elem)
		return false;
	p = realloc(*v, c * elem);
	if (!p)
		return false;
	*v = p;
	*cap = c;
	return true;
}

void pg_buf_free(struct pg_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

void *pg_buf_reserve(struct pg_buf *b, size_t n)
{
	if (b->oom)
		return NULL;
	if (n > SIZE_MAX / 2 - b->len) {
		b->oom = true;
		return NULL;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
	}
	return b->p + b->len;
}

void pg_buf_add_slow(struct pg_buf *b, const void *p, size_t n)
{
	void *dst;

	if (!n)
		return;
	dst = pg_buf_reserve(b, n);
	if (!dst)
		return;
	memcpy(dst, p, n);
	b->len += n;
}

static void put_be_le(uint8_t *dst, uint64_t v, unsigned size, bool be)
{
	for (unsigned i = 0; i < size; i++) {
		unsigned shift = 8 * (be ? size - 1 - i : i);

		dst[i] = (uint8_t)(v >> shift);
	}
}

void pg_buf_uaddr(struct pg_buf *b, uint64_t v, unsigned size)
{
	uint8_t *dst = pg_buf_reserve(b, size);

	if (!dst)
		return;
	put_be_le(dst, v, size, b->big_endian);
	b->len += size;
}

void pg_buf_u16(struct pg_buf *b, uint16_t v) { pg_buf_uaddr(b, v, 2); }
void pg_buf_u32(struct pg_buf *b, uint32_t v) { pg_buf_uaddr(b, v, 4); }
void pg_buf_u64(struct pg_buf *b, uint64_t v) { pg_buf_uaddr(b, v, 8); }

void pg_buf_put32(struct pg_buf *b, size_t at, uint32_t v)
{
	if (!b->oom && at + 4 <= b->len)
		put_be_le(b->p + at, v, 4, b->big_endian);
}

void pg_buf_put64(struct pg_buf *b, size_t at, uint64_t v)
{
	if (!b->oom && at + 8 <= b->len)
		put_be_le(b->p + at, v, 8, b->big_endian);
}

void pg_buf_uleb_slow(struct pg_buf *b, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;

		v >>= 7;
		pg_buf_u8(b, c | (v ? 0x80 : 0));
	} while (v);
}

void pg_buf_sleb(struct pg_buf *b, int64_t v)
{
	for (;;) {
		uint8_t c = v & 0x7f;
		bool done;

		v >>= 7;	/* arithmetic shift on every target we build for */
		done = (v == 0 && !(c & 0x40)) || (v == -1 && (c & 0x40));
		pg_buf_u8(b, c | (done ? 0 : 0x80));
		if (done)
			break;
	}
}

void pg_buf_str(struct pg_buf *b, const char *s)
{
	pg_buf_add(b, s, strlen(s) + 1);
}
