/* SPDX-License-Identifier: MIT */
/* perf.data reader: file mode (mapped) or pipe mode (mapped or streamed),
 * either byte order.  Records stay in the file's byte order; only the
 * fields converters need are decoded.  One file (about 1,000 lines)
 * because it is one concern: the record stream, whose cursor, bounds,
 * attrs and decompression every record kind shares; the header, the
 * attrs and COMPRESSED records are each a few functions of it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <byteswap.h>
#include <endian.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zstd.h>

#include <perfgraft/perfdata.h>
#include "util/util.h"

#define FILE_HDR 104
#define FILE_HDR_OLD 72
#define PIPE_HDR 16
#define ATTR_VER0 64
#define MAX_EXTRA (1ull << 32)	/* a blob after a record larger than this is damage */
#define EXTRA_STEP (1u << 20)	/* a streamed blob is read (and its buffer grown) this much at a time */
#define REC_MAX 65535u		/* u16 header.size */
/* Bound on what one COMPRESSED record may decompress to when the header
 * gives none (no COMPRESSED feature, or mmap_len 0; perf 6.1 then
 * decompresses nothing).  perf record writes at most its ring buffer
 * (mmap_len, 528,384 bytes by default) per record; 8 MiB is 16 times
 * that and far above the 64 KiB x zstd ratio a real record holds. */
#define ZLIMIT_DEFAULT (8ull << 20)
/* ... and the bound whatever the header says: mmap_len is the file's own
 * word (a u32, so up to 4 GiB per record).  The largest ring buffer perf
 * record can map is 1 GiB: -m 1G works and -m 2G fails with ENOMEM
 * (x86-64 and arm64 with 4 KiB pages: the kernel keeps a ring's page list
 * in one allocation of at most 4 MiB, 512 Ki pointers, and the pages are a
 * power of two); mmap_len adds the control page, up to 64 KiB. */
#define ZLIMIT_MAX ((1ull << 30) + (64u << 10))
/* In-band attrs (HEADER_ATTR records) are kept for the whole walk: bound
 * their bytes, since compressed data can repeat them cheaply.  A real
 * pipe holds a few events with ids per CPU: kilobytes. */
#define INBAND_ATTR_MAX (16u << 20)

struct pg_perfdata {
	char *name;
	struct pg_diag *diag;
	bool swap, big_endian, pipe;
	int version;		/* 1: "PERFFILE", 2: "PERFILE2" */
	/* the input: a mapping/buffer, or a stream */
	const uint8_t *base;
	size_t size;
	bool mapped;
	long mreg;		/* its entry in the input mappings' registry, or -1 */
	int fd;			/* stream input, -1 otherwise */
	uint64_t pos;		/* offset of the next record */
	uint64_t data_off, data_end;
	bool done;
	/* stream buffers */
	uint8_t *rbuf, *xbuf;
	size_t rcap, xcap;

	struct pg_pd_attr *attrs;
	size_t nattrs, attrs_cap;
	size_t header_attrs;	/* attrs from the file header (not in-band) */
	struct pg_pd_feature *feats;
	size_t nfeats, feats_cap;
	struct pg_pd_time_conv tc;
	bool have_tc;

	size_t inband_bytes;	/* raw + ids bytes of the in-band attrs */

	/* decompression of PERF_RECORD_COMPRESSED, a window at a time: zbuf
	 * (fixed size) holds [zhead, zlen) not yet returned, at most one
	 * unfinished record plus one zstd output block, so memory does not
	 * depend on what a record decompresses to */
	ZSTD_DStream *zd;
	uint8_t *zbuf;
	size_t zlen, zhead, zcap;
	uint64_t zoff;		/* offset of the COMPRESSED record, for messages */
	const uint8_t *zsrc;	/* its zstd bytes (NULL: none being read) */
	size_t zsrc_len, zsrc_pos;
	uint64_t zrec_out;	/* bytes it decompressed to so far */
	/* the COMPRESSED feature's mmap_len, 0 when none: the bound on
	 * zrec_out, as perf (zlimit()); the file header's, for a rewind */
	uint32_t zmmap_len, zmmap_len_hdr;
};

uint16_t pg_pd_u16(const pg_perfdata *pd, const void *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return pd->swap ? bswap_16(v) : v;
}

uint32_t pg_pd_u32(const pg_perfdata *pd, const void *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return pd->swap ? bswap_32(v) : v;
}

uint64_t pg_pd_u64(const pg_perfdata *pd, const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return pd->swap ? bswap_64(v) : v;
}

bool pg_perfdata_pipe(const pg_perfdata *pd) { return pd->pipe; }
int pg_perfdata_version(const pg_perfdata *pd) { return pd->version; }
bool pg_perfdata_big_endian(const pg_perfdata *pd) { return pd->big_endian; }
const char *pg_perfdata_name(const pg_perfdata *pd) { return pd->name; }
size_t pg_perfdata_nattrs(const pg_perfdata *pd) { return pd->nattrs; }
size_t pg_perfdata_nfeatures(const pg_perfdata *pd) { return pd->nfeats; }
uint64_t pg_perfdata_data_size(const pg_perfdata *pd) { return pd->data_end - pd->data_off; }

const struct pg_pd_attr *pg_perfdata_attr(const pg_perfdata *pd, size_t i)
{
	return i < pd->nattrs ? &pd->attrs[i] : NULL;
}

const struct pg_pd_feature *pg_perfdata_feature(const pg_perfdata *pd, size_t i)
{
	return i < pd->nfeats ? &pd->feats[i] : NULL;
}

const struct pg_pd_time_conv *pg_perfdata_time_conv(const pg_perfdata *pd)
{
	return pd->have_tc ? &pd->tc : NULL;
}

