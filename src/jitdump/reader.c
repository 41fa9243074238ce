/* SPDX-License-Identifier: MIT */
/* jitdump reader.  Every length and count is checked against the bytes
 * left before use; messages name the file and the record's byte offset. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <elf.h>
#include <byteswap.h>
#include <endian.h>

#include <perfgraft/jitdump.h>
#include "util/util.h"

#define HDR_SIZE 40
#define REC_HDR 16
#define LOAD_FIXED 40	/* after the record header */
#define MOVE_FIXED 48
#define DEBUG_FIXED 16
#define DEBUG_ENTRY_MIN 17	/* addr, line, discrim, at least the NUL */
#define UNWIND_FIXED 24
#define INLINE_FIXED 16	/* code_addr, nr_strings, nr_ranges */
#define RANGE_FIXED 12		/* off, len, nframes */
#define FRAME_SIZE 12		/* func, file, line */
#define NO_STRING 0xffffffffu
#define UNLOAD_FIXED 32
/* A line address this far past the DEBUG_INFO's code address is not one. */
#define LINE_ADDR_SPAN (1ull << 30)
/* nor one this far before it: rows a little before are real (BeamAsm's
 * label ahead of the prologue, ~50 bytes), and must not make a short
 * name followed by one look damaged */
#define LINE_ADDR_BEFORE (1ull << 16)
/* how many leading bytes of a file name node may overwrite */
#define V8_DAMAGED_PREFIX 16

struct pg_jitdump {
	const uint8_t *base;
	size_t size;
	bool mapped;
	bool swap;
	bool done;
	unsigned flags;
	char *name;
	struct pg_diag *diag;
	struct pg_jd_header hdr;
	uint64_t off;		/* next record */

	struct pg_jd_debug dbg;	/* pending for the next LOAD */
	bool have_dbg;
	struct pg_jd_line *lines;
	size_t lines_cap;
	struct pg_jd_unwind unw;
	bool have_unw;
	struct pg_jd_inline inl;
	bool have_inl;
	const char **strs;	/* INLINE_INFO's strings */
	struct pg_jd_inline_range *ranges;
	struct pg_jd_frame *frames;
	size_t strs_cap, ranges_cap, frames_cap;

	struct pg_jitdump_stats st;
};

static uint32_t rd32(const pg_jitdump *jd, const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return jd->swap ? bswap_32(v) : v;
}

static uint64_t rd64(const pg_jitdump *jd, const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return jd->swap ? bswap_64(v) : v;
}

/* 1: 64-bit, 0: 32-bit, -1: the machine number does not say */
static int machine_class(uint32_t m)
{
	switch (m) {
	case EM_X86_64: case EM_AARCH64: case EM_PPC64: case EM_SPARCV9:
	case EM_IA_64: case EM_ALPHA: case 258 /* EM_LOONGARCH */:
		return 1;
	case EM_386: case EM_ARM: case EM_PPC: case EM_SH: case EM_SPARC: case EM_68K:
		return 0;
	default:	/* EM_MIPS, EM_RISCV, EM_S390 serve both classes */
		return -1;
	}
}

/* For a machine of either class: 64-bit when any of the first LOADs has
 * an address above 4 GiB. */
static bool loads_above_4g(const pg_jitdump *jd)
{
	uint64_t off = jd->hdr.total_size;

	for (int n = 0; n < 256 && jd->size - off >= REC_HDR; n++) {
		const uint8_t *p = jd->base + off;
		uint32_t tsz = rd32(jd, p + 4);

		if (tsz < REC_HDR || tsz > jd->size - off)
			break;
		if (rd32(jd, p) == PG_JD_LOAD && tsz >= REC_HDR + LOAD_FIXED &&
		    rd64(jd, p + REC_HDR + 16) >> 32)
			return true;
		off += tsz;
	}
	return false;
}

/* LLVM's PerfJITEventListener (lli, PostgreSQL, Julia, any program that
 * embeds it) adds 0x40 to every line address as V8 does, but leaves pad1
 * 0.  It shows in the dump: its LOADs have vma 0, with the function's
 * first row (its entry line, which LLVM always emits) at code_addr +
 * 0x40.  The first LLVM_PAIRS DEBUG_INFOs among the first 256 records
 * that describe the LOAD after them must all say so.  Without any such
 * pair, the directory decides: LLVM names it llvm-IR-jit-*.  Returns
 * why, or NULL. */
