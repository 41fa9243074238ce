/* SPDX-License-Identifier: MIT */
/* perf.data writer.  File mode: header, data, feature table and bodies,
 * then ids and attrs; the header is written last.  Pipe mode: header,
 * HEADER_ATTR and feature records, then the data.
 *
 * The records and header pieces it synthesizes (MMAP2, and for the
 * converters attrs, EVENT_DESC, string features and FINISHED_ROUND:
 * perfdata/writer.h) are encoded by perfdata/synth.h; the writer uses the
 * encoder, never the reverse. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pthread.h>
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_c_literalCompressionMode */
#include <sys/resource.h>
#include <sys/syscall.h>
#include <zstd.h>

#include <perfgraft/perfdata.h>
#include "perfdata/synth.h"
#include "perfdata/writer.h"
#include "util/util.h"

#define OUT_BUF (1u << 16)
#define FILE_HDR 104
#define NAME_ALIGN 64
#define BUILD_ID_MISC_SIZE 0x8000	/* PERF_RECORD_MISC_BUILD_ID_SIZE */
/* Compression: records are staged ZSTAGE bytes at a time and fed to the
 * stream ZFEED bytes per flush, one COMPRESSED record each, so that no
 * record decompresses to more than ZMMAP_LEN, the buffer perf 6.1
 * decompresses each into (the COMPRESSED feature's mmap_len). */
#define ZSTAGE (1u << 20)
#define ZFEED 65000u		/* ZSTD_compressBound(ZFEED) fits a record */
#define ZMMAP_LEN (1u << 16)
#define ZREC_MAX 65528u		/* 8-aligned, under the u16 record size */

struct feat {
	unsigned bit;
	uint8_t *body;
	uint64_t size;
};

struct pg_pdw {
	struct pg_diag *diag;
	bool pipe, big_endian;
	int fd;
	bool is_stdout;
	struct pg_outfile of;
	int dirfd;
	uint8_t *buf;
	size_t blen;
	uint64_t pos;		/* bytes handed to the writer so far */
	uint64_t data_off;
	bool data_started;
	struct pg_buf attrs;	/* file mode: {raw attr, ids} as added */
	struct { uint64_t off, raw_size, nids; } *alist;
	size_t nattrs, acap;
	struct feat *feats;
	size_t nfeats, fcap;
	struct pg_buf build_ids;	/* file mode BUILD_ID feature entries */
	pg_pdw_build_id_fn later;	/* and those made at finish, after them */
	void *later_ctx;
	int err;
	bool finished;		/* pg_pdw_finish() ran: only the rename is left */
	char *path;		/* for messages */
	struct zpool *zp;	/* data compression, or NULL */
	uint64_t zraw, zout;	/* bytes staged, bytes of COMPRESSED records */
};

static int flush(pg_pdw *w)
{
	size_t done = 0;

	while (done < w->blen) {
		ssize_t r = write(w->fd, w->buf + done, w->blen - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->err = errno ? -errno : -EIO;
			return pg_err(w->diag, w->err, "%s: cannot write: %s", w->path, strerror(-w->err));
		}
		done += (size_t)r;
	}
	w->blen = 0;
	return 0;
}

static int out(pg_pdw *w, const void *p, uint64_t n)
{
	const uint8_t *s = p;

	if (w->err)
		return w->err;
	while (n) {
		size_t k = OUT_BUF - w->blen;

		if (k > n)
			k = (size_t)n;
		memcpy(w->buf + w->blen, s, k);
		w->blen += k;
		w->pos += k;
		s += k;
		n -= k;
		if (w->blen == OUT_BUF && flush(w))
			return w->err;
	}
	return 0;
}

static int out_buf(pg_pdw *w, struct pg_buf *b)
{
	if (b->oom)
		return pg_err(w->diag, -ENOMEM, "out of memory");
	return out(w, b->p, b->len);
}

/* Compression.  The data section is cut into ZSTAGE-byte stages; each
 * stage is cut into ZFEED-byte pieces and every piece becomes one complete
 * zstd frame in one COMPRESSED record.  Whole frames keep perf 6.1 happy:
 * its persistent decompression stream reads concatenated frames, and it
 * rejects a record that decompresses to nothing ("Couldn't decompress
 * data") or to more than the feature's mmap_len.  Independent frames also
 * let stages be compressed in parallel: worker threads take full stages
 * from a ring and write them out strictly in order. */
/* Two workers need four stages: one being filled, two being compressed,
 * one being written out; more only hold the producer's lead (1 MiB of
 * resident memory each, a fourth of the xray converter's peak at 8). */
#define ZSLOTS 4
#define ZWORKERS 2

struct zslot {
	uint8_t *in, *out;
	size_t in_len, out_len;
	uint64_t seq;
	int state;		/* 0 free, 1 full, 2 compressing, 3 compressed */
};