void pg_perfdata_close(pg_perfdata *pd)
{
	if (!pd)
		return;
	if (pd->mapped) {
		pg_map_unregister(pd->mreg);
		munmap((void *)pd->base, pd->size);
	}
	if (pd->fd > STDIN_FILENO)	/* a stream opened by path (a FIFO) */
		close(pd->fd);
	for (size_t i = 0; i < pd->nattrs; i++) {
		free(pd->attrs[i].raw);
		free(pd->attrs[i].ids);
	}
	free(pd->attrs);
	free(pd->feats);
	free(pd->rbuf);
	free(pd->xbuf);
	free(pd->zbuf);
	if (pd->zd)
		ZSTD_freeDStream(pd->zd);
	free(pd->name);
	free(pd);
}

/* The bit-field word of perf_event_attr: a big-endian writer allocates
 * its fields from the most significant bit, so perf reverses the bits of
 * each byte rather than swapping bytes.  Returns bit n = field n. */
static uint64_t attr_flags(const pg_perfdata *pd, const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++) {
		uint8_t b = p[i];

		if (pd->big_endian) {
			b = (uint8_t)((b & 0xf0) >> 4 | (b & 0x0f) << 4);
			b = (uint8_t)((b & 0xcc) >> 2 | (b & 0x33) << 2);
			b = (uint8_t)((b & 0xaa) >> 1 | (b & 0x55) << 1);
		}
		v |= (uint64_t)b << (8 * i);
	}
	return v;
}

/* Adds an attr from raw bytes (file order) and its ids. */
static int add_attr(pg_perfdata *pd, const uint8_t *raw, uint32_t size,
		    const uint8_t *ids, size_t nids, uint64_t off)
{
	struct pg_pd_attr *a;

	if (size < ATTR_VER0)
		return pg_err(pd->diag, -EINVAL, "%s: offset %llu: perf_event_attr of %u bytes (at least %d expected)",
			      pd->name, (unsigned long long)off, size, ATTR_VER0);
	if (!pg_grow((void **)&pd->attrs, &pd->attrs_cap, pd->nattrs + 1, sizeof(*pd->attrs)))
		return pg_err(pd->diag, -ENOMEM, "out of memory");
	a = &pd->attrs[pd->nattrs];
	memset(a, 0, sizeof(*a));
	a->raw = malloc(size);
	a->ids = malloc((nids ? nids : 1) * sizeof(*a->ids));
	if (!a->raw || !a->ids) {
		free(a->raw);
		free(a->ids);
		return pg_err(pd->diag, -ENOMEM, "out of memory");
	}
	memcpy(a->raw, raw, size);
	a->raw_size = size;
	a->type = pg_pd_u32(pd, raw);
	a->config = pg_pd_u64(pd, raw + 8);
	a->sample_type = pg_pd_u64(pd, raw + 24);
	a->flags = attr_flags(pd, raw + 40);
	a->sample_id_all = a->flags & (1ull << 18);
	a->use_clockid = a->flags & (1ull << 25);
	a->clockid = size >= 96 ? (int32_t)pg_pd_u32(pd, raw + 92) : 0;
	for (size_t i = 0; i < nids; i++)
		a->ids[i] = pg_pd_u64(pd, ids + 8 * i);
	a->nr_ids = nids;
	pd->nattrs++;
	return 0;
}

/* [off, off+len) inside the mapping? */
static bool in_file(const pg_perfdata *pd, uint64_t off, uint64_t len)
{
	return off <= pd->size && len <= pd->size - off;
}

/* The COMPRESSED feature body: u32 version, type, level, ratio, mmap_len.
 * perf decompresses each record into an mmap_len buffer; so do we, with
 * a default when it is missing or 0. */
static void set_zlimit(pg_perfdata *pd, const uint8_t *body, uint64_t size)
{
	pd->zmmap_len = size >= 20 ? pg_pd_u32(pd, body + 16) : 0;
}

static uint64_t zlimit(const pg_perfdata *pd)
{
	uint64_t lim = pd->zmmap_len ? pd->zmmap_len : ZLIMIT_DEFAULT;

	return lim < ZLIMIT_MAX ? lim : ZLIMIT_MAX;
}