#define LLVM_PAIRS 4
static const char *llvm_bias(const pg_jitdump *jd)
{
	uint64_t off = jd->hdr.total_size, first = 0, dcode = 0;
	bool have = false;
	int pairs = 0;
	char *real;
	const char *why = NULL;

	for (int n = 0; n < 256 && pairs < LLVM_PAIRS && jd->size - off >= REC_HDR; n++) {
		const uint8_t *p = jd->base + off;
		uint32_t id = rd32(jd, p), tsz = rd32(jd, p + 4);

		if (tsz < REC_HDR || tsz > jd->size - off)
			break;
		if (id == PG_JD_DEBUG_INFO && tsz >= REC_HDR + 32 && rd64(jd, p + REC_HDR + 8)) {
			dcode = rd64(jd, p + REC_HDR);
			first = rd64(jd, p + REC_HDR + 16);
			have = true;
		} else if (id == PG_JD_LOAD && tsz >= REC_HDR + LOAD_FIXED) {
			uint64_t code = rd64(jd, p + REC_HDR + 16);

			if (have && dcode == code) {
				if (rd64(jd, p + REC_HDR + 8) || first != code + 0x40)
					return NULL;
				pairs++;
			}
			have = false;
		}
		off += tsz;
	}
	if (pairs)
		return "LLVM's PerfJITEventListener: LOADs with vma 0, each function's first line row at its code + 0x40";
	/* the directory it was written into, however the path was spelled */
	if ((real = realpath(jd->name, NULL))) {
		char *slash = strrchr(real, '/');

		if (slash && slash > real) {
			*slash = '\0';
			slash = strrchr(real, '/');
			if (slash && !strncmp(slash + 1, "llvm-IR-jit-", 12))
				why = "LLVM's PerfJITEventListener: the dump is in an llvm-IR-jit-* directory";
		}
		free(real);
	}
	return why;
}

static int parse_header(pg_jitdump *jd)
{
	struct pg_jd_header *h = &jd->hdr;
	const uint8_t *p = jd->base;
	uint32_t magic;

	if (jd->size < 4)
		return pg_err(jd->diag, -EINVAL, "%s: offset 0: file too short for a jitdump header (%zu of %d bytes)",
			      jd->name, jd->size, HDR_SIZE);
	memcpy(&magic, p, 4);
	if (magic == PG_JITDUMP_MAGIC)
		jd->swap = false;
	else if (magic == bswap_32(PG_JITDUMP_MAGIC))
		jd->swap = true;
	else
		return pg_err(jd->diag, -EINVAL, "%s: offset 0: bad magic 0x%08x: not a jitdump file",
			      jd->name, magic);
	if (jd->size < HDR_SIZE)
		return pg_err(jd->diag, -EINVAL, "%s: offset 0: file too short for a jitdump header (%zu of %d bytes)",
			      jd->name, jd->size, HDR_SIZE);
	h->version = rd32(jd, p + 4);
	h->total_size = rd32(jd, p + 8);
	h->elf_mach = rd32(jd, p + 12);
	h->pad1 = rd32(jd, p + 16);
	h->pid = rd32(jd, p + 20);
	h->timestamp = rd64(jd, p + 24);
	h->flags = rd64(jd, p + 32);
	h->big_endian = (__BYTE_ORDER == __BIG_ENDIAN) != jd->swap;
	h->v8 = h->pad1 == 0xdeadbeef;

	if (h->version == 2)
		pg_warn(jd->diag, "%s: offset 4: header says version 2, which is the revision of the jitdump specification document, not a file version (Mono wrote it); reading the records as version 1",
			jd->name);
	else if (h->version > 2)
		return pg_err(jd->diag, -EINVAL, "%s: offset 4: unsupported jitdump version %u (perfgraft reads version 1)",
			      jd->name, h->version);
	if (h->total_size < HDR_SIZE)
		return pg_err(jd->diag, -EINVAL, "%s: offset 8: header total_size %u is smaller than the %d-byte header",
			      jd->name, h->total_size, HDR_SIZE);
	if (h->total_size > jd->size)
		return pg_err(jd->diag, -EINVAL, "%s: offset 8: header total_size %u is larger than the file (%zu bytes)",
			      jd->name, h->total_size, jd->size);
	switch (machine_class(h->elf_mach)) {
	case 1: h->is_64bit = true; break;
	case 0: h->is_64bit = false; break;
	default: h->is_64bit = loads_above_4g(jd); break;
	}
	/* V8 adds the size of the ELF header of its own class */
	h->line_bias = h->v8 ? (h->is_64bit ? 0x40 : 0x34) : 0;
	if (h->v8)
		h->line_bias_why = "written by V8 (header pad1 0xdeadbeef)";
	else if ((h->line_bias_why = llvm_bias(jd)))
		h->line_bias = 0x40;
	if (h->flags & ~PG_JITDUMP_FLAG_ARCH_TIMESTAMP)
		pg_warn(jd->diag, "%s: offset 32: unknown header flags 0x%llx ignored",
			jd->name, (unsigned long long)(h->flags & ~PG_JITDUMP_FLAG_ARCH_TIMESTAMP));
	jd->off = h->total_size;
	return 0;
}