struct zpool {
	pg_pdw *w;
	int level;
	struct zslot slot[ZSLOTS];
	uint64_t fill_seq;	/* the stage the caller fills: slot[fill_seq % ZSLOTS] */
	uint64_t write_seq;	/* next stage to write out */
	size_t nworkers;
	pthread_t th[ZWORKERS];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool quit;
	bool writing;		/* a thread is writing a stage out (unlocked) */
	int err;
};

#define ZOUT_CAP ((ZSTAGE + ZFEED - 1) / ZFEED * (ZREC_MAX + 8))

/* A compression context for the level.  At the fast levels (perf record
 * -z's default is 1) literals are stored raw: on perf.data's fixed-layout
 * records Huffman-coding them costs about 12% of the CPU for 4% of the
 * size.  A libzstd without that parameter just codes them. */
static ZSTD_CCtx *z_cctx(int level)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();

	if (cc && ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level))) {
		ZSTD_freeCCtx(cc);
		return NULL;
	}
	if (cc && level <= 1)
		(void)ZSTD_CCtx_setParameter(cc, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
	return cc;
}

/* Compresses one stage into COMPRESSED records (little or big endian), a
 * complete frame each. */
static int z_stage(ZSTD_CCtx *cc, bool big_endian, struct zslot *sl)
{
	sl->out_len = 0;
	for (size_t at = 0; at < sl->in_len; at += ZFEED) {
		size_t n = sl->in_len - at < ZFEED ? sl->in_len - at : ZFEED;
		uint8_t *rec = sl->out + sl->out_len;
		size_t c = ZSTD_compress2(cc, rec + 8, ZREC_MAX - 8, sl->in + at, n);
		uint32_t type = PG_PERF_RECORD_COMPRESSED;
		uint16_t misc = 0, size;

		if (ZSTD_isError(c))
			return -EIO;
		size = (uint16_t)(8 + c);
		if (big_endian) {
			type = __builtin_bswap32(type);
			size = __builtin_bswap16(size);
		}
		memcpy(rec, &type, 4);
		memcpy(rec + 4, &misc, 2);
		memcpy(rec + 6, &size, 2);
		sl->out_len += 8 + c;
	}
	return 0;
}

/* With the lock held: writes out the compressed stages that are next, in
 * order.  The write itself runs without the lock (one writer at a time):
 * a write that waits for the page cache must not stop the other threads
 * from handing over and compressing stages. */
static void z_write_ready(struct zpool *zp)
{
	while (!zp->writing) {
		struct zslot *sl = &zp->slot[zp->write_seq % ZSLOTS];
		int err = zp->err;

		if (sl->state != 3 || sl->seq != zp->write_seq)
			return;
		zp->writing = true;
		pthread_mutex_unlock(&zp->mu);
		if (!err) {
			zp->w->zout += sl->out_len;
			if (out(zp->w, sl->out, sl->out_len))
				err = zp->w->err;
		}
		pthread_mutex_lock(&zp->mu);
		zp->writing = false;
		if (err && !zp->err)
			zp->err = err;
		sl->state = 0;
		sl->in_len = 0;
		zp->write_seq++;
		pthread_cond_broadcast(&zp->cv);
	}
}

static void *z_worker(void *arg)
{
	struct zpool *zp = arg;
	ZSTD_CCtx *cc = z_cctx(zp->level);
	pid_t tid = (pid_t)syscall(SYS_gettid);

	int prio;

	/* The thread producing the records is the critical path: with few
	 * cores, equal shares starve it while the workers wait for its
	 * stages.  A lower priority for the workers alone (best effort) lets
	 * it keep a core; they take the rest and catch up when it blocks. */
	errno = 0;
	prio = getpriority(PRIO_PROCESS, (id_t)tid);
	if (!(prio == -1 && errno))
		(void)setpriority(PRIO_PROCESS, (id_t)tid, prio + 10 > 19 ? 19 : prio + 10);

	pthread_mutex_lock(&zp->mu);
	if (!cc)
		zp->err = -ENOMEM;
	for (;;) {
		struct zslot *job = NULL;

		for (size_t i = 0; i < ZSLOTS; i++) {
			struct zslot *sl = &zp->slot[i];

			if (sl->state == 1 && (!job || sl->seq < job->seq))
				job = sl;
		}
		if (!job) {
			if (zp->quit)
				break;
			pthread_cond_wait(&zp->cv, &zp->mu);
			continue;
		}
		job->state = 2;
		pthread_mutex_unlock(&zp->mu);
		int r = cc && !zp->err ? z_stage(cc, zp->w->big_endian, job) : 0;
		pthread_mutex_lock(&zp->mu);
		if (r && !zp->err)
			zp->err = r;
		job->state = 3;
		z_write_ready(zp);
	}
	pthread_mutex_unlock(&zp->mu);
	ZSTD_freeCCtx(cc);
	return NULL;
}

