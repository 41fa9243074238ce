/* SPDX-License-Identifier: MIT */
/* Build-id digests computed on a worker thread (util.h, pg_ahash): the image
 * builder hashes every code byte it writes (the build-id), a tenth of a
 * large inject's time, and the other core is otherwise idle; the same
 * thread also writes the finished images (pg_ahash_run), in queue order.  The caller
 * queues updates in order, each for one context; the worker applies them
 * in that order, so every digest is the one pg_digest_update() calls in the
 * same order would give.  Bytes the caller keeps until pg_ahash_wait()
 * (code, tables) are borrowed; the rest is copied into an arena that is
 * emptied whenever the queue is. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "util/util.h"

#define RING (1u << 16)	/* updates queued at most: an image's, behind the write of the one before it */
#define STAGE 128		/* updates handed over at once */
/* an idle worker is woken once this many updates wait (or by a wait or a
 * job): woken at every stage, it slept again at once, two context
 * switches for 128 small updates */
#define WAKE_AT (16 * STAGE)
#define CHUNK (1u << 20)	/* arena chunk */
#define ARENA_MAX (8u << 20)	/* copied bytes queued before the caller waits */

struct upd {
	struct pg_digest *ctx;	/* NULL: not digested (a write only) */
	const uint8_t *p;
	size_t len;
	void (*fn)(void *);	/* a job instead (pg_ahash_run), its argument p */
	struct pg_ahash_sink *sink;	/* and written there, at off */
	uint64_t off;
	uint8_t *out;	/* p's own digest goes here instead (pg_ahash_digest_into) */
};

struct chunk {
	struct chunk *next;
	size_t used, cap;
	uint8_t b[];
};

struct pg_ahash {
	pthread_t th;
	bool threaded;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct upd ring[RING];
	size_t head, tail;	/* [head, tail): queued, by the lock */
	bool busy;		/* the worker holds updates it took (unlocked) */
	bool quit;
	struct upd stage[STAGE];	/* the caller's, not yet handed over */
	size_t nstage;
	struct chunk *arena;	/* the caller's: copies of queued bytes */
	size_t arena_bytes;
};

/* The build-id digest: XXH3's 128-bit hash, which reads at memory speed
 * (SHA-1 was a tenth of a large inject's CPU), then 4 bytes of XXH3-64
 * over those 16 to fill the 20 bytes perf and GNU tools expect. */
struct pg_digest {
	XXH3_state_t *st;
};

struct pg_digest *pg_digest_new(void)
{
	struct pg_digest *d = malloc(sizeof(*d));

	if (!d)
		return NULL;
	d->st = XXH3_createState();
	if (!d->st || XXH3_128bits_reset(d->st) == XXH_ERROR) {
		XXH3_freeState(d->st);
		free(d);
		return NULL;
	}
	return d;
}

void pg_digest_update(struct pg_digest *d, const void *p, size_t len)
{
	(void)XXH3_128bits_update(d->st, p, len);	/* fails only on a NULL state */
}

void pg_digest_final(struct pg_digest *d, uint8_t out[PG_DIGEST_SIZE])
{
	XXH128_canonical_t c;
	XXH64_canonical_t tail;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(d->st));
	XXH64_canonicalFromHash(&tail, XXH3_64bits(c.digest, sizeof(c.digest)));
	memcpy(out, c.digest, sizeof(c.digest));
	memcpy(out + sizeof(c.digest), tail.digest, PG_DIGEST_SIZE - sizeof(c.digest));
}

void pg_digest_once(const void *p, size_t len, uint8_t out[PG_PIECE_DIGEST])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(p, len));
	memcpy(out, c.digest, PG_PIECE_DIGEST);
}

void pg_digest_free(struct pg_digest *d)
{
	if (!d)
		return;
	XXH3_freeState(d->st);
	free(d);
}

/* Writes p at off into the sink's file, unless an earlier write failed. */
static void sink_write(struct pg_ahash_sink *s, const uint8_t *p, size_t len, uint64_t off)
{
	if (!s->err && pg_gather_add(&s->g, p, len, off) < 0)
		s->err = errno ? errno : EIO;
}