static int open_common(pg_jitdump *jd, const char *name, unsigned flags,
		       struct pg_diag *diag, pg_jitdump **out)
{
	int ret;

	jd->flags = flags;
	jd->diag = diag;
	jd->name = strdup(name);
	if (!jd->name) {
		pg_jitdump_close(jd);
		return pg_err(diag, -ENOMEM, "%s: out of memory", name);
	}
	ret = parse_header(jd);
	if (ret) {
		pg_jitdump_close(jd);
		return ret;
	}
	*out = jd;
	return 0;
}

int pg_jitdump_open_mem(const void *buf, size_t len, const char *name,
			unsigned flags, struct pg_diag *diag, pg_jitdump **out)
{
	pg_jitdump *jd = calloc(1, sizeof(*jd));

	*out = NULL;
	if (!jd)
		return pg_err(diag, -ENOMEM, "%s: out of memory", name);
	jd->base = buf;
	jd->size = len;
	return open_common(jd, name, flags, diag, out);
}

int pg_jitdump_open(const char *path, unsigned flags, struct pg_diag *diag,
		    pg_jitdump **out)
{
	const uint8_t *map;
	size_t size;
	pg_jitdump *jd;
	int ret;

	*out = NULL;
	if ((ret = pg_map_file(path, true, diag, &map, &size)) < 0)
		return ret;
	jd = calloc(1, sizeof(*jd));
	if (!jd) {
		pg_unmap_file(map, size);
		return pg_err(diag, -ENOMEM, "%s: out of memory", path);
	}
	jd->base = map;
	jd->size = size;
	jd->mapped = map != NULL;
	return open_common(jd, path, flags, diag, out);
}

void pg_jitdump_close(pg_jitdump *jd)
{
	if (!jd)
		return;
	if (jd->mapped)
		pg_unmap_file(jd->base, jd->size);
	free(jd->lines);
	free(jd->strs);
	free(jd->ranges);
	free(jd->frames);
	free(jd->name);
	free(jd);
}

const struct pg_jd_header *pg_jitdump_header(const pg_jitdump *jd)
{
	return &jd->hdr;
}

const char *pg_jitdump_path(const pg_jitdump *jd)
{
	return jd->name;
}

uint64_t pg_jitdump_size(const pg_jitdump *jd)
{
	return jd->size;
}

void pg_jitdump_stats(const pg_jitdump *jd, struct pg_jitdump_stats *st)
{
	pg_sized_out(st, &jd->st, sizeof(jd->st));
}

/* Could a debug entry start at p?  Used to find where a name really ends
 * when a producer wrote NUL bytes inside it.  *nul (when not NULL): the
 * NUL that ends the name of the entry at p, if it was looked for. */
static bool entry_plausible_nul(const pg_jitdump *jd, const uint8_t *p,
				const uint8_t *end, uint64_t code_addr, const uint8_t **nul)
{
	const uint8_t *t;

	if (end - p < DEBUG_ENTRY_MIN)
		return false;
	if (rd64(jd, p) - (code_addr - LINE_ADDR_BEFORE) >= LINE_ADDR_BEFORE + LINE_ADDR_SPAN)
		return false;
	t = memchr(p + 16, 0, (size_t)(end - p - 16));
	if (nul)
		*nul = t;
	return t != NULL;
}

static bool entry_plausible(const pg_jitdump *jd, const uint8_t *p,
			    const uint8_t *end, uint64_t code_addr)
{
	return entry_plausible_nul(jd, p, end, code_addr, NULL);
}

/* Does a short name really end at nul (a plausible entry follows)?  If
 * so, *next_name and *next_nul are that entry's name and its end, which
 * the walk takes instead of looking for it again. */
static bool short_name_ends(const pg_jitdump *jd, const uint8_t *nul, const uint8_t *end,
			    uint64_t code_addr, const uint8_t **next_name,
			    const uint8_t **next_nul)
{
	const uint8_t *t = NULL;

	*next_name = NULL;
	if (!entry_plausible_nul(jd, nul + 1, end, code_addr, &t))
		return false;
	*next_name = nul + 1 + 16;
	*next_nul = t;
	return true;
}

static bool all_zero(const uint8_t *p, const uint8_t *end)
{
	for (; p < end; p++)
		if (*p)
			return false;
	return true;
}