static struct zslot *z_cur(struct zpool *zp)
{
	return &zp->slot[zp->fill_seq % ZSLOTS];
}

/* Hands the filled stage over and waits for the next slot to be free;
 * without worker threads the stage is compressed and written here. */
static int z_handoff(pg_pdw *w)
{
	struct zpool *zp = w->zp;
	struct zslot *sl = z_cur(zp);
	int err;

	pthread_mutex_lock(&zp->mu);
	if (!sl->in_len) {
		err = zp->err;
		pthread_mutex_unlock(&zp->mu);
		return err;
	}
	sl->seq = zp->fill_seq++;
	sl->state = 1;
	if (!zp->nworkers) {
		ZSTD_CCtx *cc = z_cctx(zp->level);
		int r = cc ? z_stage(cc, w->big_endian, sl) : -ENOMEM;

		ZSTD_freeCCtx(cc);
		if (r && !zp->err)
			zp->err = r;
		sl->state = 3;
		z_write_ready(zp);
	}
	pthread_cond_broadcast(&zp->cv);
	while (z_cur(zp)->state != 0)
		pthread_cond_wait(&zp->cv, &zp->mu);
	err = zp->err;
	pthread_mutex_unlock(&zp->mu);
	return err;
}

/* Writes out everything staged and stops the workers. */
static int z_finish(pg_pdw *w)
{
	struct zpool *zp = w->zp;
	int ret = z_handoff(w);

	pthread_mutex_lock(&zp->mu);
	while (zp->write_seq != zp->fill_seq)
		pthread_cond_wait(&zp->cv, &zp->mu);
	zp->quit = true;
	pthread_cond_broadcast(&zp->cv);
	pthread_mutex_unlock(&zp->mu);
	for (size_t i = 0; i < zp->nworkers; i++)
		pthread_join(zp->th[i], NULL);
	zp->nworkers = 0;
	if (zp->err && !ret)
		ret = zp->err;
	if (ret)
		return pg_err(w->diag, ret, "%s: cannot compress or write: %s", w->path, strerror(-ret));
	return 0;
}

static void z_free(struct zpool *zp)
{
	if (!zp)
		return;
	pthread_mutex_lock(&zp->mu);
	zp->quit = true;
	zp->err = zp->err ? zp->err : -ECANCELED;
	pthread_cond_broadcast(&zp->cv);
	pthread_mutex_unlock(&zp->mu);
	for (size_t i = 0; i < zp->nworkers; i++)
		pthread_join(zp->th[i], NULL);
	for (size_t i = 0; i < ZSLOTS; i++) {
		free(zp->slot[i].in);
		free(zp->slot[i].out);
	}
	pthread_mutex_destroy(&zp->mu);
	pthread_cond_destroy(&zp->cv);
	free(zp);
}

static int z_new(pg_pdw *w, int level)
{
	struct zpool *zp;

	if (ZSTD_compressBound(ZFEED) > ZREC_MAX - 8)	/* one record a piece */
		return -EINVAL;
	zp = calloc(1, sizeof(*zp));
	if (!zp)
		return -ENOMEM;
	zp->w = w;
	zp->level = level;
	pthread_mutex_init(&zp->mu, NULL);
	pthread_cond_init(&zp->cv, NULL);
	w->zp = zp;
	for (size_t i = 0; i < ZSLOTS; i++) {
		zp->slot[i].in = malloc(ZSTAGE);
		zp->slot[i].out = malloc(ZOUT_CAP);
		if (!zp->slot[i].in || !zp->slot[i].out)
			return -ENOMEM;
	}
	/* without threads, stages are compressed inline; the workers never
	 * take SIGINT/SIGTERM/SIGHUP (they inherit the blocked mask), so the
	 * cleanup handler runs in the caller's thread, once */
	sigset_t old;

	pg_block_fatal_signals(true, &old);
	while (zp->nworkers < ZWORKERS &&
	       pthread_create(&zp->th[zp->nworkers], NULL, z_worker, zp) == 0)
		zp->nworkers++;
	pg_block_fatal_signals(false, &old);
	return 0;
}

/* Data-section bytes: staged for compression when it is on. */
static int dout(pg_pdw *w, const void *p, uint64_t n)
{
	const uint8_t *s = p;

	if (!w->zp)
		return out(w, p, n);
	w->zraw += n;
	while (n) {
		struct zslot *sl = z_cur(w->zp);
		size_t k = ZSTAGE - sl->in_len;

		if (k > n)
			k = (size_t)n;
		memcpy(sl->in + sl->in_len, s, k);
		sl->in_len += k;
		s += k;
		n -= k;
		if (sl->in_len == ZSTAGE) {
			int err = z_handoff(w);

			if (err)
				return pg_err(w->diag, err, "%s: cannot compress or write: %s",
					      w->path, strerror(-err));
		}
	}
	return 0;
}

