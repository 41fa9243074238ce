/* SPDX-License-Identifier: MIT */
/* Unwind tables: the memory layout's merged .eh_frame, the CIEs and
 * FDEs of every function of an image copied with their pc-relative
 * pc_begins rebased (pg_cfi_merge), and the FDE entries for its
 * .eh_frame_hdr in the order that table wants (pg_cfi_cmp_fde; plan.c's
 * mem_image writes it); and the empty pair of an image without CFI.
 * Apart because it reads and rewrites the process's own tables byte by
 * byte, which nothing else in the builder does. */
#include <stdint.h>
#include <string.h>

#include "elfimage/builder.h"

/* An empty .eh_frame (its terminator) and an .eh_frame_hdr with no FDEs:
 * perf's libunwind then falls back to frame pointers for this code. */
void pg_cfi_empty(struct pg_buf *eh, struct pg_buf *hdr, uint64_t eh_off,
		  uint64_t hdr_off)
{
	pg_buf_u32(eh, 0);
	pg_buf_u8(hdr, 1);		/* version */
	pg_buf_u8(hdr, 0x1b);		/* eh_frame_ptr: pcrel sdata4 */
	pg_buf_u8(hdr, 0x03);		/* fde_count: udata4 */
	pg_buf_u8(hdr, 0x3b);		/* table: datarel sdata4 */
	pg_buf_u32(hdr, (uint32_t)(int32_t)(eh_off - (hdr_off + 4)));
	pg_buf_u32(hdr, 0);
}

static uint64_t rd_u(const uint8_t *p, unsigned n, bool be)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[be ? i : n - 1 - i] << (8 * (n - 1 - i));
	return v;
}