/* Control bytes never appear in a file name a runtime writes. */
static bool has_control(const uint8_t *s, const uint8_t *end)
{
	if (end - s > V8_DAMAGED_PREFIX)
		end = s + V8_DAMAGED_PREFIX;
	for (; s < end; s++)
		if (*s < 0x20 && *s != 0)
			return true;
	return false;
}

static void drop_debug(pg_jitdump *jd, struct pg_jd_debug *dbg)
{
	dbg->dropped = true;
	dbg->nr_lines = 0;
	dbg->lines = NULL;
	jd->st.dropped_debug++;
}

/* Could the entry after a name ending at a candidate NUL p - 1 start at
 * p: a plausible entry, or for the last name only padding (under 8 bytes
 * of zeros)? */
static bool next_ok(const pg_jitdump *jd, const uint8_t *p, const uint8_t *end,
		    uint64_t code_addr, bool last)
{
	if (last)
		return end - p < 8 && all_zero(p, end);
	return entry_plausible(jd, p, end, code_addr);
}

/* Decodes the entries of a DEBUG_INFO body.  Damage inside is a warning:
 * the record is dropped (or its damaged names), the walk goes on. */
static void parse_debug(pg_jitdump *jd, uint64_t off, const uint8_t *body,
			uint32_t blen, struct pg_jd_debug *dbg)
{
	const uint8_t *q = body + DEBUG_FIXED, *end = body + blen;
	const char *prev = NULL, *prev_bad = NULL;
	/* the last name taken as written, and the last that needed no
	 * checks of what follows it (16 bytes or more, no control bytes) */
	const uint8_t *taken = NULL, *clean = NULL;
	size_t taken_len = 0, clean_len = 0;
	/* the end of the next entry's name, when the check of a short name
	 * found it (names shorter than 16 bytes: most rows of eval'd code) */
	const uint8_t *next_name = NULL, *next_nul = NULL;
	uint32_t prev_bad_len = 0;
	uint64_t damaged = 0;

	dbg->code_addr = rd64(jd, body);
	dbg->nr_entry = rd64(jd, body + 8);
	dbg->dropped = false;
	if (dbg->nr_entry > (blen - DEBUG_FIXED) / DEBUG_ENTRY_MIN) {
		pg_warn(jd->diag, "%s: offset %llu: DEBUG_INFO nr_entry %llu cannot fit in its %u-byte record; record dropped",
			jd->name, (unsigned long long)off, (unsigned long long)dbg->nr_entry, blen + REC_HDR);
		drop_debug(jd, dbg);
		return;
	}
	if (!pg_grow((void **)&jd->lines, &jd->lines_cap, (size_t)dbg->nr_entry,
		     sizeof(*jd->lines))) {
		pg_warn(jd->diag, "%s: offset %llu: out of memory for %llu line entries; record dropped",
			jd->name, (unsigned long long)off, (unsigned long long)dbg->nr_entry);
		drop_debug(jd, dbg);
		return;
	}
	for (uint64_t i = 0; i < dbg->nr_entry; i++) {
		struct pg_jd_line *ln = &jd->lines[i];
		const uint8_t *s, *nul;
		bool bad = false, same;

		if (end - q < DEBUG_ENTRY_MIN) {
			pg_warn(jd->diag, "%s: offset %llu: DEBUG_INFO entry %llu of %llu runs past the end of its record; record dropped",
				jd->name, (unsigned long long)off, (unsigned long long)i,
				(unsigned long long)dbg->nr_entry);
			drop_debug(jd, dbg);
			return;
		}
		ln->addr = rd64(jd, q);
		ln->line = rd32(jd, q + 8);
		ln->discrim = rd32(jd, q + 12);
		s = q + 16;
		/* a function's rows mostly repeat one name: the same bytes are
		 * the same name (needing no checks), and one pointer lets the
		 * model and the line program take it once, not hash it again at
		 * every row */
		same = clean && (size_t)(end - s) > clean_len && !memcmp(s, clean, clean_len + 1);
		nul = same ? s + clean_len
		      : s == next_name ? next_nul : memchr(s, 0, (size_t)(end - s));
		if (!nul) {
			pg_warn(jd->diag, "%s: offset %llu: DEBUG_INFO entry %llu of %llu has a file name that runs past the end of its record; record dropped",
				jd->name, (unsigned long long)off, (unsigned long long)i,
				(unsigned long long)dbg->nr_entry);
			drop_debug(jd, dbg);
			return;
		}
		/* node 20 sometimes overwrites the first 16 bytes of a file
		 * name with heap bytes (length kept), NULs and control bytes
		 * among them: the name then really ends at the first NUL past
		 * those 16 bytes.  At most 16 candidates per entry (the NULs
		 * within those bytes, or the first past them) keep this linear. */
		if (!same && (nul - s < V8_DAMAGED_PREFIX || has_control(s, nul))) {
			const uint8_t *from = s + V8_DAMAGED_PREFIX, *t = NULL;
			bool last = i + 1 == dbg->nr_entry;

			if (from <= nul) {
				bad = has_control(s, nul);
			} else if (!(last ? all_zero(nul + 1, end) :
				     short_name_ends(jd, nul, end, dbg->code_addr,
						     &next_name, &next_nul))) {
				/* (the last name as written may have zeros of
				 * any length after it: padding)
				 * a name shorter than 16 bytes is all heap bytes:
				 * its real end is the NUL within them after which
				 * the next entry makes sense; a longer one's is the
				 * first NUL past them */
				for (t = nul + 1; t < from && t < end; t++)
					if (!*t && next_ok(jd, t + 1, end, dbg->code_addr, last))
						break;
				if (t >= from || t >= end)
					t = from < end ? memchr(from, 0, (size_t)(end - from)) : NULL;
				if (t && next_ok(jd, t + 1, end, dbg->code_addr, last)) {
					nul = t;
					bad = true;
				}
			}
		}
		ln->damaged = NULL;
		ln->damaged_len = 0;
		if (bad) {
			ln->file = NULL;
			ln->damaged = (const char *)s;
			ln->damaged_len = (uint32_t)(nul - s);
			damaged++;
		} else if (nul - s == 1 && s[0] == 0xff) {
			ln->file = prev;	/* "same file as the previous entry" */
			ln->damaged = prev_bad;
			ln->damaged_len = prev_bad_len;
		} else if (same) {
			ln->file = (const char *)clean;
		} else if (taken && taken_len == (size_t)(nul - s) && !memcmp(taken, s, taken_len)) {
			ln->file = (const char *)taken;	/* the same name again */
		} else {
			ln->file = (const char *)s;
			taken = s;
			taken_len = (size_t)(nul - s);
			if (nul - s >= V8_DAMAGED_PREFIX && !has_control(s, nul)) {
				clean = s;
				clean_len = (size_t)(nul - s);
			}
		}
		prev = ln->file;
		prev_bad = ln->damaged;
		prev_bad_len = ln->damaged_len;
		q = nul + 1;
	}
	if (damaged) {
		jd->st.damaged_names += damaged;
		pg_warn(jd->diag, "%s: offset %llu: DEBUG_INFO has %llu entr%s whose file name node damaged (a known node/V8 bug); the lines are kept, and the name is recovered from the function's script where it matches (a row that stays without one is named in a later warning)",
			jd->name, (unsigned long long)off, (unsigned long long)damaged,
			damaged == 1 ? "y" : "ies");
	}
	dbg->lines = jd->lines;
	dbg->nr_lines = (size_t)dbg->nr_entry;
	jd->st.lines += dbg->nr_entry;
}