static void rec_hdr(struct pg_buf *b, uint32_t type, uint16_t misc, uint16_t size)
{
	pg_buf_u32(b, type);
	pg_buf_u16(b, misc);
	pg_buf_u16(b, size);
}

int pg_pdw_open(const char *path, const struct pg_pdw_opts *user_opts,
		struct pg_diag *diag, pg_pdw **outp)
{
	struct pg_pdw_opts o;
	const struct pg_pdw_opts *opts = &o;
	pg_pdw *w;
	struct pg_buf h = { 0 };
	int ret;

	*outp = NULL;
	if (pg_sized_opts(&o, sizeof(o), user_opts, false, "perf.data writer", diag) < 0)
		return -EINVAL;
	o.sz = sizeof(o);
	h.big_endian = opts->big_endian;
	w = calloc(1, sizeof(*w));
	if (!w || !(w->buf = malloc(OUT_BUF)) ||
	    !(w->path = strdup(strcmp(path, "-") ? path : "standard output"))) {
		if (w)
			free(w->buf);
		free(w);
		return pg_err(diag, -ENOMEM, "out of memory");
	}
	w->diag = diag;
	w->big_endian = opts->big_endian;
	w->attrs.big_endian = w->build_ids.big_endian = opts->big_endian;
	w->dirfd = -1;
	w->of.fd = -1;
	if (!strcmp(path, "-")) {
		w->fd = STDOUT_FILENO;
		w->is_stdout = true;
		w->pipe = true;
	} else {
		char *d = strdup(path), *b = strdup(path);

		if (!d || !b) {
			free(d);
			free(b);
			free(w->buf);
			free(w->path);
			free(w);
			return pg_err(diag, -ENOMEM, "out of memory");
		}
		w->dirfd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ret = w->dirfd < 0 ? pg_err(diag, -errno, "%s: %s", path, strerror(errno))
				   : pg_outfile_open_mode(&w->of, w->dirfd, basename(b), 0600, true, diag);
		/* what runs killed before their end left beside their outputs */
		if (!ret)
			pg_sweep_dead_temps(w->dirfd);
		free(d);
		free(b);
		if (ret) {
			if (w->dirfd >= 0)
				close(w->dirfd);
			free(w->buf);
			free(w->path);
			free(w);
			return ret;
		}
		w->fd = w->of.fd;
		w->pipe = opts->pipe;
		/* The file form rewrites its header at the end. */
		if (!w->pipe && w->of.direct && lseek(w->fd, 0, SEEK_CUR) < 0) {
			ret = pg_err(diag, -ESPIPE, "%s: cannot seek in this output: "
				     "use the pipe form (--pipe)", path);
			pg_pdw_abort(w);
			return ret;
		}
	}
	if (opts->compress_level != 0 && !w->pipe) {
		if (z_new(w, opts->compress_level) < 0) {
			ret = pg_err(diag, -ENOMEM, "zstd: cannot set up compression");
			pg_pdw_abort(w);
			return ret;
		}
	}
	pg_buf_add(&h, opts->big_endian ? "2ELIFREP" : "PERFILE2", 8);
	pg_buf_u64(&h, w->pipe ? 16 : FILE_HDR);
	if (!w->pipe)
		while (h.len < FILE_HDR)
			pg_buf_u8(&h, 0);	/* written for real at close */
	ret = out_buf(w, &h);
	pg_buf_free(&h);
	w->data_off = w->pos;
	*outp = w;
	return ret;
}

int pg_pdw_add_attr(pg_pdw *w, const uint8_t *raw, uint32_t raw_size,
		    const uint64_t *ids, size_t nr_ids)
{
	if (w->data_started)
		return pg_err(w->diag, -EINVAL, "attrs must come before the first record");
	if (w->pipe) {
		struct pg_buf b = { .big_endian = w->big_endian };
		size_t size = 8 + raw_size + 8 * nr_ids;
		int ret;

		if (size > UINT16_MAX)
			return pg_err(w->diag, -EINVAL, "HEADER_ATTR too large (%zu ids)", nr_ids);
		rec_hdr(&b, PG_PERF_RECORD_HEADER_ATTR, 0, (uint16_t)size);
		pg_buf_add(&b, raw, raw_size);
		for (size_t i = 0; i < nr_ids; i++)
			pg_buf_u64(&b, ids[i]);
		ret = out_buf(w, &b);
		pg_buf_free(&b);
		return ret;
	}
	if (!pg_grow((void **)&w->alist, &w->acap, w->nattrs + 1, sizeof(*w->alist)))
		return pg_err(w->diag, -ENOMEM, "out of memory");
	w->alist[w->nattrs].off = w->attrs.len;
	w->alist[w->nattrs].raw_size = raw_size;
	w->alist[w->nattrs].nids = nr_ids;
	w->nattrs++;
	pg_buf_add(&w->attrs, raw, raw_size);
	for (size_t i = 0; i < nr_ids; i++)
		pg_buf_u64(&w->attrs, ids[i]);
	return w->attrs.oom ? pg_err(w->diag, -ENOMEM, "out of memory") : 0;
}