static bool rd_uleb(const uint8_t *p, size_t end, size_t *at, uint64_t *v)
{
	*v = 0;
	for (unsigned sh = 0; *at < end; sh += 7) {
		uint8_t b = p[(*at)++];

		if (sh < 64)
			*v |= (uint64_t)(b & 0x7f) << sh;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The size of a pointer encoding this can rebase, or 0. */
static unsigned enc_size(uint8_t enc, unsigned ptrsize)
{
	if ((enc & 0x70) != 0x10)
		return 0;	/* only pc-relative: an absolute pc_begin would need
			 * the image's base, which readers add again */
	switch (enc & 0x0f) {
	case 0x00: return ptrsize;
	case 0x03: case 0x0b: return 4;
	case 0x04: case 0x0c: return 8;
	default: return 0;
	}
}

/* Appends the CIEs and FDEs of one function's .eh_frame, which the
 * process had at blob_addr, to t->eh: copied whole (the FDEs' CIE
 * pointers stay right), each pc-relative pc_begin rebased to the new
 * place, and every FDE entered into t->ents.  false, with nothing
 * appended, for tables this cannot rebase (64-bit lengths, augmentations
 * other than z, R, S and an omitted L, indirect or other pointer
 * encodings) or whose
 * FDEs describe code outside [lo, hi). */
bool pg_cfi_merge(struct cfi_tables *t, const uint8_t *b, size_t n, uint64_t blob_addr,
		  uint64_t lo, uint64_t hi, const char **why)
{
	struct { size_t off; uint8_t enc; } cies[8];
	size_t ncies = 0, at = 0, n0 = t->n, len0 = t->eh->len;
	uint64_t new_addr = t->eh_addr + t->eh->len;

	*why = "no FDE";
	while (at + 4 <= n) {
		uint64_t len = rd_u(b + at, 4, t->be), id;
		size_t rec = at, end;

		if (len == 0)
			break;		/* the terminator */
		if (len == 0xffffffff || len < 4 || len > n - at - 4) {
			*why = "a record length this does not read";
			goto fail;
		}
		end = at + 4 + len;
		id = rd_u(b + at + 4, 4, t->be);
		if (id == 0) {		/* a CIE */
			size_t p = at + 8, ap;
			uint8_t ver, enc = 0;
			const char *aug;
			uint64_t v;

			if (p >= end || ncies == 8)
				goto bad_cie;
			ver = b[p++];
			aug = (const char *)b + p;
			ap = p;
			while (p < end && b[p])
				p++;
			if (p >= end || (ver != 1 && ver != 3))
				goto bad_cie;
			p++;
			if (!rd_uleb(b, end, &p, &v) || !rd_uleb(b, end, &p, &v))
				goto bad_cie;	/* code and data alignment */
			if (ver == 1)
				p++;
			else if (!rd_uleb(b, end, &p, &v))
				goto bad_cie;
			if (aug[0] == 'z') {
				if (!rd_uleb(b, end, &p, &v))
					goto bad_cie;
				for (size_t k = ap + 1; b[k]; k++) {
					if (b[k] == 'R' && p < end)
						enc = b[p++];
					else if (b[k] == 'L' && p < end && b[p] == 0xff)
						p++;	/* no LSDA (V8 writes "zLR") */
					else if (b[k] != 'S')
						goto bad_cie;
				}
			} else if (aug[0]) {
				goto bad_cie;
			}
			if (!enc_size(enc, t->ptrsize))
				goto bad_cie;
			cies[ncies].off = rec;
			cies[ncies++].enc = enc;
		} else {		/* an FDE: its CIE lies id bytes before the id field */
			uint8_t enc = 0;
			unsigned sz;
			size_t k;
			uint64_t v, pc;

			for (k = 0; k < ncies && cies[k].off + id != rec + 4; k++)
				;
			if (k == ncies) {
				*why = "an FDE whose CIE is not before it";
				goto fail;
			}
			enc = cies[k].enc;
			sz = enc_size(enc, t->ptrsize);
			if (at + 8 + sz > end) {
				*why = "a short FDE";
				goto fail;
			}
			v = rd_u(b + at + 8, sz, t->be);
			if ((enc & 0x0f) == 0x0b || ((enc & 0x0f) == 0x00 && sz == 4 && (enc & 0x70)))
				v = (uint64_t)(int64_t)(int32_t)v;
			pc = v + ((enc & 0x70) == 0x10 ? blob_addr + at + 8 : 0);
			if (sz == 4 && !(enc & 0x70))
				pc &= 0xffffffffull;
			if (pc < lo || pc >= hi) {
				*why = "an FDE for code outside the function";
				goto fail;
			}
			if (!pg_grow((void **)&t->ents, &t->cap, t->n + 1, sizeof(*t->ents))) {
				*why = "out of memory";
				goto fail;
			}
			t->ents[t->n++] = (struct fde_ent){ .pc = pc, .fde = new_addr + (rec - 0) };
		}
		at = end;
	}
	if (t->n == n0)
		goto fail;
	/* copy, then rebase the pc-relative pc_begins in the copy */
	pg_buf_add(t->eh, b, at);
	if (t->eh->oom) {
		*why = "out of memory";
		goto fail;
	}
	for (size_t i = n0; i < t->n; i++) {
		size_t rec = (size_t)(t->ents[i].fde - new_addr);
		uint64_t cie_id = rd_u(b + rec + 4, 4, t->be);
		uint8_t enc = 0;
		unsigned sz;

		for (size_t k = 0; k < ncies; k++)
			if (cies[k].off + cie_id == rec + 4)
				enc = cies[k].enc;
		sz = enc_size(enc, t->ptrsize);
		if ((enc & 0x70) == 0x10) {
			uint64_t field = new_addr + rec + 8;
			int64_t nv = (int64_t)(t->ents[i].pc - field);

			if (sz == 4 && (nv < INT32_MIN || nv > INT32_MAX)) {
				*why = "tables too far from the code";
				t->eh->len = len0;
				goto fail;
			}
			if (sz == 4)
				pg_buf_put32(t->eh, len0 + rec + 8, (uint32_t)nv);
			else
				pg_buf_put64(t->eh, len0 + rec + 8, (uint64_t)nv);
		}
	}
	return true;
bad_cie:
	*why = "a CIE this cannot rebase";
fail:
	t->n = n0;
	return false;
}

int pg_cfi_cmp_fde(const void *a, const void *b)
{
	const struct fde_ent *x = a, *y = b;

	return x->pc < y->pc ? -1 : x->pc > y->pc;
}