static int parse_file_header(pg_perfdata *pd)
{
	const uint8_t *h = pd->base;
	uint64_t hsize = pg_pd_u64(pd, h + 8), attr_size, aoff, asz, doff, dsz;
	uint64_t bitmap[4] = { 0 };
	bool any_feature = false;
	uint64_t pos;
	size_t nattrs;

	if (hsize != FILE_HDR && hsize != FILE_HDR_OLD)
		return pg_err(pd->diag, -EINVAL, "%s: offset 8: unsupported perf.data header size %llu",
			      pd->name, (unsigned long long)hsize);
	if (!in_file(pd, 0, hsize))
		return pg_err(pd->diag, -EINVAL, "%s: offset 0: file too short for its %llu-byte header",
			      pd->name, (unsigned long long)hsize);
	attr_size = pg_pd_u64(pd, h + 16);
	aoff = pg_pd_u64(pd, h + 24);
	asz = pg_pd_u64(pd, h + 32);
	doff = pg_pd_u64(pd, h + 40);
	dsz = pg_pd_u64(pd, h + 48);
	if (hsize == FILE_HDR)
		for (int i = 0; i < 4; i++)
			any_feature |= pg_pd_u64(pd, h + 72 + 8 * i) != 0;
	if (!attr_size || attr_size < ATTR_VER0 + 16)
		return pg_err(pd->diag, -EINVAL, "%s: offset 16: attr_size %llu is too small",
			      pd->name, (unsigned long long)attr_size);
	if (!in_file(pd, aoff, asz))
		return pg_err(pd->diag, -EINVAL, "%s: offset 24: attrs section [%llu, +%llu) is outside the file",
			      pd->name, (unsigned long long)aoff, (unsigned long long)asz);
	if (doff < hsize || doff > pd->size)
		return pg_err(pd->diag, -EINVAL, "%s: offset 40: data section offset %llu is outside the file",
			      pd->name, (unsigned long long)doff);
	if (!in_file(pd, doff, dsz)) {
		pg_warn(pd->diag, "%s: offset 48: data section [%llu, +%llu) runs past the end of the file (%zu bytes); reading what is there",
			pd->name, (unsigned long long)doff, (unsigned long long)dsz, pd->size);
		dsz = pd->size - doff;
	} else if (!dsz && pd->size > doff && !any_feature) {
		/* perf record killed before it wrote the header back */
		pg_warn(pd->diag, "%s: offset 48: data size is 0 (perf record did not finish); reading to the end of the file",
			pd->name);
		dsz = pd->size - doff;
	}
	pd->data_off = doff;
	pd->data_end = doff + dsz;

	nattrs = (size_t)(asz / attr_size);
	pos = aoff;
	for (size_t i = 0; i < nattrs; i++) {
		uint32_t sz;
		uint64_t idoff, idsz;
		int ret;

		if (!in_file(pd, pos, ATTR_VER0))
			return pg_err(pd->diag, -EINVAL, "%s: offset %llu: attr %zu is outside the file",
				      pd->name, (unsigned long long)pos, i);
		sz = pg_pd_u32(pd, pd->base + pos + 4);
		if (!sz)
			sz = ATTR_VER0;
		/* perf steps by attr.size + 16, whatever attr_size says */
		if (sz > attr_size - 16 || !in_file(pd, pos, (uint64_t)sz + 16))
			return pg_err(pd->diag, -EINVAL, "%s: offset %llu: attr %zu has size %u, larger than its %llu-byte entry",
				      pd->name, (unsigned long long)pos, i, sz,
				      (unsigned long long)attr_size);
		idoff = pg_pd_u64(pd, pd->base + pos + sz);
		idsz = pg_pd_u64(pd, pd->base + pos + sz + 8);
		if (!in_file(pd, idoff, idsz) || idsz % 8)
			return pg_err(pd->diag, -EINVAL, "%s: offset %llu: ids of attr %zu [%llu, +%llu) are outside the file",
				      pd->name, (unsigned long long)(pos + sz), i,
				      (unsigned long long)idoff, (unsigned long long)idsz);
		ret = add_attr(pd, pd->base + pos, sz, pd->base + idoff, (size_t)(idsz / 8), pos);
		if (ret)
			return ret;
		pos += (uint64_t)sz + 16;
	}
	if (!pd->nattrs)
		return pg_err(pd->diag, -EINVAL, "%s: offset 24: no attrs", pd->name);
	pd->header_attrs = pd->nattrs;

	if (hsize == FILE_HDR) {
		for (int i = 0; i < 4; i++)
			bitmap[i] = pg_pd_u64(pd, h + 72 + 8 * i);
		/* perf's test for a bitmap written as 32-bit words */
		if (pd->swap && !(bitmap[0] & (1ull << PG_FEAT_HOSTNAME))) {
			for (int i = 0; i < 4; i++) {
				uint64_t v = bitmap[i];

				bitmap[i] = (v >> 32) | (v << 32);
			}
			if (!(bitmap[0] & (1ull << PG_FEAT_HOSTNAME)))
				memset(bitmap, 0, sizeof(bitmap));
		}
	}
	pos = pd->data_end;
	for (unsigned bit = 0; bit < PG_FEAT_MAX; bit++) {
		uint64_t off, sz;

		if (!(bitmap[bit / 64] & (1ull << (bit % 64))))
			continue;
		if (!in_file(pd, pos, 16)) {
			pg_warn(pd->diag, "%s: offset %llu: feature table ends early; features from %u on ignored",
				pd->name, (unsigned long long)pos, bit);
			break;
		}
		off = pg_pd_u64(pd, pd->base + pos);
		sz = pg_pd_u64(pd, pd->base + pos + 8);
		pos += 16;
		if (!in_file(pd, off, sz)) {
			pg_warn(pd->diag, "%s: offset %llu: feature %u [%llu, +%llu) is outside the file; ignored",
				pd->name, (unsigned long long)(pos - 16), bit,
				(unsigned long long)off, (unsigned long long)sz);
			continue;
		}
		if (!pg_grow((void **)&pd->feats, &pd->feats_cap, pd->nfeats + 1, sizeof(*pd->feats)))
			return pg_err(pd->diag, -ENOMEM, "out of memory");
		pd->feats[pd->nfeats].bit = bit;
		pd->feats[pd->nfeats].data = pd->base + off;
		pd->feats[pd->nfeats].size = sz;
		pd->nfeats++;
		if (bit == PG_FEAT_COMPRESSED)
			set_zlimit(pd, pd->base + off, sz);
	}
	pd->zmmap_len_hdr = pd->zmmap_len;
	pd->pos = pd->data_off;
	return 0;
}

/* Stream input: read exactly n bytes into *buf (grown as needed).
 * 1 read, 0 clean EOF before any byte, -1 EOF inside, -2 no memory. */