static void parse_unwind(pg_jitdump *jd, uint64_t off, const uint8_t *body,
			 uint32_t blen, struct pg_jd_unwind *u)
{
	uint64_t room = blen - UNWIND_FIXED;

	u->unwinding_size = rd64(jd, body);
	u->eh_frame_hdr_size = rd64(jd, body + 8);
	u->mapped_size = rd64(jd, body + 16);
	u->dropped = false;
	if (u->unwinding_size > room || u->eh_frame_hdr_size > u->unwinding_size ||
	    u->mapped_size > LINE_ADDR_SPAN) {
		pg_warn(jd->diag, "%s: offset %llu: UNWINDING_INFO sizes are inconsistent (unwinding %llu, eh_frame_hdr %llu, mapped %llu, %llu bytes of data); record dropped",
			jd->name, (unsigned long long)off,
			(unsigned long long)u->unwinding_size,
			(unsigned long long)u->eh_frame_hdr_size,
			(unsigned long long)u->mapped_size, (unsigned long long)room);
		u->dropped = true;
		u->eh_frame = u->eh_frame_hdr = NULL;
		u->eh_frame_size = 0;
		jd->st.dropped_unwind++;
		return;
	}
	/* Real producers write [.eh_frame][.eh_frame_hdr], whatever the
	 * specification's prose says. */
	u->eh_frame = body + UNWIND_FIXED;
	u->eh_frame_size = u->unwinding_size - u->eh_frame_hdr_size;
	u->eh_frame_hdr = u->eh_frame + u->eh_frame_size;
}