/* Features perf accepts as HEADER_FEATURE records in a pipe. */
static bool pipe_feature(unsigned bit)
{
	switch (bit) {
	case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 10:
	case 11: case 12: case 13: case 14: case 16: case 17: case 21: case 22:
	case 23: case 25: case 26: case 28: case 29: case 31:
		return true;
	default:
		return false;
	}
}

int pg_pdw_add_feature(pg_pdw *w, unsigned bit, const void *body, uint64_t size)
{
	if (bit >= 256)
		return pg_err(w->diag, -EINVAL, "feature bit %u out of range", bit);
	if (w->pipe) {
		struct pg_buf b = { .big_endian = w->big_endian };
		int ret = 0;

		if (bit == PG_FEAT_TRACING_DATA) {
			uint64_t padded = pg_align(size, 8);
			static const uint8_t zero[8];

			if (padded > UINT32_MAX)
				return pg_err(w->diag, -EINVAL, "tracing data too large");
			rec_hdr(&b, PG_PERF_RECORD_HEADER_TRACING_DATA, 0, 16);
			pg_buf_u32(&b, (uint32_t)padded);
			pg_buf_u32(&b, 0);
			ret = out_buf(w, &b);
			if (!ret)
				ret = out(w, body, size);
			if (!ret)
				ret = out(w, zero, padded - size);
		} else if (bit == PG_FEAT_BUILD_ID) {
			/* back-to-back build_id events, sent one by one */
			const uint8_t *p = body, *end = p + size;

			while (!ret && end - p >= 8) {
				uint16_t sz = w->big_endian ? (uint16_t)(p[6] << 8 | p[7])
							    : (uint16_t)(p[7] << 8 | p[6]);

				if (sz < 8 || sz > end - p)
					break;
				b.len = 0;
				pg_buf_add(&b, p, sz);
				pg_buf_put32(&b, 0, PG_PERF_RECORD_HEADER_BUILD_ID);
				ret = out_buf(w, &b);
				p += sz;
			}
		} else if (pipe_feature(bit) && size + 16 <= UINT16_MAX) {
			rec_hdr(&b, PG_PERF_RECORD_HEADER_FEATURE, 0, (uint16_t)(size + 16));
			pg_buf_u64(&b, bit);
			pg_buf_add(&b, body, (size_t)size);
			ret = out_buf(w, &b);
		}
		pg_buf_free(&b);
		return ret;
	}
	if (!pg_grow((void **)&w->feats, &w->fcap, w->nfeats + 1, sizeof(*w->feats)))
		return pg_err(w->diag, -ENOMEM, "out of memory");
	w->feats[w->nfeats].bit = bit;
	w->feats[w->nfeats].size = size;
	w->feats[w->nfeats].body = malloc(size ? (size_t)size : 1);
	if (!w->feats[w->nfeats].body)
		return pg_err(w->diag, -ENOMEM, "out of memory");
	memcpy(w->feats[w->nfeats].body, body, (size_t)size);
	w->nfeats++;
	return 0;
}

int pg_pdw_write(pg_pdw *w, const void *rec, size_t size, const void *extra,
		 uint64_t extra_size)
{
	int ret;

	w->data_started = true;
	ret = dout(w, rec, size);
	if (!ret && extra_size)
		ret = dout(w, extra, extra_size);
	return ret;
}

/* A build-id entry's size, or 0 (an error said) when it does not fit. */
static size_t bid_size(pg_pdw *w, unsigned id_size, const char *filename)
{
	size_t size = 36 + pg_align(strlen(filename) + 1, NAME_ALIGN);

	if (size > UINT16_MAX || id_size > 20) {
		pg_err(w->diag, -EINVAL, "build-id entry for '%s' too large", filename);
		return 0;
	}
	return size;
}