static int read_full(pg_perfdata *pd, uint8_t **buf, size_t *cap, size_t at, size_t n)
{
	size_t got = 0;

	if (!pg_grow((void **)buf, cap, at + n, 1))
		return -2;
	while (got < n) {
		ssize_t r = read(pd->fd, *buf + at + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return got || at ? -1 : 0;
		got += (size_t)r;
	}
	return 1;
}

/* Stream input: the n-byte blob after a record into xbuf, grown as the
 * bytes arrive, so that a length the stream does not back costs no
 * memory.  1 read, -1 EOF inside (or before any byte), -2 no memory. */
static int read_extra(pg_perfdata *pd, uint64_t n)
{
	uint64_t got = 0;

	while (got < n) {
		size_t k = n - got > EXTRA_STEP ? EXTRA_STEP : (size_t)(n - got);
		int ret = read_full(pd, &pd->xbuf, &pd->xcap, (size_t)got, k);

		if (ret != 1)
			return ret == -2 ? -2 : -1;
		got += k;
	}
	return 1;
}

/* perf_event_attr sizes of the ABIs perf knows (PERF_ATTR_SIZE_VER0..4):
 * a version 1 header's attr_size is one of them + 16 (the ids section) */
static const uint64_t v1_attr_abis[] = { 64, 72, 80, 96, 104 };

static bool v1_attr_size(uint64_t v)
{
	for (size_t i = 0; i < sizeof(v1_attr_abis) / sizeof(v1_attr_abis[0]); i++)
		if (v == v1_attr_abis[i] + 16)
			return true;
	return false;
}

/* A version 1 ("PERFFILE") magic says nothing of the byte order: perf
 * tells it from the header size in pipe mode (16) and from attr_size in
 * file mode, each read as little- then big-endian.  hsize_raw is the
 * header's size word as stored.  Sets pd->big_endian. */
static int v1_byte_order(pg_perfdata *pd, uint64_t hsize_raw)
{
	uint64_t raw;

	if (le64toh(hsize_raw) == PIPE_HDR || be64toh(hsize_raw) == PIPE_HDR) {
		pd->big_endian = le64toh(hsize_raw) != PIPE_HDR;
		return 0;
	}
	if (pd->fd >= 0)	/* file mode from a stream: refused after this */
		return 0;
	if (pd->size < 24)
		return pg_err(pd->diag, -EINVAL, "%s: offset 0: too short for a perf.data version 1 header (%zu bytes)",
			      pd->name, pd->size);
	memcpy(&raw, pd->base + 16, 8);
	if (v1_attr_size(le64toh(raw)))
		pd->big_endian = false;
	else if (v1_attr_size(be64toh(raw)))
		pd->big_endian = true;
	else
		return pg_err(pd->diag, -EINVAL, "%s: offset 16: perf.data version 1 with attr_size %llu, which is no perf_event_attr size (64, 72, 80, 96 or 104 bytes + 16) in either byte order, so its byte order is unknown",
			      pd->name, (unsigned long long)le64toh(raw));
	return 0;
}

static int open_common(pg_perfdata *pd)
{
	uint8_t magic[8];
	uint64_t hsize;

	if (pd->fd >= 0) {
		if (read_full(pd, &pd->rbuf, &pd->rcap, 0, 16) != 1)
			return pg_err(pd->diag, -EINVAL, "%s: offset 0: too short for a perf.data header", pd->name);
		memcpy(magic, pd->rbuf, 8);
		memcpy(&hsize, pd->rbuf + 8, 8);
	} else {
		if (pd->size < 16)
			return pg_err(pd->diag, -EINVAL, "%s: offset 0: too short for a perf.data header (%zu bytes)",
				      pd->name, pd->size);
		memcpy(magic, pd->base, 8);
		memcpy(&hsize, pd->base + 8, 8);
	}
	if (!memcmp(magic, "PERFILE2", 8) || !memcmp(magic, "2ELIFREP", 8)) {
		pd->version = 2;
		pd->big_endian = magic[0] == '2';
	} else if (!memcmp(magic, "PERFFILE", 8)) {
		int ret;

		pd->version = 1;
		ret = v1_byte_order(pd, hsize);
		if (ret)
			return ret;
	} else {
		return pg_err(pd->diag, -EINVAL, "%s: offset 0: not a perf.data file (bad magic)", pd->name);
	}
	pd->swap = pd->big_endian != (__BYTE_ORDER == __BIG_ENDIAN);
	if (pd->swap)
		hsize = bswap_64(hsize);
	if (hsize == PIPE_HDR) {
		pd->pipe = true;
		pd->pos = pd->data_off = PIPE_HDR;
		pd->data_end = pd->fd >= 0 ? UINT64_MAX : pd->size;
		return 0;
	}
	if (pd->fd >= 0)
		return pg_err(pd->diag, -EINVAL, "%s: offset 8: a file-mode perf.data cannot be read from a pipe; give its path",
			      pd->name);
	return parse_file_header(pd);
}

static int new_pd(const char *name, struct pg_diag *diag, pg_perfdata **out)
{
	pg_perfdata *pd = calloc(1, sizeof(*pd));

	*out = NULL;
	if (!pd || !(pd->name = strdup(name))) {
		free(pd);
		return pg_err(diag, -ENOMEM, "out of memory");
	}
	pd->diag = diag;
	pd->fd = -1;
	pd->mreg = -1;
	*out = pd;
	return 0;
}

int pg_perfdata_open_mem(const void *buf, size_t len, const char *name,
			 struct pg_diag *diag, pg_perfdata **out)
{
	pg_perfdata *pd;
	int ret = new_pd(name, diag, &pd);

	if (ret)
		return ret;
	pd->base = buf;
	pd->size = len;
	ret = open_common(pd);
	if (ret) {
		pg_perfdata_close(pd);
		return ret;
	}
	*out = pd;
	return 0;
}

int pg_perfdata_open(const char *path, struct pg_diag *diag, pg_perfdata **out)
{
	bool is_stdin = !strcmp(path, "-");
	struct stat sb;
	pg_perfdata *pd;
	int fd, ret;

	ret = new_pd(is_stdin ? "<stdin>" : path, diag, &pd);
	if (ret)
		return ret;
	fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		ret = pg_err(diag, -errno, "%s: %s", path, strerror(errno));
		if (fd >= 0 && !is_stdin)
			close(fd);	/* not yet the reader's to close */
		pg_perfdata_close(pd);
		return ret;
	}
	if (S_ISREG(sb.st_mode) && sb.st_size > 0) {
		void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);

		if (map == MAP_FAILED) {
			ret = pg_err(diag, -errno, "%s: cannot map: %s", path, strerror(errno));
			if (!is_stdin)
				close(fd);
			pg_perfdata_close(pd);
			return ret;
		}
		madvise(map, (size_t)sb.st_size, MADV_SEQUENTIAL);
		pd->base = map;
		pd->size = (size_t)sb.st_size;
		pd->mapped = true;
		/* a shrink while it is read is a clear error, not SIGBUS
		 * (standard input stays open: checked through it) */
		pd->mreg = pg_map_register(map, (uint64_t)sb.st_size, pd->name, fd, is_stdin);
		if (!is_stdin)
			close(fd);
	} else {
		pd->fd = fd;
	}
	ret = open_common(pd);
	if (ret) {
		if (pd->fd >= 0 && !is_stdin)
			close(pd->fd);
		pd->fd = -1;
		pg_perfdata_close(pd);
		return ret;
	}
	*out = pd;
	return 0;
}