/* Drops an INLINE_INFO that does not parse, saying why. */
static bool drop_inline(pg_jitdump *jd, uint64_t off, struct pg_jd_inline *in, const char *why,
			unsigned long long what)
{
	pg_warn(jd->diag, "%s: offset %llu: INLINE_INFO %s %llu; record dropped",
		jd->name, (unsigned long long)off, why, what);
	in->dropped = true;
	in->nranges = 0;
	in->ranges = NULL;
	jd->st.dropped_inline++;
	return false;
}

/* Decodes an INLINE_INFO body: a string table, then ranges of frames
 * naming its strings (docs/jitdump-extensions.md).  Every count is checked
 * against the bytes left, so the decoded arrays stay within a small
 * multiple of the record's size. */
static bool parse_inline(pg_jitdump *jd, uint64_t off, const uint8_t *body, uint32_t blen,
			 struct pg_jd_inline *in)
{
	const uint8_t *q = body + INLINE_FIXED, *end = body + blen, *r;
	size_t nframes = 0;

	in->code_addr = rd64(jd, body);
	in->nr_strings = rd32(jd, body + 8);
	in->nr_ranges = rd32(jd, body + 12);
	in->dropped = false;
	if (in->nr_strings > (size_t)(end - q))
		return drop_inline(jd, off, in, "string count does not fit:", in->nr_strings);
	if (!pg_grow((void **)&jd->strs, &jd->strs_cap, in->nr_strings ? in->nr_strings : 1,
		     sizeof(*jd->strs)))
		return drop_inline(jd, off, in, "is too big for memory: strings", in->nr_strings);
	for (uint32_t i = 0; i < in->nr_strings; i++) {
		const uint8_t *nul = memchr(q, 0, (size_t)(end - q));

		if (!nul)
			return drop_inline(jd, off, in, "string runs past the end of its record: string", i);
		jd->strs[i] = (const char *)q;
		q = nul + 1;
	}
	if (in->nr_ranges > (size_t)(end - q) / (RANGE_FIXED + 2 * FRAME_SIZE))
		return drop_inline(jd, off, in, "range count does not fit:", in->nr_ranges);
	r = q;
	/* sizes first, so that the arrays are allocated once */
	for (uint32_t i = 0; i < in->nr_ranges; i++) {
		uint32_t n;

		if (end - r < RANGE_FIXED)
			return drop_inline(jd, off, in, "range runs past the end of its record: range", i);
		n = rd32(jd, r + 8);
		if (n < 2 || n > PG_JD_MAX_FRAMES)
			return drop_inline(jd, off, in, "range has a frame count out of 2..1024:", n);
		if ((size_t)(end - r - RANGE_FIXED) / FRAME_SIZE < n)
			return drop_inline(jd, off, in, "range runs past the end of its record: range", i);
		r += RANGE_FIXED + (size_t)n * FRAME_SIZE;
		nframes += n;
	}
	if (!pg_grow((void **)&jd->ranges, &jd->ranges_cap, in->nr_ranges ? in->nr_ranges : 1,
		     sizeof(*jd->ranges)) ||
	    !pg_grow((void **)&jd->frames, &jd->frames_cap, nframes ? nframes : 1, sizeof(*jd->frames)))
		return drop_inline(jd, off, in, "is too big for memory: frames", nframes);
	nframes = 0;
	for (uint32_t i = 0; i < in->nr_ranges; i++) {
		struct pg_jd_inline_range *rg = &jd->ranges[i];

		rg->off = rd32(jd, q);
		rg->len = rd32(jd, q + 4);
		rg->nframes = rd32(jd, q + 8);
		rg->frames = &jd->frames[nframes];
		q += RANGE_FIXED;
		for (uint32_t k = 0; k < rg->nframes; k++, q += FRAME_SIZE) {
			struct pg_jd_frame *f = &jd->frames[nframes++];
			uint32_t fn = rd32(jd, q), fl = rd32(jd, q + 4);

			if (fn >= in->nr_strings || (fl != NO_STRING && fl >= in->nr_strings))
				return drop_inline(jd, off, in, "frame names a string that is not there: index",
						   fn >= in->nr_strings ? fn : fl);
			f->func = jd->strs[fn];
			f->file = fl == NO_STRING ? NULL : jd->strs[fl];
			f->line = rd32(jd, q + 8);
		}
	}
	in->ranges = jd->ranges;
	in->nranges = in->nr_ranges;
	return true;
}

/* An extension record (INLINE_INFO, UNLOAD) too short for its fixed part.
 * Its size is sound (the walk can step over it), only its body is not:
 * perf skips it as an unknown id, and so does this reader, with a warning,
 * instead of giving up the rest of the dump (docs/jitdump-extensions.md).
 * It is returned in no mode and changes no pending state. */