/* A build-id entry into b (bid_size() checked it). */
static void bid_encode(pg_pdw *w, struct pg_buf *b, int32_t pid, uint16_t misc,
		       const uint8_t *id, unsigned id_size, const char *filename)
{
	size_t nlen = pg_align(strlen(filename) + 1, NAME_ALIGN);
	size_t size = 36 + nlen;
	uint8_t idbuf[20] = { 0 };

	memcpy(idbuf, id, id_size);
	rec_hdr(b, w->pipe ? PG_PERF_RECORD_HEADER_BUILD_ID : 0, misc | BUILD_ID_MISC_SIZE,
		(uint16_t)size);
	pg_buf_u32(b, (uint32_t)pid);
	pg_buf_add(b, idbuf, 20);
	pg_buf_u8(b, (uint8_t)id_size);
	pg_buf_u8(b, 0);
	pg_buf_u16(b, 0);
	if (pg_buf_reserve(b, nlen)) {
		memset(b->p + b->len, 0, nlen);
		strcpy((char *)b->p + b->len, filename);
		b->len += nlen;
	}
}

int pg_pdw_build_id(pg_pdw *w, int32_t pid, uint16_t misc, const uint8_t *id,
		    unsigned id_size, const char *filename)
{
	struct pg_buf tmp = { .big_endian = w->big_endian };
	struct pg_buf *b = w->pipe ? &tmp : &w->build_ids;
	int ret = 0;

	if (!bid_size(w, id_size, filename))
		return -EINVAL;
	bid_encode(w, b, pid, misc, id, id_size, filename);
	if (b->oom)
		ret = pg_err(w->diag, -ENOMEM, "out of memory");
	else if (w->pipe)
		ret = out_buf(w, b);
	pg_buf_free(&tmp);
	return ret;
}

bool pg_pdw_build_ids_later(pg_pdw *w, pg_pdw_build_id_fn fn, void *ctx)
{
	if (w->pipe)
		return false;
	w->later = fn;
	w->later_ctx = ctx;
	return true;
}

/* The bytes of the entries w->later makes, in *size; 0 or an error. */
static int later_size(pg_pdw *w, uint64_t *size)
{
	struct pg_pdw_build_id_ent e;
	int r = 0;

	*size = 0;
	for (size_t i = 0; w->later && (r = w->later(w->later_ctx, i, &e)) > 0; i++) {
		size_t n = bid_size(w, e.id_size, e.filename);

		if (!n)
			return -EINVAL;
		*size += n;
	}
	return r < 0 ? pg_err(w->diag, r, "out of memory") : 0;
}

/* The entries w->later makes, written out one by one: not all held. */
static int later_out(pg_pdw *w)
{
	struct pg_buf b = { .big_endian = w->big_endian };
	struct pg_pdw_build_id_ent e;
	int r = 0, ret = 0;

	for (size_t i = 0; !ret && w->later && (r = w->later(w->later_ctx, i, &e)) > 0; i++) {
		b.len = 0;
		bid_encode(w, &b, e.pid, e.misc, e.id, e.id_size, e.filename);
		ret = out_buf(w, &b);
	}
	pg_buf_free(&b);
	if (!ret && r < 0)
		ret = pg_err(w->diag, r, "out of memory");
	return ret;
}

int pg_pdw_mmap2(pg_pdw *w, const struct pg_pd_attr *a, const struct pg_pdw_mmap2 *m)
{
	size_t nlen = pg_align(strlen(m->filename) + 1, 8);
	uint64_t st = a && a->sample_id_all ? a->sample_type : 0;
	const struct pg_synth_sample sid = { .pid = m->pid, .tid = m->tid, .time = m->time,
					     .id = m->id, .cpu = m->cpu };
	size_t size = 72 + nlen + pg_synth_sample_id_size(st);
	struct pg_rec r = { .cap = size, .big_endian = w->big_endian };
	int ret;

	if (size > PG_REC_MAX)
		return pg_err(w->diag, -EINVAL, "file name too long for an MMAP2 record: %s", m->filename);
	if (!(r.p = malloc(size)))
		return pg_err(w->diag, -ENOMEM, "out of memory");
	pg_synth_mmap2(&r, m, st, &sid);
	w->data_started = true;
	ret = pg_rec_end(&r) < 0 ? pg_err(w->diag, -EINVAL, "internal: MMAP2 of %zu bytes", r.len)
				 : dout(w, r.p, r.len);
	free(r.p);
	return ret;
}

/* ---- for the converters (perfdata/writer.h): synth.h's pieces written */

int pg_pdw_add_attrs(pg_pdw *w, const struct pg_synth_attr *a, size_t n)
{
	uint8_t raw[PG_SYNTH_ATTR_SIZE];
	int ret = 0;

	for (size_t i = 0; !ret && i < n; i++) {
		pg_synth_attr_raw(raw, w->big_endian, &a[i]);
		ret = pg_pdw_add_attr(w, raw, PG_SYNTH_ATTR_SIZE, a[i].ids, a[i].nr_ids);
	}
	return ret;
}

/* Adds the feature b holds and frees b. */
static int add_feature_buf(pg_pdw *w, unsigned bit, struct pg_buf *b)
{
	int ret = b->oom ? pg_err(w->diag, -ENOMEM, "out of memory")
			 : pg_pdw_add_feature(w, bit, b->p, b->len);

	pg_buf_free(b);
	return ret;
}