int pg_perfdata_rewind(pg_perfdata *pd)
{
	if (pd->fd >= 0)
		return pg_err(pd->diag, -ESPIPE, "%s: cannot rewind a stream", pd->name);
	pd->pos = pd->data_off;
	pd->done = false;
	pd->zlen = pd->zhead = 0;
	pd->zsrc = NULL;
	pd->zmmap_len = pd->zmmap_len_hdr;
	pd->inband_bytes = 0;
	if (pd->zd)
		ZSTD_initDStream(pd->zd);
	/* attrs that came in HEADER_ATTR records are seen again */
	for (size_t i = pd->header_attrs; i < pd->nattrs; i++) {
		free(pd->attrs[i].raw);
		free(pd->attrs[i].ids);
	}
	pd->nattrs = pd->header_attrs;
	return 0;
}

static const struct pg_pd_attr *attr_by_id(const pg_perfdata *pd, uint64_t id, int *idx)
{
	for (size_t i = 0; i < pd->nattrs; i++)
		for (size_t j = 0; j < pd->attrs[i].nr_ids; j++)
			if (pd->attrs[i].ids[j] == id) {
				*idx = (int)i;
				return &pd->attrs[i];
			}
	*idx = 0;	/* id 0 (synthesized) and unknown ids: the first attr */
	return &pd->attrs[0];
}

/* Decodes the owning attr, time and pid/tid of a kernel record. */
static void decode_ids(const pg_perfdata *pd, struct pg_pd_rec *r)
{
	const uint8_t *d = r->data;
	const struct pg_pd_attr *a0, *a;
	uint64_t st;
	size_t off;
	int idx = 0;

	r->attr = -1;
	if (!pd->nattrs || r->type >= PG_PERF_RECORD_USER_TYPE_START)
		return;
	a0 = &pd->attrs[0];
	st = a0->sample_type;
	if (r->type == PG_PERF_RECORD_SAMPLE) {
		a = a0;
		if (pd->nattrs > 1) {
			size_t id_off = 8;

			if (st & PG_SAMPLE_IDENTIFIER) {
				if (r->size >= 16)
					a = attr_by_id(pd, pg_pd_u64(pd, d + 8), &idx);
			} else if (st & PG_SAMPLE_ID) {
				id_off += 8 * (!!(st & PG_SAMPLE_IP) + !!(st & PG_SAMPLE_TID) +
					       !!(st & PG_SAMPLE_TIME) + !!(st & PG_SAMPLE_ADDR));
				if (id_off + 8 <= r->size)
					a = attr_by_id(pd, pg_pd_u64(pd, d + id_off), &idx);
			}
		}
		r->attr = idx;
		st = a->sample_type;
		off = 8 + 8 * (!!(st & PG_SAMPLE_IDENTIFIER) + !!(st & PG_SAMPLE_IP));
		if ((st & PG_SAMPLE_TID) && off + 8 <= r->size) {
			r->pid = pg_pd_u32(pd, d + off);
			r->tid = pg_pd_u32(pd, d + off + 4);
			r->has_tid = true;
			off += 8;
		}
		if ((st & PG_SAMPLE_TIME) && off + 8 <= r->size) {
			r->time = pg_pd_u64(pd, d + off);
			r->has_time = r->time && r->time != UINT64_MAX;
		}
		return;
	}
	if (!a0->sample_id_all)
		return;
	a = a0;
	if (pd->nattrs > 1) {
		size_t back = 0;

		if (st & PG_SAMPLE_IDENTIFIER)
			back = 8;
		else if (st & PG_SAMPLE_ID)
			back = 8 * (1 + !!(st & PG_SAMPLE_CPU) + !!(st & PG_SAMPLE_STREAM_ID));
		if (back && back + 8 <= r->size)
			a = attr_by_id(pd, pg_pd_u64(pd, d + r->size - back), &idx);
	}
	r->attr = idx;
	st = a->sample_type;
	{
		size_t tsz = 8 * (!!(st & PG_SAMPLE_TID) + !!(st & PG_SAMPLE_TIME) +
				  !!(st & PG_SAMPLE_ID) + !!(st & PG_SAMPLE_STREAM_ID) +
				  !!(st & PG_SAMPLE_CPU) + !!(st & PG_SAMPLE_IDENTIFIER));

		if (tsz + 8 > r->size)
			return;
		off = r->size - tsz;
	}
	if (st & PG_SAMPLE_TID) {
		r->pid = pg_pd_u32(pd, d + off);
		r->tid = pg_pd_u32(pd, d + off + 4);
		r->has_tid = true;
		off += 8;
	}
	if (st & PG_SAMPLE_TIME) {
		r->time = pg_pd_u64(pd, d + off);
		r->has_time = r->time && r->time != UINT64_MAX;
	}
}