static void skip_short_extension(pg_jitdump *jd, uint64_t off, const char *what, uint32_t tsz,
				 int fixed)
{
	pg_warn(jd->diag, "%s: offset %llu: %s record of %u bytes is smaller than its %d-byte fixed part; record skipped",
		jd->name, (unsigned long long)off, what, tsz, REC_HDR + fixed);
}

int pg_jitdump_next(pg_jitdump *jd, struct pg_jd_record *rec)
{
	bool all = jd->flags & PG_JITDUMP_ALL_RECORDS;

	for (;;) {
		uint64_t off = jd->off, rem;
		const uint8_t *p, *body;
		uint32_t id, tsz, blen;

		if (jd->done)
			return 0;
		rem = jd->size - off;
		if (rem == 0) {
			jd->done = true;
			return 0;
		}
		p = jd->base + off;
		if (rem < REC_HDR) {
			pg_warn(jd->diag, "%s: offset %llu: truncated record header (%llu of %d bytes); tail ignored",
				jd->name, (unsigned long long)off, (unsigned long long)rem, REC_HDR);
			jd->st.truncated_bytes = rem;
			jd->done = true;
			return 0;
		}
		id = rd32(jd, p);
		tsz = rd32(jd, p + 4);
		if (tsz < REC_HDR) {
			jd->done = true;
			return pg_err(jd->diag, -EINVAL, "%s: offset %llu: record total_size %u is smaller than the %d-byte record header",
				      jd->name, (unsigned long long)off, tsz, REC_HDR);
		}
		if (tsz > rem) {
			pg_warn(jd->diag, "%s: offset %llu: record (id %u) needs %u bytes but only %llu remain; truncated tail ignored",
				jd->name, (unsigned long long)off, id, tsz, (unsigned long long)rem);
			jd->st.truncated_bytes = rem;
			jd->done = true;
			return 0;
		}
		jd->off += tsz;
		/* the next header is a record's length away, past code this
		 * walk does not read: no stride a prefetcher would follow */
		if (jd->off + REC_HDR <= jd->size)
			__builtin_prefetch(jd->base + jd->off);
		jd->st.records++;
		pg_inputs_touched(tsz);	/* resident pages: a window, not the dump */
		body = p + REC_HDR;
		blen = tsz - REC_HDR;
		memset(rec, 0, sizeof(*rec));
		rec->type = (enum pg_jd_type)id;
		rec->id = id;
		rec->size = tsz;
		rec->offset = off;
		rec->timestamp = rd64(jd, p + 8);

		switch (id) {
		case PG_JD_LOAD: {
			struct pg_jd_load *ld = &rec->u.load;
			const uint8_t *name, *nul;

			if (blen < LOAD_FIXED + 1) {
				jd->done = true;
				return pg_err(jd->diag, -EINVAL, "%s: offset %llu: LOAD record of %u bytes is smaller than its %d-byte fixed part",
					      jd->name, (unsigned long long)off, tsz, REC_HDR + LOAD_FIXED + 1);
			}
			ld->pid = rd32(jd, body);
			ld->tid = rd32(jd, body + 4);
			ld->vma = rd64(jd, body + 8);
			ld->code_addr = rd64(jd, body + 16);
			ld->code_size = rd64(jd, body + 24);
			ld->code_index = rd64(jd, body + 32);
			if (ld->code_size > blen - LOAD_FIXED - 1) {
				jd->done = true;
				return pg_err(jd->diag, -EINVAL, "%s: offset %llu: LOAD code_size %llu does not fit in its %u-byte record",
					      jd->name, (unsigned long long)off,
					      (unsigned long long)ld->code_size, tsz);
			}
			name = body + LOAD_FIXED;
			/* the code is the record's last code_size bytes */
			ld->code = body + blen - ld->code_size;
			nul = memchr(name, 0, (size_t)(ld->code - name));
			if (!nul) {
				jd->done = true;
				return pg_err(jd->diag, -EINVAL, "%s: offset %llu: LOAD function name is not NUL-terminated before the code",
					      jd->name, (unsigned long long)off);
			}
			ld->name = (const char *)name;
			ld->debug = jd->have_dbg ? &jd->dbg : NULL;
			ld->unwind = jd->have_unw ? &jd->unw : NULL;
			ld->inl = jd->have_inl ? &jd->inl : NULL;
			jd->have_dbg = jd->have_unw = jd->have_inl = false;
			jd->st.loads++;
			return 1;
		}
		case PG_JD_MOVE: {
			struct pg_jd_move *mv = &rec->u.move;

			if (blen < MOVE_FIXED) {
				jd->done = true;
				return pg_err(jd->diag, -EINVAL, "%s: offset %llu: MOVE record of %u bytes is smaller than its %d-byte fixed part",
					      jd->name, (unsigned long long)off, tsz, REC_HDR + MOVE_FIXED);
			}
			mv->pid = rd32(jd, body);
			mv->tid = rd32(jd, body + 4);
			mv->vma = rd64(jd, body + 8);
			mv->old_code_addr = rd64(jd, body + 16);
			mv->new_code_addr = rd64(jd, body + 24);
			mv->code_size = rd64(jd, body + 32);
			mv->code_index = rd64(jd, body + 40);
			jd->st.moves++;
			return 1;
		}
		case PG_JD_DEBUG_INFO:
			if (blen < DEBUG_FIXED) {
				jd->done = true;
				return pg_err(jd->diag, -EINVAL, "%s: offset %llu: DEBUG_INFO record of %u bytes is smaller than its %d-byte fixed part",
					      jd->name, (unsigned long long)off, tsz, REC_HDR + DEBUG_FIXED);
			}
			jd->st.debug_infos++;
			if (jd->have_dbg)
				jd->st.dropped_debug++;	/* replaced before any LOAD */
			jd->dbg.offset = off;
			jd->dbg.timestamp = rec->timestamp;
			parse_debug(jd, off, body, blen, &jd->dbg);
			jd->have_dbg = !jd->dbg.dropped;
			if (all) {
				rec->u.debug = jd->dbg;
				return 1;
			}
			continue;
		case PG_JD_UNWINDING_INFO:
			if (blen < UNWIND_FIXED) {
				jd->done = true;
				return pg_err(jd->diag, -EINVAL, "%s: offset %llu: UNWINDING_INFO record of %u bytes is smaller than its %d-byte fixed part",
					      jd->name, (unsigned long long)off, tsz, REC_HDR + UNWIND_FIXED);
			}
			jd->st.unwinding_infos++;
			jd->unw.offset = off;
			jd->unw.timestamp = rec->timestamp;
			parse_unwind(jd, off, body, blen, &jd->unw);
			jd->have_unw = !jd->unw.dropped;
			if (all) {
				rec->u.unwind = jd->unw;
				return 1;
			}
			continue;
		case PG_JD_INLINE_INFO:
			if (blen < INLINE_FIXED) {
				skip_short_extension(jd, off, "INLINE_INFO", tsz, INLINE_FIXED);
				continue;
			}
			jd->st.inline_infos++;
			if (jd->have_inl)
				jd->st.dropped_inline++;	/* replaced before any LOAD */
			jd->inl.offset = off;
			jd->inl.timestamp = rec->timestamp;
			parse_inline(jd, off, body, blen, &jd->inl);
			jd->have_inl = !jd->inl.dropped;
			if (all) {
				rec->u.inl = jd->inl;
				return 1;
			}
			continue;
		case PG_JD_UNLOAD: {
			struct pg_jd_unload *ul = &rec->u.unload;

			if (blen < UNLOAD_FIXED) {
				skip_short_extension(jd, off, "UNLOAD", tsz, UNLOAD_FIXED);
				continue;
			}
			ul->pid = rd32(jd, body);
			ul->tid = rd32(jd, body + 4);
			ul->code_addr = rd64(jd, body + 8);
			ul->code_size = rd64(jd, body + 16);
			ul->code_index = rd64(jd, body + 24);
			jd->st.unloads++;
			return 1;
		}
		case PG_JD_CLOSE:
			jd->st.closes++;
			if (all)
				return 1;
			continue;
		default:
			jd->st.unknown++;
			pg_warn(jd->diag, "%s: offset %llu: unknown record id %u (%u bytes) skipped",
				jd->name, (unsigned long long)off, id, tsz);
			if (all)
				return 1;
			continue;
		}
	}
}

bool pg_jitdump_probe(const void *buf, size_t len)
{
	uint32_t m;

	if (len < 4)
		return false;
	memcpy(&m, buf, 4);
	return m == PG_JITDUMP_MAGIC || m == bswap_32(PG_JITDUMP_MAGIC);
}

const char *pg_jitdump_record_name(uint32_t id)
{
	static const char *const names[] = { "LOAD", "MOVE", "DEBUG_INFO", "CLOSE", "UNWINDING_INFO" };

	if (id == PG_JD_INLINE_INFO)
		return "INLINE_INFO";
	if (id == PG_JD_UNLOAD)
		return "UNLOAD";
	return id < sizeof(names) / sizeof(names[0]) ? names[id] : "UNKNOWN";
}