int pg_pdw_add_event_desc(pg_pdw *w, const struct pg_synth_attr *a, size_t n)
{
	struct pg_buf b = { .big_endian = w->big_endian };

	pg_synth_event_desc(&b, a, n);
	return add_feature_buf(w, PG_FEAT_EVENT_DESC, &b);
}

int pg_pdw_add_str_feature(pg_pdw *w, unsigned bit, const char *str)
{
	struct pg_buf b = { .big_endian = w->big_endian };

	pg_synth_str(&b, str);
	return add_feature_buf(w, bit, &b);
}

int pg_pdw_round(struct pg_pdw_rounds *rs)
{
	uint8_t buf[8];
	struct pg_rec r = { .p = buf, .cap = sizeof(buf), .big_endian = rs->w->big_endian };

	rs->since = 0;
	pg_synth_round(&r);
	pg_rec_end(&r);
	return pg_pdw_write(rs->w, r.p, r.len, NULL, 0);
}

static void free_w(pg_pdw *w)
{
	for (size_t i = 0; i < w->nfeats; i++)
		free(w->feats[i].body);
	free(w->feats);
	free(w->alist);
	pg_buf_free(&w->attrs);
	pg_buf_free(&w->build_ids);
	free(w->buf);
	z_free(w->zp);
	if (w->dirfd >= 0)
		close(w->dirfd);
	free(w->path);
	free(w);
}

static int cmp_feat(const void *a, const void *b)
{
	const struct feat *x = a, *y = b;

	return (x->bit > y->bit) - (x->bit < y->bit);
}

/* File mode: feature table and bodies after the data, then ids and attrs,
 * then the header. */
static int finish_file(pg_pdw *w)
{
	struct pg_buf h = { .big_endian = w->big_endian };
	uint64_t data_size = w->pos - w->data_off, bitmap[4] = { 0 };
	uint64_t body_off, attrs_off, attr_entry = 0, bid_later;
	struct pg_buf t = { .big_endian = w->big_endian };
	int ret;

	if (w->zp) {	/* the data ends with the last compressed stage */
		struct pg_buf c = { .big_endian = w->big_endian };

		if ((ret = z_finish(w)))
			return ret;
		data_size = w->pos - w->data_off;
		pg_buf_u32(&c, 1);		/* version */
		pg_buf_u32(&c, 1);		/* zstd */
		pg_buf_u32(&c, (uint32_t)w->zp->level);
		pg_buf_u32(&c, (uint32_t)(w->zout ? (w->zraw + w->zout / 2) / w->zout : 0));
		pg_buf_u32(&c, ZMMAP_LEN);
		ret = c.oom ? pg_err(w->diag, -ENOMEM, "out of memory")
			    : pg_pdw_add_feature(w, PG_FEAT_COMPRESSED, c.p, c.len);
		pg_buf_free(&c);
		if (ret)
			return ret;
	}
	/* the entries follow the BUILD_ID feature's body as they are, not
	 * copied into it: a copy was one more of every image's path */
	if ((ret = later_size(w, &bid_later)))
		return ret;
	if (w->build_ids.len || bid_later) {
		bool have = false;

		for (size_t i = 0; i < w->nfeats; i++)
			have |= w->feats[i].bit == PG_FEAT_BUILD_ID;
		if (!have && (ret = pg_pdw_add_feature(w, PG_FEAT_BUILD_ID, "", 0)))
			return ret;
	}
	if (w->nfeats)
		qsort(w->feats, w->nfeats, sizeof(*w->feats), cmp_feat);
	/* feature table right after the data: perf looks for it there */
	body_off = w->pos + 16 * w->nfeats;
	for (size_t i = 0; i < w->nfeats; i++) {
		if (i && w->feats[i].bit == w->feats[i - 1].bit)
			return pg_err(w->diag, -EINVAL, "feature %u given twice", w->feats[i].bit);
		bitmap[w->feats[i].bit / 64] |= 1ull << (w->feats[i].bit % 64);
		uint64_t size = w->feats[i].size +
				(w->feats[i].bit == PG_FEAT_BUILD_ID ? w->build_ids.len + bid_later
								      : 0);

		pg_buf_u64(&t, body_off);
		pg_buf_u64(&t, size);
		body_off += size;
	}
	ret = out_buf(w, &t);
	for (size_t i = 0; !ret && i < w->nfeats; i++) {
		ret = out(w, w->feats[i].body, w->feats[i].size);
		if (!ret && w->feats[i].bit == PG_FEAT_BUILD_ID && w->build_ids.len)
			ret = out(w, w->build_ids.p, w->build_ids.len);
		if (!ret && w->feats[i].bit == PG_FEAT_BUILD_ID && bid_later)
			ret = later_out(w);
	}
	pg_buf_free(&t);
	if (ret)
		return ret;

	/* ids arrays, then the attr entries pointing at them */
	{
		struct pg_buf ids = { .big_endian = w->big_endian };
		struct pg_buf ents = { .big_endian = w->big_endian };
		uint64_t ids_off = w->pos;

		for (size_t i = 0; i < w->nattrs; i++) {
			const uint8_t *p = w->attrs.p + w->alist[i].off + w->alist[i].raw_size;

			pg_buf_add(&ids, p, 8 * w->alist[i].nids);
		}
		attrs_off = ids_off + ids.len;
		for (size_t i = 0, o = 0; i < w->nattrs; i++) {
			uint64_t rs = w->alist[i].raw_size;

			if (attr_entry && attr_entry != rs + 16) {
				pg_buf_free(&ids);
				pg_buf_free(&ents);
				return pg_err(w->diag, -EINVAL, "attrs of different sizes in one file");
			}
			attr_entry = rs + 16;
			pg_buf_add(&ents, w->attrs.p + w->alist[i].off, rs);
			pg_buf_u64(&ents, ids_off + o);
			pg_buf_u64(&ents, 8 * w->alist[i].nids);
			o += 8 * w->alist[i].nids;
		}
		ret = out_buf(w, &ids);
		if (!ret)
			ret = out_buf(w, &ents);
		h.big_endian = w->big_endian;
		pg_buf_add(&h, w->big_endian ? "2ELIFREP" : "PERFILE2", 8);
		pg_buf_u64(&h, FILE_HDR);
		pg_buf_u64(&h, attr_entry);
		pg_buf_u64(&h, attrs_off);
		pg_buf_u64(&h, ents.len);
		pg_buf_u64(&h, w->data_off);
		pg_buf_u64(&h, data_size);
		pg_buf_u64(&h, 0);
		pg_buf_u64(&h, 0);
		for (int i = 0; i < 4; i++)
			pg_buf_u64(&h, bitmap[i]);
		pg_buf_free(&ids);
		pg_buf_free(&ents);
	}
	if (!ret)
		ret = flush(w);
	if (!ret && !h.oom && pwrite(w->fd, h.p, h.len, 0) != (ssize_t)h.len)
		ret = pg_err(w->diag, errno ? -errno : -EIO, "%s: cannot write the header: %s", w->path,
			     strerror(errno ? errno : EIO));
	pg_buf_free(&h);
	return ret;
}