static void parse_time_conv(pg_perfdata *pd, const struct pg_pd_rec *r)
{
	const uint8_t *d = r->data;

	if (r->size < 32)
		return;
	memset(&pd->tc, 0, sizeof(pd->tc));
	pd->tc.time_shift = pg_pd_u64(pd, d + 8);
	pd->tc.time_mult = pg_pd_u64(pd, d + 16);
	pd->tc.time_zero = pg_pd_u64(pd, d + 24);
	if (r->size >= 50) {
		pd->tc.time_cycles = pg_pd_u64(pd, d + 32);
		pd->tc.time_mask = pg_pd_u64(pd, d + 40);
		pd->tc.cap_user_time_zero = d[48];
		pd->tc.cap_user_time_short = d[49];
	} else {
		pd->tc.cap_user_time_zero = true;
	}
	pd->have_tc = true;
}

/* Next record from the decompressed buffer, if a whole one is there. */
static int next_decompressed(pg_perfdata *pd, struct pg_pd_rec *r)
{
	const uint8_t *p = pd->zbuf + pd->zhead;
	size_t left = pd->zlen - pd->zhead;
	uint16_t size;

	if (left < 8)
		return 0;
	size = pg_pd_u16(pd, p + 6);
	if (size < 8)
		return pg_err(pd->diag, -EINVAL, "%s: offset %llu: record of size %u inside compressed data",
			      pd->name, (unsigned long long)pd->zoff, size);
	if (left < size)
		return 0;
	memset(r, 0, sizeof(*r));
	r->type = pg_pd_u32(pd, p);
	r->misc = pg_pd_u16(pd, p + 4);
	r->size = size;
	r->data = p;
	r->offset = pd->zoff;
	r->compressed = true;
	pd->zhead += size;
	return 1;
}

/* Starts reading a COMPRESSED record: its records come out of
 * zfill() a window at a time. */
static int start_compressed(pg_perfdata *pd, const struct pg_pd_rec *r)
{
	size_t hdr = r->type == PG_PERF_RECORD_COMPRESSED2 ? 16 : 8;

	if (r->size < hdr)
		return pg_err(pd->diag, -EINVAL, "%s: offset %llu: COMPRESSED record too short",
			      pd->name, (unsigned long long)r->offset);
	if (!pd->zd) {
		pd->zd = ZSTD_createDStream();
		if (!pd->zd || ZSTD_isError(ZSTD_initDStream(pd->zd)))
			return pg_err(pd->diag, -ENOMEM, "out of memory");
	}
	if (!pd->zbuf) {
		/* an unfinished record (< REC_MAX) plus a full output block */
		pd->zcap = REC_MAX + ZSTD_DStreamOutSize();
		pd->zbuf = malloc(pd->zcap);
		if (!pd->zbuf)
			return pg_err(pd->diag, -ENOMEM, "out of memory");
	}
	pd->zsrc = r->data + hdr;
	pd->zsrc_len = r->size - hdr;
	if (r->type == PG_PERF_RECORD_COMPRESSED2) {
		uint64_t dsz = pg_pd_u64(pd, r->data + 8);

		if (dsz < pd->zsrc_len)
			pd->zsrc_len = (size_t)dsz;
	}
	pd->zsrc_pos = 0;
	pd->zrec_out = 0;
	pd->zoff = r->offset;
	return 0;
}

/* Decompresses more of the current COMPRESSED record into zbuf, after
 * the unfinished record kept at its front.  Called only when zbuf holds
 * no whole record, so that tail is under REC_MAX bytes and there is room
 * for an output block.  The output of one record is capped at zlimit
 * bytes: more is an error, and none of the excess is produced. */
static int zfill(pg_perfdata *pd)
{
	ZSTD_inBuffer in = { pd->zsrc, pd->zsrc_len, pd->zsrc_pos };
	ZSTD_outBuffer out;
	size_t ret, before;
	/* one byte past the bound tells a record that exceeds it */
	uint64_t limit = zlimit(pd);
	uint64_t room = pd->zrec_out <= limit ? limit - pd->zrec_out + 1 : 1;

	if (pd->zhead)
		memmove(pd->zbuf, pd->zbuf + pd->zhead, pd->zlen - pd->zhead);
	pd->zlen -= pd->zhead;
	pd->zhead = 0;
	out.dst = pd->zbuf;
	out.size = pd->zcap;
	out.pos = before = pd->zlen;
	if (out.size - out.pos > room)
		out.size = out.pos + (size_t)room;
	ret = ZSTD_decompressStream(pd->zd, &out, &in);
	if (ZSTD_isError(ret))
		return pg_err(pd->diag, -EINVAL, "%s: offset %llu: compressed data: %s",
			      pd->name, (unsigned long long)pd->zoff, ZSTD_getErrorName(ret));
	pd->zrec_out += out.pos - before;
	if (pd->zrec_out > limit)
		return pg_err(pd->diag, -EINVAL, "%s: offset %llu: COMPRESSED record decompresses to more than %llu bytes%s",
			      pd->name, (unsigned long long)pd->zoff, (unsigned long long)limit,
			      !pd->zmmap_len ? " (the bound used when the header gives no mmap_len)"
			      : limit < pd->zmmap_len ? " (the largest ring buffer perf record maps; the header's mmap_len is larger)"
			      : ", the mmap_len of the COMPRESSED feature");
	if (in.pos == pd->zsrc_pos && out.pos == before && in.pos < in.size)
		return pg_err(pd->diag, -EINVAL, "%s: offset %llu: compressed data: no progress",
			      pd->name, (unsigned long long)pd->zoff);
	pd->zsrc_pos = in.pos;
	pd->zlen = out.pos;
	if (!ret && in.pos < in.size)
		ZSTD_initDStream(pd->zd);	/* a new frame follows */
	/* done when the input is used up and zstd had room to flush it all */
	if (in.pos == in.size && out.pos < out.size)
		pd->zsrc = NULL;
	return 0;
}