static void apply(const struct upd *u)
{
	if (u->out)
		pg_digest_once(u->p, u->len, u->out);
	if (u->ctx)
		pg_digest_update(u->ctx, u->p, u->len);
	/* right after the digest read them: the bytes are in the cache */
	if (u->sink)
		sink_write(u->sink, u->p, u->len, u->off);
	/* the dump's pages are read here, not where the update was queued:
	 * this thread counts them towards the next trim (pg_inputs_touched) */
	pg_inputs_touched(u->len);
}

static void *worker(void *arg)
{
	struct pg_ahash *h = arg;

	pthread_mutex_lock(&h->mu);
	for (;;) {
		size_t head = h->head, tail = h->tail;

		if (head == tail) {
			if (h->quit)
				break;
			pthread_cond_wait(&h->work, &h->mu);
			continue;
		}
		/* the caller writes only free slots: [head, tail) are ours
		 * until head moves */
		h->busy = true;
		pthread_mutex_unlock(&h->mu);
		for (size_t i = head; i != tail; i++) {
			const struct upd *u = &h->ring[i % RING];

			if (u->fn) {
				u->fn((void *)u->p);
			} else {
				apply(u);
			}
		}
		pthread_mutex_lock(&h->mu);
		h->busy = false;
		h->head = tail;
		pthread_cond_broadcast(&h->done);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

struct pg_ahash *pg_ahash_new(void)
{
	struct pg_ahash *h = calloc(1, sizeof(*h));
	sigset_t old;

	if (!h)
		return NULL;
	/* one core: a thread would only add switches */
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return h;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->work, NULL);
	pthread_cond_init(&h->done, NULL);
	/* the worker never takes SIGINT/SIGTERM/SIGHUP: the cleanup handler
	 * runs in the caller's thread (as perfdata/writer.c's workers) */
	pg_block_fatal_signals(true, &old);
	h->threaded = pthread_create(&h->th, NULL, worker, h) == 0;
	pg_block_fatal_signals(false, &old);
	if (!h->threaded) {
		pthread_mutex_destroy(&h->mu);
		pthread_cond_destroy(&h->work);
		pthread_cond_destroy(&h->done);
	}
	return h;
}

/* Hands the staged updates over, waiting for room; wake: the worker is
 * to start on them now. */
static void hand_over(struct pg_ahash *h, bool wake)
{
	if (!h->nstage)
		return;
	pthread_mutex_lock(&h->mu);
	while (RING - (h->tail - h->head) < h->nstage) {
		pthread_cond_signal(&h->work);
		pthread_cond_wait(&h->done, &h->mu);
	}
	for (size_t i = 0; i < h->nstage; i++)
		h->ring[(h->tail + i) % RING] = h->stage[i];
	h->tail += h->nstage;
	h->nstage = 0;
	/* a busy worker takes them when done with its own; below WAKE_AT
	 * the ring has room for the next stages without waking it */
	if (wake || h->tail - h->head >= WAKE_AT)
		pthread_cond_signal(&h->work);
	pthread_mutex_unlock(&h->mu);
}

static void arena_free(struct pg_ahash *h)
{
	while (h->arena) {
		struct chunk *c = h->arena;

		h->arena = c->next;
		free(c);
	}
	h->arena_bytes = 0;
}

/* Hands what is staged over and waits until the worker is idle, or
 * (flag) until *flag is not 0. */
static void wait_until(struct pg_ahash *h, atomic_int *flag)
{
	hand_over(h, true);
	pthread_mutex_lock(&h->mu);
	if (h->head != h->tail)	/* queued earlier without waking it */
		pthread_cond_signal(&h->work);
	while (!(flag && atomic_load(flag)) && (h->head != h->tail || h->busy))
		pthread_cond_wait(&h->done, &h->mu);
	pthread_mutex_unlock(&h->mu);
}

void pg_ahash_wait(struct pg_ahash *h)
{
	if (!h || !h->threaded)
		return;
	wait_until(h, NULL);
	arena_free(h);
}

void pg_ahash_wait_flag(struct pg_ahash *h, atomic_int *flag)
{
	if (h && h->threaded)
		wait_until(h, flag);
}

void pg_ahash_notify(struct pg_ahash *h)
{
	if (!h || !h->threaded)
		return;
	/* under the lock: a waiter between its test and its wait gets it */
	pthread_mutex_lock(&h->mu);
	pthread_cond_broadcast(&h->done);
	pthread_mutex_unlock(&h->mu);
}

void pg_ahash_update(struct pg_ahash *h, struct pg_digest *ctx, const void *p, size_t len)
{
	pg_ahash_update_write(h, ctx, p, len, NULL, 0);
}

/* u staged for the worker, or applied at once without one */
static void queue(struct pg_ahash *h, const struct upd *u)
{
	if (!h || !h->threaded) {
		apply(u);
		return;
	}
	if (h->nstage == STAGE)
		hand_over(h, false);
	h->stage[h->nstage++] = *u;
}

void pg_ahash_update_write(struct pg_ahash *h, struct pg_digest *ctx, const void *p, size_t len,
			   struct pg_ahash_sink *sink, uint64_t off)
{
	if (len)
		queue(h, &(struct upd){ ctx, p, len, NULL, sink, off, NULL });
}

void pg_ahash_digest_into(struct pg_ahash *h, const void *p, size_t len,
			  uint8_t out[PG_PIECE_DIGEST])
{
	queue(h, &(struct upd){ NULL, p, len, NULL, NULL, 0, out });
}

int pg_ahash_sink_flush(struct pg_ahash_sink *s)
{
	if (!s->err && pg_gather_flush(&s->g) < 0)
		s->err = errno ? errno : EIO;
	return s->err ? -s->err : 0;
}

void pg_ahash_run(struct pg_ahash *h, void (*fn)(void *), void *arg)
{
	if (!h || !h->threaded) {
		fn(arg);
		return;
	}
	if (h->nstage == STAGE)
		hand_over(h, false);
	h->stage[h->nstage++] = (struct upd){ NULL, arg, 0, fn, NULL, 0, NULL };
	hand_over(h, true);	/* at once: the caller goes on with other work */
}

void pg_ahash_update_copy(struct pg_ahash *h, struct pg_digest *ctx, const void *a, size_t alen,
			  const void *b, size_t blen)
{
	size_t len = alen + blen;
	struct chunk *c;

	if (!h || !h->threaded || !len) {
		pg_ahash_update(h, ctx, a, alen);
		pg_ahash_update(h, ctx, b, blen);
		return;
	}
	/* bounded: past ARENA_MAX the queue is drained and the arena emptied */
	if (h->arena_bytes + len > ARENA_MAX && h->arena_bytes)
		pg_ahash_wait(h);
	c = h->arena;
	if (!c || c->cap - c->used < len) {
		size_t cap = len > CHUNK ? len : CHUNK;

		c = malloc(sizeof(*c) + cap);
		if (!c) {
			/* no copy: hash it here, after what is queued */
			pg_ahash_wait(h);
			pg_digest_update(ctx, a, alen);
			pg_digest_update(ctx, b, blen);
			return;
		}
		c->next = h->arena;
		c->used = 0;
		c->cap = cap;
		h->arena = c;
	}
	/* one update for both: a digest reads a stream, cut anywhere */
	if (alen)
		memcpy(c->b + c->used, a, alen);
	if (blen)
		memcpy(c->b + c->used + alen, b, blen);
	pg_ahash_update(h, ctx, c->b + c->used, len);
	c->used += len;
	h->arena_bytes += len;
}

void pg_ahash_free(struct pg_ahash *h)
{
	if (!h)
		return;
	if (h->threaded) {
		pg_ahash_wait(h);
		pthread_mutex_lock(&h->mu);
		h->quit = true;
		pthread_cond_signal(&h->work);
		pthread_mutex_unlock(&h->mu);
		pthread_join(h->th, NULL);
		pthread_mutex_destroy(&h->mu);
		pthread_cond_destroy(&h->work);
		pthread_cond_destroy(&h->done);
	}
	arena_free(h);
	free(h);
}