int pg_pdw_flush(pg_pdw *w)
{
	struct zpool *zp = w->zp;
	int ret;

	if (!zp)
		return w->err ? w->err : w->blen ? flush(w) : 0;
	/* the workers write compressed stages into the same buffer: be the
	 * one writer meanwhile, then write what became ready */
	pthread_mutex_lock(&zp->mu);
	while (zp->writing)
		pthread_cond_wait(&zp->cv, &zp->mu);
	zp->writing = true;
	pthread_mutex_unlock(&zp->mu);
	ret = w->err ? w->err : w->blen ? flush(w) : 0;
	pthread_mutex_lock(&zp->mu);
	zp->writing = false;
	z_write_ready(zp);
	pthread_cond_broadcast(&zp->cv);
	pthread_mutex_unlock(&zp->mu);
	return ret;
}

int pg_pdw_finish(pg_pdw *w)
{
	int ret = w->err;

	if (w->finished)
		return ret;
	if (!ret && !w->pipe)
		ret = finish_file(w);
	if (!ret)
		ret = flush(w);
	/* a file's last bytes can fail at close (NFS, quota) */
	if (!ret && !w->is_stdout)
		ret = pg_outfile_finish(&w->of, w->diag);
	w->finished = true;
	if (ret)
		w->err = ret;
	return ret;
}

int pg_pdw_close(pg_pdw *w)
{
	int ret = pg_pdw_finish(w);

	if (w->is_stdout) {
		/* written already: the reader at least learns of a changed input */
		if (!ret)
			ret = pg_inputs_check(w->diag);
		free_w(w);
		return ret;
	}
	if (ret) {
		pg_outfile_abort(&w->of);
		free_w(w);
		return ret;
	}
	ret = pg_outfile_commit(&w->of, w->diag);
	free_w(w);
	return ret;
}

void pg_pdw_abort(pg_pdw *w)
{
	if (!w)
		return;
	if (!w->is_stdout)
		pg_outfile_abort(&w->of);
	free_w(w);
}

uint64_t pg_pdw_bytes(const pg_pdw *w)
{
	uint64_t pos;

	if (!w->zp)
		return w->pos;
	/* the compression workers advance it */
	pthread_mutex_lock(&w->zp->mu);
	pos = w->pos;
	pthread_mutex_unlock(&w->zp->mu);
	return pos;
}