static int next_raw(pg_perfdata *pd, struct pg_pd_rec *r)
{
	uint64_t off = pd->pos;
	uint16_t size;
	uint32_t type;

	memset(r, 0, sizeof(*r));
	/* the SIGBUS handler gave zeros for what the file lost: stop there */
	if (pg_map_changed(pd->mreg)) {
		pd->done = true;
		return pg_err(pd->diag, -EIO, "%s: changed while being read", pd->name);
	}
	if (pd->fd >= 0) {
		int ret = read_full(pd, &pd->rbuf, &pd->rcap, 0, 8);

		if (ret == 0)
			return 0;
		if (ret < 0)
			goto truncated;
		size = pg_pd_u16(pd, pd->rbuf + 6);
		if (size < 8)
			goto too_small;
		ret = read_full(pd, &pd->rbuf, &pd->rcap, 8, size - 8u);
		if (ret < 0)
			goto truncated;
		r->data = pd->rbuf;
	} else {
		if (off >= pd->data_end)
			return 0;
		if (pd->data_end - off < 8)
			goto truncated;
		size = pg_pd_u16(pd, pd->base + off + 6);
		if (size < 8)
			goto too_small;
		if (pd->data_end - off < size)
			goto truncated;
		r->data = pd->base + off;
	}
	type = pg_pd_u32(pd, r->data);
	r->type = type;
	r->misc = pg_pd_u16(pd, r->data + 4);
	r->size = size;
	r->offset = off;
	pd->pos += size;
	if ((type == PG_PERF_RECORD_HEADER_TRACING_DATA && size >= 12) ||
	    (type == PG_PERF_RECORD_AUXTRACE && size >= 16)) {
		uint64_t n = type == PG_PERF_RECORD_AUXTRACE ? pg_pd_u64(pd, r->data + 8)
							     : pg_pd_u32(pd, r->data + 8);

		if (n > MAX_EXTRA)
			return pg_err(pd->diag, -EINVAL, "%s: offset %llu: record type %u claims %llu bytes of payload",
				      pd->name, (unsigned long long)off, type, (unsigned long long)n);
		if (pd->fd >= 0) {
			/* the record buffer must survive: read the blob elsewhere */
			int ret = read_extra(pd, n);

			if (ret == -2) {
				pd->done = true;
				return pg_err(pd->diag, -ENOMEM, "%s: offset %llu: out of memory for a %llu-byte payload",
					      pd->name, (unsigned long long)off, (unsigned long long)n);
			}
			if (ret != 1)
				goto truncated;
			r->extra = pd->xbuf;
		} else {
			if (pd->data_end - pd->pos < n)
				goto truncated;
			r->extra = pd->base + pd->pos;
		}
		r->extra_size = n;
		pd->pos += n;
	}
	return 1;

too_small:
	pd->done = true;
	return pg_err(pd->diag, -EINVAL, "%s: offset %llu: record size %u is smaller than its 8-byte header",
		      pd->name, (unsigned long long)off, size);
truncated:
	pg_warn(pd->diag, "%s: offset %llu: truncated record at the end of the data; ignored",
		pd->name, (unsigned long long)off);
	pd->done = true;
	return 0;
}

int pg_perfdata_next(pg_perfdata *pd, struct pg_pd_rec *r)
{
	for (;;) {
		int ret;

		if (pd->zlen > pd->zhead) {
			ret = next_decompressed(pd, r);
			if (ret < 0) {
				pd->done = true;
				pd->zsrc = NULL;
				return ret;
			}
			if (ret && (r->type == PG_PERF_RECORD_COMPRESSED ||
				    r->type == PG_PERF_RECORD_COMPRESSED2)) {
				pg_warn(pd->diag, "%s: offset %llu: a COMPRESSED record inside compressed data; skipped",
					pd->name, (unsigned long long)r->offset);
				continue;
			}
			if (ret)
				goto got;
		}
		if (pd->zsrc) {
			ret = zfill(pd);
			if (ret < 0) {
				pd->done = true;
				return ret;
			}
			continue;
		}
		if (pd->done)
			return 0;
		ret = next_raw(pd, r);
		if (ret <= 0) {
			pd->done = true;
			if (ret == 0 && pd->zlen > pd->zhead)
				pg_warn(pd->diag, "%s: %zu bytes of compressed data left at the end (an incomplete record)",
					pd->name, pd->zlen - pd->zhead);
			return ret;
		}
		if (r->type == PG_PERF_RECORD_COMPRESSED || r->type == PG_PERF_RECORD_COMPRESSED2) {
			ret = start_compressed(pd, r);
			if (ret < 0) {
				pd->done = true;
				return ret;
			}
			continue;
		}
got:
		if (r->type == PG_PERF_RECORD_HEADER_ATTR) {
			uint32_t asz = r->size >= 16 ? pg_pd_u32(pd, r->data + 12) : 0;

			if (!asz)
				asz = ATTR_VER0;
			if (asz > r->size - 8u) {
				pd->done = true;
				return pg_err(pd->diag, -EINVAL, "%s: offset %llu: HEADER_ATTR of %u bytes holds no %u-byte attr",
					      pd->name, (unsigned long long)r->offset, r->size, asz);
			}
			pd->inband_bytes += r->size;
			if (pd->inband_bytes > INBAND_ATTR_MAX) {
				pd->done = true;
				return pg_err(pd->diag, -EINVAL, "%s: offset %llu: more than %u bytes of HEADER_ATTR records",
					      pd->name, (unsigned long long)r->offset, INBAND_ATTR_MAX);
			}
			ret = add_attr(pd, r->data + 8, asz, r->data + 8 + asz,
				       (r->size - 8 - asz) / 8, r->offset);
			if (ret) {
				pd->done = true;
				return ret;
			}
		} else if (r->type == PG_PERF_RECORD_TIME_CONV) {
			parse_time_conv(pd, r);
		} else if (r->type == PG_PERF_RECORD_HEADER_FEATURE && r->size >= 16 &&
			   pg_pd_u64(pd, r->data + 8) == PG_FEAT_COMPRESSED) {
			set_zlimit(pd, r->data + 16, r->size - 16u);	/* pipe mode */
		}
		decode_ids(pd, r);
		return 1;
	}
}

int pg_perfdata_mmap(const pg_perfdata *pd, const struct pg_pd_rec *r,
		     struct pg_pd_mmap *mm)
{
	const uint8_t *d = r->data;
	size_t name_off;

	memset(mm, 0, sizeof(*mm));
	if (r->type == PG_PERF_RECORD_MMAP)
		name_off = 40;
	else if (r->type == PG_PERF_RECORD_MMAP2)
		name_off = 72;
	else
		return -EINVAL;
	if (r->size <= name_off || !memchr(d + name_off, 0, r->size - name_off))
		return -EINVAL;
	mm->pid = pg_pd_u32(pd, d + 8);
	mm->tid = pg_pd_u32(pd, d + 12);
	mm->start = pg_pd_u64(pd, d + 16);
	mm->len = pg_pd_u64(pd, d + 24);
	mm->pgoff = pg_pd_u64(pd, d + 32);
	mm->filename = (const char *)d + name_off;
	if (r->type == PG_PERF_RECORD_MMAP2) {
		mm->prot = pg_pd_u32(pd, d + 64);
		mm->exec = mm->prot & 4;	/* PROT_EXEC */
	} else {
		mm->exec = !(r->misc & 0x2000);	/* PERF_RECORD_MISC_MMAP_DATA */
		mm->prot = mm->exec ? 5 : 1;
	}
	return 0;
}

bool pg_perfdata_own_tid(const pg_perfdata *pd, const struct pg_pd_rec *r,
			 int32_t *pid, int32_t *tid)
{
	size_t tid_off = 12;

	switch (r->type) {
	case PG_PERF_RECORD_SAMPLE:
		if (!r->has_tid)
			return false;
		*pid = (int32_t)r->pid;
		*tid = (int32_t)r->tid;
		return true;
	case PG_PERF_RECORD_FORK:
	case PG_PERF_RECORD_EXIT:
		tid_off = 16;	/* u32 pid, ppid, tid, ptid */
		break;
	case PG_PERF_RECORD_MMAP:
	case PG_PERF_RECORD_MMAP2:
	case PG_PERF_RECORD_COMM:
	case PG_PERF_RECORD_READ:
	case PG_PERF_RECORD_ITRACE_START:
	case PG_PERF_RECORD_NAMESPACES:
		break;
	default:
		return false;
	}
	if (r->size < tid_off + 4)
		return false;
	*pid = (int32_t)pg_pd_u32(pd, r->data + 8);
	*tid = (int32_t)pg_pd_u32(pd, r->data + tid_off);
	return true;
}

bool pg_perfdata_probe(const void *buf, size_t len)
{
	return len >= 4 && (!memcmp(buf, "PERF", 4) || !memcmp(buf, "2ELI", 4));
}

/* perf's names (tools/perf/util/event.c and header.c), by number */
static const char *const feat_names[] = {
	"RESERVED", "TRACING_DATA", "BUILD_ID", "HOSTNAME", "OSRELEASE", "VERSION",
	"ARCH", "NRCPUS", "CPUDESC", "CPUID", "TOTAL_MEM", "CMDLINE", "EVENT_DESC",
	"CPU_TOPOLOGY", "NUMA_TOPOLOGY", "BRANCH_STACK", "PMU_MAPPINGS", "GROUP_DESC",
	"AUXTRACE", "STAT", "CACHE", "SAMPLE_TIME", "MEM_TOPOLOGY", "CLOCKID",
	"DIR_FORMAT", "BPF_PROG_INFO", "BPF_BTF", "COMPRESSED", "CPU_PMU_CAPS",
	"CLOCK_DATA", "HYBRID_TOPOLOGY", "PMU_CAPS",
};

static const char *const kernel_names[] = {
	NULL, "MMAP", "LOST", "COMM", "EXIT", "THROTTLE", "UNTHROTTLE", "FORK", "READ",
	"SAMPLE", "MMAP2", "AUX", "ITRACE_START", "LOST_SAMPLES", "SWITCH",
	"SWITCH_CPU_WIDE", "NAMESPACES", "KSYMBOL", "BPF_EVENT", "CGROUP", "TEXT_POKE",
	"AUX_OUTPUT_HW_ID",
};

static const char *const user_names[] = {	/* from PG_PERF_RECORD_USER_TYPE_START */
	"HEADER_ATTR", "HEADER_EVENT_TYPE", "HEADER_TRACING_DATA", "HEADER_BUILD_ID",
	"FINISHED_ROUND", "ID_INDEX", "AUXTRACE_INFO", "AUXTRACE", "AUXTRACE_ERROR",
	"THREAD_MAP", "CPU_MAP", "STAT_CONFIG", "STAT", "STAT_ROUND", "EVENT_UPDATE",
	"TIME_CONV", "HEADER_FEATURE", "COMPRESSED", "FINISHED_INIT", "COMPRESSED2",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *pg_perfdata_record_name(uint32_t t)
{
	if (t < NELEM(kernel_names) && kernel_names[t])
		return kernel_names[t];
	if (t >= PG_PERF_RECORD_USER_TYPE_START &&
	    t - PG_PERF_RECORD_USER_TYPE_START < NELEM(user_names))
		return user_names[t - PG_PERF_RECORD_USER_TYPE_START];
	return "UNKNOWN";
}

const char *pg_perfdata_feature_name(unsigned bit)
{
	return bit < NELEM(feat_names) ? feat_names[bit] : "UNKNOWN";
}
