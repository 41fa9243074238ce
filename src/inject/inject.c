/* SPDX-License-Identifier: MIT */
/* perfgraft inject.  Reads the input once (file mode: twice, the first
 * walk only finds the dumps), reads each jitdump once, writes its images,
 * and merges one MMAP2 per LOAD/MOVE into the record stream in time
 * order: an injected record of time t goes right before the first input
 * record later than t, so FINISHED_ROUND keeps its meaning. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <perfgraft/elfimage.h>
#include <perfgraft/inject.h>
#include <perfgraft/perfdata.h>
#include "inject/bidcache.h"
#include "inject/discover.h"
#include "inject/livehook.h"
#include "inject/sample.h"
#include "util/util.h"

#define CLOCK_MONOTONIC_ID 1
#define PROT_RX 5
#define MAP_PRIVATE_FLAG 2
#define HOST_PID (-1)

struct event {			/* an MMAP2 to inject: a set's map (its time the key's) */
	uint32_t set, map;	/* index into inj->sets, into its maps */
};

/* An unwind-tables map of a live dump's read, and a time it is written
 * at (its own, or an anonymous map's: rehide_anons, which then writes
 * the later reads' maps under that map itself), in inj->tabs. */
struct tab {
	struct event ev;
	uint64_t time;
	uint64_t astart, alen;	/* the anonymous map's; alen 0: its own time */
};

struct pidinfo {
	uint32_t pid;
	uint64_t first_load;	/* anon maps of pid after this are dropped */
	/* where maps start before their LOAD (cancel_early) */
	uint64_t early_lo, early_hi;
	unsigned early_checks;
	/* executable anonymous maps written before first_load was known
	 * (a pipe's records from several CPUs: one may come before the
	 * dump's marker); a later set's maps under one are written again
	 * after it, as if it had been dropped (rehide_anons) */
	struct { uint64_t start, len, time; } anons[8];
	unsigned nanons;
	unsigned dumps;		/* dumps injected for it (image prefixes) */
	bool by_hand;		/* a --jitdump dump: its markers are ignored */
	const char *hand_path;	/* the first --jitdump of the pid */
};

struct inj {
	const struct pg_inject_opts *o;
	struct pg_diag *diag;
	struct pg_inject_stats *st;
	pg_perfdata *pd;
	pg_pdw *w;
	char *image_dir;
	bool cfi_compat;
	bool monotonic;		/* every attr uses CLOCK_MONOTONIC */
	bool user_stacks;	/* some attr samples user stacks (DWARF call graphs) */
	bool attrs_checked;
	bool explicit_done;
	struct hkey *heap;	/* the queue (below) */
	size_t nheap, heap_cap;
	struct hkey *run;	/* a set's MMAP2s in order, popped beside the heap */
	size_t run_at, run_n, run_cap;
	bool staged_run;	/* queue_maps() staged into the run, not the heap */
	uint64_t seq;
	struct event *evs;	/* by slot */
	size_t nslots, evs_cap;
	uint32_t *freeslots;
	size_t nfree, free_cap;
	/* live reads' unwind-tables maps, once for each time they are
	 * written (tables_written), for later reads' tables_under_code() */
	struct tab *tabs;
	size_t ntabs, tabs_cap;
	/* the images written: each set's own (pg_elfset_image), their
	 * absolute paths made in path when needed (nothing kept by image: a
	 * per-function dump has one per function) */
	size_t nimgs;
	char *path;
	size_t path_cap;
	/* file mode: the build-id entries made at the output's end
	 * (build_id_ent), from the images of the sets; their cursor */
	bool bid_later;
	size_t bid_set, bid_img;
	struct pidinfo *pids;
	size_t npids, pids_cap;
	struct pg_strmap seen;	/* dumps read (or tried), by file (seen_before); owns its keys */
	struct pg_jd_cache *jdc;	/* what each recorded file name is */
	uint64_t mmap_id;	/* id stamped on injected records */
	char *abs_dir;		/* realpath of image_dir */
	bool pipe_out;		/* images are committed as each dump is read */
	pg_elfset **sets;	/* every dump's images, until the output commits */
	struct setinfo *setinfo;	/* by set */
	size_t nsets, sets_cap, setinfo_cap;
	size_t ncommitted;	/* sets[0, ncommitted) have their names */
	struct pg_elfset_budget *budget;	/* the run's bound on sparse images */
	/* the pids the recording has (samples, COMM, MMAP...), for the
	 * --jitdump of a pid it has not; the first few for the message */
	struct pg_u64map recorded;
	uint32_t recorded_first[6];
	size_t nrecorded_first;
	int64_t last_recorded;
	/* the dumps' sets and sources keep a pg_diag as long as they live:
	 * this one, which outlives them */
	struct pg_diag dd;
	/* DWARF call graphs, file mode: dumps read before the prescan has
	 * seen the samples; their stacks are noted, then the images written */
	bool defer;
	struct deferred *later;
	size_t nlater, later_cap;
	/* the last dump's set, whose images its worker thread may still be
	 * writing while the records go on (background_writes), and the
	 * source they read, open until settle() */
	pg_elfset *unsettled;
	pg_code_source *unsettled_src;
	uint64_t *words;	/* one sample's, for note_sample */
	size_t words_cap;
	/* pipe-mode input: dumps followed as they grow (struct live), and
	 * the records held back until those dumps are read past them */
	bool live_in;
	struct live *lives;
	size_t nlives, lives_cap;
	struct held *hq;	/* a ring: hq_n records from hq_head */
	size_t hq_head, hq_n, hq_cap;
	uint64_t held_bytes, live_hold, live_wait_ns;
	bool hold_warned;
	/* progress (opts.progress_bytes): perf.data bytes read, bytes of
	 * the dumps read whole (or as far as a live one grew), and of the
	 * dumps opened */
	uint64_t prog_in, prog_dumps, prog_dumps_total;
	/* why the first dump left out was left out: the run's error when
	 * no dump at all is injected (pg_inject() fails then) */
	char first_failed[PG_ERRMSG_MAX];
};

/* A dump read while its JIT still writes it (pipe-mode input).  Each
 * read takes the records complete by then that earlier reads did not:
 * their images are a set of their own (PREFIX, then PREFIX-partN), so
 * they precede the samples that need them.  Every read parses the dump
 * from its start (the code model's history, pg_code_since, stays
 * whole) and skips the nev events already injected; reads are made only
 * when a sample waits and the file grew, at most one per LIVE_POLL_NS and
 * LIVE_POLL_SHARE times the last read's time apart: reading again is
 * then at most about 1/LIVE_POLL_SHARE of the run however large the dump
 * grows (at the price of samples waiting longer, within live_hold). */
struct live {
	char *path;
	char prefix[64];
	uint32_t pid, mmap_pid;
	uint64_t nev;		/* code events injected so far */
	uint64_t readable;	/* perf time the dump has been read up to */
	uint64_t size;		/* bytes at the last read */
	uint64_t last_poll;	/* CLOCK_MONOTONIC ns */
	uint64_t interval;	/* ns between reads */
	unsigned chunks;	/* sets written */
	bool ended;		/* samples no longer wait for it */
	bool final_done;	/* read for the last time */
	bool stale;		/* ended by --live-wait */
	/* maps its reads queued, and those written again under tables
	 * (tables_written, tables_under_code): never more than the first,
	 * whatever its reads overlap */
	uint64_t maps, rewrites;
	bool rewrites_warned;
};

void (*pg_inject_live_hook)(const char *path, bool final);

#define LIVE_POLL_NS 20000000ull		/* 20 ms */
#define LIVE_POLL_SHARE 8
#define LIVE_WAIT_DEFAULT_MS 10000ull
#define LIVE_HOLD_DEFAULT (64ull << 20)

struct held {			/* a record held back, with its own copy */
	struct pg_pd_rec r;
	uint8_t *buf;
	uint64_t bytes;		/* counted against live_hold */
};

struct setinfo {
	uint32_t nimgs;		/* its images, once all are in the output */
	uint32_t nbids;		/* those with a build-id entry */
	bool arch;		/* its times are TSC */
	uint32_t live;		/* a live dump's read: 1 + its index in lives */
	/* a live read's: where its maps lie, so that tables_under_code()
	 * skips the reads that cannot matter */
	uint64_t lo, hi;
};

struct deferred {
	pg_elfset *set;
	pg_code_source *src;	/* the set borrows its bytes until finish */
	uint32_t pid, mmap_pid;	/* the dump's, and that of its recorded mmap */
	bool is_64bit;
};

/* ---- the event queue, ordered by (time, seq) ----
 * A 4-ary heap of 16-byte keys (the time; the seq above an event's slot
 * in evs): four children are one cache line, where a binary heap of the
 * 64-byte events missed the cache at every level of a pop (MOVE-heavy
 * dumps queue hundreds of thousands of MMAP2s at once).  A set's MMAP2s,
 * queued all at once, go into a run instead, sorted once (they mostly
 * come in time order already): a pop takes the run's head or the heap's
 * top, whichever is first, as one heap of both would. */

struct hkey {
	uint64_t time;
	uint64_t ord;		/* seq << 32 | slot */
};

#define SLOT_OF(k) ((uint32_t)((k).ord & 0xffffffffu))

static bool key_less(const struct hkey *a, const struct hkey *b)
{
	return a->time < b->time || (a->time == b->time && a->ord < b->ord);
}

static void sift_up(struct inj *j, size_t i, struct hkey k)
{
	while (i) {
		size_t p = (i - 1) / 4;

		if (!key_less(&k, &j->heap[p]))
			break;
		j->heap[i] = j->heap[p];
		i = p;
	}
	j->heap[i] = k;
}

/* Moves the key at i down to its place. */
static void sift_down(struct inj *j, size_t i)
{
	struct hkey k = j->heap[i];

	for (;;) {
		size_t c = 4 * i + 1, best = c, end = c + 4 < j->nheap ? c + 4 : j->nheap;

		if (c >= j->nheap)
			break;
		for (size_t d = c + 1; d < end; d++)
			if (key_less(&j->heap[d], &j->heap[best]))
				best = d;
		if (!key_less(&j->heap[best], &k))
			break;
		j->heap[i] = j->heap[best];
		i = best;
	}
	j->heap[i] = k;
}

/* Room for n more events, and in the heap for their keys unless they go
 * into the run (queue_maps stages events at evs[nslots...] before they
 * are pushed). */
static int queue_room(struct inj *j, size_t n, bool heap)
{
	if (n > SIZE_MAX - j->nslots || n > SIZE_MAX - j->nheap ||
	    j->nslots + n > UINT32_MAX ||
	    !pg_grow((void **)&j->evs, &j->evs_cap, j->nslots + n, sizeof(*j->evs)) ||
	    (heap && !pg_grow((void **)&j->heap, &j->heap_cap, j->nheap + n, sizeof(*j->heap))))
		return pg_err(j->diag, -ENOMEM, "out of memory");
	return 0;
}

/* The next seq, above slot, as a key's ord. */
static int next_ord(struct inj *j, uint32_t slot, uint64_t *ord)
{
	if (j->seq > UINT32_MAX)
		return pg_err(j->diag, -ENOMEM, "more than 4 billion MMAP2 records to inject");
	*ord = j->seq++ << 32 | slot;
	return 0;
}

/* Queues the event in slot (filled), its time in the key past the last
 * (heap[nheap].time), with the next seq. */
static int queue_slot(struct inj *j, uint32_t slot)
{
	uint64_t ord = 0;	/* (set unless it fails) */
	int ret = next_ord(j, slot, &ord);

	if (ret)
		return ret;
	sift_up(j, j->nheap, (struct hkey){ .time = j->heap[j->nheap].time, .ord = ord });
	j->nheap++;
	return 0;
}

static int heap_push(struct inj *j, uint32_t set, uint32_t map, uint64_t time)
{
	uint32_t slot;
	int ret = queue_room(j, 1, true);

	if (ret)
		return ret;
	slot = j->nfree ? j->freeslots[--j->nfree] : (uint32_t)j->nslots++;
	j->evs[slot] = (struct event){ .set = set, .map = map };
	j->heap[j->nheap].time = time;
	return queue_slot(j, slot);
}

/* The first queued key, from the run or the heap (*in_run); false when
 * nothing is queued. */
static bool queue_first(const struct inj *j, struct hkey *k, bool *in_run)
{
	bool run = j->run_at < j->run_n;

	if (!run && !j->nheap)
		return false;
	*in_run = run && (!j->nheap || key_less(&j->run[j->run_at], &j->heap[0]));
	*k = *in_run ? j->run[j->run_at] : j->heap[0];
	return true;
}

/* Takes the first queued event (queue_first() said there is one). */
static struct event queue_pop(struct inj *j, bool in_run, uint64_t *time)
{
	struct hkey top = in_run ? j->run[j->run_at++] : j->heap[0];
	struct event e = j->evs[SLOT_OF(top)];

	if (!in_run) {
		j->heap[0] = j->heap[--j->nheap];
		if (j->nheap)
			sift_down(j, 0);
	}
	*time = top.time;
	/* a slot not listed (no memory for the list) is only not reused */
	if (pg_grow((void **)&j->freeslots, &j->free_cap, j->nfree + 1, sizeof(*j->freeslots)))
		j->freeslots[j->nfree++] = SLOT_OF(top);
	return e;
}

/* What is left of the run goes into the heap (its keys changing). */
static int run_to_heap(struct inj *j)
{
	size_t m = j->run_n - j->run_at;

	if (!m)
		return 0;
	if (!pg_grow((void **)&j->heap, &j->heap_cap, j->nheap + m, sizeof(*j->heap)))
		return pg_err(j->diag, -ENOMEM, "out of memory");
	for (size_t i = j->run_at; i < j->run_n; i++)
		sift_up(j, j->nheap++, j->run[i]);
	j->run_at = j->run_n = 0;
	return 0;
}

/* Sorts the n keys at k by time, keeping their order among equal times
 * (their seqs rise): an LSD radix sort of the times above the lowest, 11
 * bits a pass, as many passes as they need, through scratch of n keys
 * (only when they are not in order already).  -ENOMEM without it. */
static int sort_run(struct hkey *k, size_t n)
{
	enum { BITS = 11, BUCKETS = 1 << BITS };
	uint64_t lo = k[0].time, hi = k[0].time;
	bool sorted = true;
	struct hkey *src = k, *dst;
	unsigned passes = 0;

	for (size_t i = 1; i < n; i++) {
		sorted &= k[i - 1].time <= k[i].time;
		lo = k[i].time < lo ? k[i].time : lo;
		hi = k[i].time > hi ? k[i].time : hi;
	}
	if (sorted)
		return 0;
	if (!(dst = malloc(n * sizeof(*dst))))
		return -ENOMEM;
	for (uint64_t r = hi - lo; r; r >>= BITS)
		passes++;
	for (unsigned p = 0; p < passes; p++) {
		size_t count[BUCKETS] = { 0 }, at = 0;
		unsigned shift = p * BITS;
		struct hkey *t;

		for (size_t i = 0; i < n; i++)
			count[((src[i].time - lo) >> shift) & (BUCKETS - 1)]++;
		for (size_t b = 0; b < BUCKETS; b++) {
			size_t c = count[b];

			count[b] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[((src[i].time - lo) >> shift) & (BUCKETS - 1)]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != k) {
		memcpy(k, src, n * sizeof(*k));
		dst = src;
	}
	free(dst);	/* the scratch, whichever it ended as */
	return 0;
}

/* Waits for the images of the dump read last, if still being written,
 * then closes the source they read. */
static int settle(struct inj *j)
{
	pg_elfset *set = j->unsettled;
	int ret;

	if (!set)
		return 0;
	j->dd.err[0] = '\0';
	ret = pg_elfset_wait(set);
	for (size_t i = 0; i < pg_elfset_count(set); i++)
		j->st->image_bytes += pg_elfset_image(set, i)->size;
	pg_code_close(j->unsettled_src);
	j->unsettled = NULL;
	j->unsettled_src = NULL;
	if (ret && j->dd.err[0])	/* the set reports into j->dd */
		pg_err(j->diag, ret, "%s", j->dd.err);
	return ret;
}

/* Gives a set's images their final names for good.  Once there, an
 * image may be adopted by another run into the same directory (the same
 * name and build-id are reused, not rewritten), so no failure or signal
 * of this run removes it again: a failure leaves it unreferenced, never
 * another output without its image.  Those committed before a failing
 * rename stay too. */
static int commit_keep(struct inj *j, pg_elfset *set)
{
	sigset_t old;
	int ret;

	j->dd.err[0] = '\0';
	pg_block_fatal_signals(true, &old);
	ret = pg_elfset_commit(set);
	pg_elfset_keep(set);
	pg_block_fatal_signals(false, &old);
	if (ret && j->dd.err[0])	/* the set reports into j->dd */
		pg_err(j->diag, ret, "%s", j->dd.err);
	return ret;
}

/* The sets not named yet get their names (commit_keep), in order. */
static int commit_sets(struct inj *j)
{
	int ret = settle(j);

	while (!ret && j->ncommitted < j->nsets)
		ret = commit_keep(j, j->sets[j->ncommitted++]);
	return ret;
}

/* The absolute path of an image (in j->path, until the next call), or
 * NULL when out of memory: j->abs_dir and its name. */
static const char *image_path(struct inj *j, const struct pg_elf_image *ei)
{
	size_t dl = strlen(j->abs_dir), n = dl + 1 + strlen(ei->name) + 1;

	if (!pg_grow((void **)&j->path, &j->path_cap, n, 1))
		return NULL;
	memcpy(j->path, j->abs_dir, dl);
	j->path[dl] = '/';
	memcpy(j->path + dl + 1, ei->name, n - dl - 1);
	return j->path;
}

/* Every image also in perf's build-id cache (bidcache.h), so that the
 * output resolves after it moved or travelled (perf archive).  Once the
 * output is complete: a cache that cannot be written is a warning, since
 * the output resolves where it is. */
static void cache_images(struct inj *j)
{
	struct pg_bidcache_count c = { 0 };
	struct pg_diag cd = { 0 };
	char *dir;

	if (j->o->no_buildid_cache || !j->nimgs)
		return;
	dir = j->o->buildid_dir ? strdup(j->o->buildid_dir) : pg_bidcache_default_dir();
	if (!dir) {
		pg_warn(j->diag, "no build-id cache (HOME is not set: give --buildid-dir); the images are found only while %s stays where it is",
			j->image_dir);
		return;
	}
	for (size_t s = 0, i = 0; s < j->nsets; s++, i = 0) {
		const struct pg_elf_image *ei = NULL;
		const char *p = NULL;

		for (; i < j->setinfo[s].nimgs; i++) {
			ei = pg_elfset_image(j->sets[s], i);
			p = image_path(j, ei);
			if (!p || pg_bidcache_add(dir, p, ei->build_id, &c, &cd) < 0)
				break;
		}
		if (i < j->setinfo[s].nimgs) {
			pg_warn(j->diag, "build-id cache %s: %s; the images are found only while %s stays where it is",
				dir, p ? cd.err : "out of memory", j->image_dir);
			break;
		}
	}
	j->st->cache_added = c.added;
	j->st->cache_present = c.present;
	j->st->cache_files = c.files;
	j->st->cache_dirs = c.dirs;
	j->st->cache_bytes = c.copy_bytes;
	free(dir);
}

static int emit(struct inj *j, const struct event *e, uint64_t time)
{
	size_t n;
	const struct pg_elf_map *mp = &pg_elfset_maps(j->sets[e->set], &n)[e->map];
	const struct pg_elf_image *im = pg_elfset_image(j->sets[e->set], mp->image);
	const char *path;

	/* a pipe's reader may open an image as soon as its MMAP2 arrives:
	 * the images read so far get their names before the first one goes
	 * out, once the output took what came before (an output that fails
	 * earlier keeps none) */
	if (j->pipe_out && j->ncommitted < j->nsets) {
		int ret = pg_pdw_flush(j->w);

		if (!ret)
			ret = commit_sets(j);
		if (ret)
			return ret;
	}
	path = image_path(j, im);
	if (!path)
		return pg_err(j->diag, -ENOMEM, "out of memory");
	struct pg_pdw_mmap2 m = {
		.pid = mp->pid, .tid = mp->tid,
		.start = mp->start, .len = mp->len, .pgoff = mp->pgoff,
		.maj = major(im->dev), .min = minor(im->dev), .ino = im->ino,
		.ino_generation = 0, .prot = PROT_RX, .flags = MAP_PRIVATE_FLAG,
		.filename = path, .time = time, .id = j->mmap_id,
	};

	j->st->mmaps_injected++;
	j->st->records_out++;
	return pg_pdw_mmap2(j->w, pg_perfdata_attr(j->pd, 0), &m);
}

/* Injected records due before an input record of time t. */
static int flush_until(struct inj *j, uint64_t t)
{
	struct hkey first;
	bool in_run;

	while (queue_first(j, &first, &in_run) && first.time <= t) {
		uint64_t time;
		struct event e = queue_pop(j, in_run, &time);
		int ret = emit(j, &e, time);

		if (ret)
			return ret;
	}
	return 0;
}

/* pid's entry, or NULL when it has none */
static struct pidinfo *pid_known(struct inj *j, uint32_t pid)
{
	for (size_t i = 0; i < j->npids; i++)
		if (j->pids[i].pid == pid)
			return &j->pids[i];
	return NULL;
}

/* pid's entry, made when new (NULL: out of memory) */
static struct pidinfo *pidinfo(struct inj *j, uint32_t pid)
{
	struct pidinfo *pi = pid_known(j, pid);

	if (pi)
		return pi;
	if (!pg_grow((void **)&j->pids, &j->pids_cap, j->npids + 1, sizeof(*j->pids)))
		return NULL;
	memset(&j->pids[j->npids], 0, sizeof(j->pids[0]));
	j->pids[j->npids].pid = pid;
	j->pids[j->npids].first_load = UINT64_MAX;
	return &j->pids[j->npids++];
}

/* ---- clocks ---- */

static void check_attrs(struct inj *j)
{
	j->monotonic = pg_perfdata_nattrs(j->pd) > 0;
	for (size_t i = 0; i < pg_perfdata_nattrs(j->pd); i++) {
		const struct pg_pd_attr *a = pg_perfdata_attr(j->pd, i);

		if (!a->use_clockid || a->clockid != CLOCK_MONOTONIC_ID)
			j->monotonic = false;
		if (a->sample_type & PERF_SAMPLE_STACK_USER_BIT)
			j->user_stacks = true;
	}
	if (pg_perfdata_nattrs(j->pd) && pg_perfdata_attr(j->pd, 0)->nr_ids)
		j->mmap_id = pg_perfdata_attr(j->pd, 0)->ids[0];
	j->attrs_checked = true;
}

static uint64_t tsc_to_perf(const struct pg_pd_time_conv *tc, uint64_t cyc)
{
	uint64_t quot, rem;

	if (tc->cap_user_time_short)
		cyc = tc->time_cycles + ((cyc - tc->time_cycles) & tc->time_mask);
	if (tc->time_shift >= 64)
		return tc->time_zero;
	quot = cyc >> tc->time_shift;
	rem = cyc & ((1ull << tc->time_shift) - 1);
	return tc->time_zero + quot * tc->time_mult + ((rem * tc->time_mult) >> tc->time_shift);
}

/* ---- reading a dump ---- */

static int add_image(struct inj *j, const struct pg_elf_image *ei)
{
	const char *abs;

	j->nimgs++;
	j->st->images++;
	if (!j->unsettled)	/* its sizes are known at settle() */
		j->st->image_bytes += ei->size;
	if (j->bid_later) {	/* made again at the end: build_id_ent */
		j->setinfo[j->nsets - 1].nbids++;
		return 0;
	}
	/* the final name: in file mode it is taken only when the output is
	 * complete, and rename keeps the inode the set recorded */
	abs = image_path(j, ei);
	if (!abs)
		return pg_err(j->diag, -ENOMEM, "out of memory");
	return pg_pdw_build_id(j->w, HOST_PID, PG_PERF_RECORD_MISC_USER, ei->build_id, 20, abs);
}

/* pg_pdw_build_id_fn: entry i of those add_image() did not add, in the
 * order it met their images; i counts up from 0. */
static int build_id_ent(void *ctx, size_t i, struct pg_pdw_build_id_ent *e)
{
	struct inj *j = ctx;
	const struct pg_elf_image *ei;
	const char *abs;

	if (i == 0)
		j->bid_set = j->bid_img = 0;
	while (j->bid_set < j->nsets && j->bid_img >= j->setinfo[j->bid_set].nbids) {
		j->bid_set++;
		j->bid_img = 0;
	}
	if (j->bid_set == j->nsets)
		return 0;
	ei = pg_elfset_image(j->sets[j->bid_set], j->bid_img++);
	abs = image_path(j, ei);
	if (!abs)
		return -ENOMEM;
	*e = (struct pg_pdw_build_id_ent){ .pid = HOST_PID, .misc = PG_PERF_RECORD_MISC_USER,
					   .id = ei->build_id, .id_size = 20, .filename = abs };
	return 1;
}

/* Map i of set s on perf's clock: when it starts, and when its LOAD was
 * (not before it starts). */
static void map_times(const struct inj *j, size_t s, size_t i, uint64_t *t, uint64_t *loaded)
{
	const struct pg_pd_time_conv *tc = pg_perfdata_time_conv(j->pd);
	bool arch = j->setinfo[s].arch;
	size_t n;
	uint64_t mt = pg_elfset_maps(j->sets[s], &n)[i].time;
	uint64_t lt = pg_elfset_map_loaded(j->sets[s], i);

	*t = arch ? tsc_to_perf(tc, mt) : mt;
	lt = arch ? tsc_to_perf(tc, lt) : lt;
	*loaded = lt < *t ? *t : lt;
}

/* The MMAP2 records of the last set's images, one per map: their times
 * staged in the queue's spare keys (*nevs of them), pushed by
 * push_staged() once the images are in.  An event is the map's index, not
 * a copy of it: at a dump's end that copy was one more of every map. */
static int queue_maps(struct inj *j, struct pidinfo *pi, size_t *nevs)
{
	size_t n, s = j->nsets - 1;
	const struct pg_elf_map *m = pg_elfset_maps(j->sets[s], &n);
	/* the run when it is free (push_staged), else the heap's spare room */
	bool to_run = n > 1 && j->run_at == j->run_n;
	int ret = queue_room(j, n, !to_run);
	struct hkey *stage;

	*nevs = 0;
	if (ret)
		return ret;
	if (n > UINT32_MAX || s > UINT32_MAX ||
	    (to_run && !pg_grow((void **)&j->run, &j->run_cap, n, sizeof(*j->run))))
		return pg_err(j->diag, -ENOMEM, "out of memory");
	j->staged_run = to_run;
	/* (no heap yet when a first set has no maps: no NULL + 0) */
	stage = to_run ? j->run : j->heap ? j->heap + j->nheap : NULL;
	for (size_t i = 0; i < n; i++) {
		uint64_t t, lt;

		map_times(j, s, i, &t, &lt);
		stage[i].time = t;
		if (m[i].kind == PG_ELF_MAP_LOAD && t < pi->first_load)
			pi->first_load = t;
		if (t < lt) {	/* it starts before its LOAD */
			uint32_t dpid = pi->pid;
			/* pidinfo() may move pids: pi is found again after */
			struct pidinfo *ep = m[i].pid == dpid ? pi : pidinfo(j, m[i].pid);

			pi = pidinfo(j, dpid);
			if (!ep || !pi)
				return pg_err(j->diag, -ENOMEM, "out of memory");
			j->st->early++;
			if (ep->early_lo >= ep->early_hi || m[i].start < ep->early_lo)
				ep->early_lo = m[i].start;
			if (m[i].start + m[i].len > ep->early_hi)
				ep->early_hi = m[i].start + m[i].len;
		}
		j->st->carried += m[i].kind == PG_ELF_MAP_CARRY;
	}
	*nevs = n;
	return 0;
}

/* Pushes the n events queue_maps() staged for the last set: each key's
 * time is where the push takes it from. */
static int push_staged(struct inj *j, size_t n)
{
	bool run = j->staged_run;	/* (it was free): the keys are made there */
	int ret = 0;

	j->staged_run = false;
	for (size_t i = 0; i < n && !ret; i++) {
		uint32_t slot = (uint32_t)j->nslots++;

		j->evs[slot] = (struct event){ .set = (uint32_t)(j->nsets - 1), .map = (uint32_t)i };
		/* the room is there */
		ret = run ? next_ord(j, slot, &j->run[i].ord) : queue_slot(j, slot);
	}
	if (ret || !run)
		return ret;
	if (sort_run(j->run, n))
		return pg_err(j->diag, -ENOMEM, "out of memory");
	j->run_at = 0;
	j->run_n = n;
	return 0;
}

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen);
static int tables_written(struct inj *j, size_t s, size_t i, uint64_t t,
			  uint64_t astart, uint64_t alen);

/* The last set's maps under an executable anonymous map the output has
 * already (pidinfo.anons) and older than it: written again at its time,
 * after it, so perf names the code from there on as it does when the
 * map is dropped (file mode, output()).  Only maps from first_load on
 * count, as output() drops only those. */
static int rehide_anons(struct inj *j, uint32_t pid)
{
	struct pidinfo *pi = pid_known(j, pid);
	size_t n, s = j->nsets - 1;
	const struct pg_elf_map *m = pg_elfset_maps(j->sets[s], &n);
	int ret = 0;

	for (unsigned a = 0; pi && a < pi->nanons && !ret; a++) {
		if (pi->anons[a].time < pi->first_load)
			continue;
		for (size_t i = 0; i < n && !ret; i++) {
			uint64_t t, lt;

			map_times(j, s, i, &t, &lt);
			if (m[i].pid == pid && t <= pi->anons[a].time &&
			    overlaps(m[i].start, m[i].len, pi->anons[a].start, pi->anons[a].len)) {
				ret = heap_push(j, (uint32_t)s, (uint32_t)i, pi->anons[a].time);
				/* tables written again must not hide code again */
				if (!ret && m[i].kind == PG_ELF_MAP_TABLES)
					ret = tables_written(j, s, i, pi->anons[a].time,
							     pi->anons[a].start, pi->anons[a].len);
				j->st->early++;
			}
		}
	}
	return ret;
}

/* ---- tables never over code ----
 * A memory image's unwind tables go right after its region's code, at
 * addresses the JIT may fill later.  Within one set the region holds all
 * of its code, but a live dump is read in several sets: a later read may
 * find code where an earlier one put tables, or put its tables where an
 * earlier read's code is.  Whichever map perf meets last wins, and the
 * tables map would hide that code (node: fib's first bytes named as
 * the script's image).  So each code map under a tables map and not
 * after it is written again at the tables map's time, after it, in its
 * own time order: perf's maps under the tables are then what they were
 * before the tables came.  The tables' addresses then read as that
 * code's image, which costs the tables' image its unwinding there (perf
 * falls back to frame pointers).  A tables map that rehide_anons()
 * writes again, at an anonymous map's time, is followed by that code
 * again too (tables_written).  Not handled, and not met so far: a map
 * written again covers its whole range, so a newer map beside the tables
 * that overlaps it (code reused across reads) is hidden. */

struct under {
	uint64_t time;	/* the code map's own */
	struct event ev;
};

static int under_cmp(const void *a, const void *b)
{
	const struct under *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	if (x->ev.set != y->ev.set)
		return x->ev.set < y->ev.set ? -1 : 1;
	return x->ev.map < y->ev.map ? -1 : x->ev.map > y->ev.map;
}

/* Collects into *u the code maps of pid under [start, start + len) that
 * start at tt or before, in the sets among [s0, s1) that are reads of
 * the live dump live, but for those under tab's anonymous map (tab
 * may be NULL), which rehide_anons() writes again at tt itself; no more
 * once *nu passes limit (the group is then over the budget:
 * push_under() writes none of it). */
static int collect_under(struct inj *j, size_t s0, size_t s1, uint32_t live, uint32_t pid,
			 uint64_t start, uint64_t len, uint64_t tt, const struct tab *tab,
			 size_t limit, struct under **u, size_t *nu, size_t *cap)
{
	for (size_t s = s0; s < s1 && *nu <= limit; s++) {
		const struct setinfo *si = &j->setinfo[s];
		size_t n;
		const struct pg_elf_map *m = pg_elfset_maps(j->sets[s], &n);

		if (!n || si->live != live || !overlaps(si->lo, si->hi - si->lo, start, len))
			continue;
		for (size_t i = 0; i < n && *nu <= limit; i++) {
			uint64_t t, lt;

			if (m[i].kind == PG_ELF_MAP_TABLES || m[i].pid != pid ||
			    !overlaps(m[i].start, m[i].len, start, len))
				continue;
			map_times(j, s, i, &t, &lt);
			if (t > tt || (tab && tab->alen &&
				       overlaps(m[i].start, m[i].len, tab->astart, tab->alen)))
				continue;
			if (!pg_grow((void **)u, cap, *nu + 1, sizeof(**u)))
				return pg_err(j->diag, -ENOMEM, "out of memory");
			(*u)[(*nu)++] = (struct under){ .time = t,
							.ev = { (uint32_t)s, (uint32_t)i } };
		}
	}
	return 0;
}

/* The rewrites the live dump's budget has left. */
static size_t budget_left(const struct live *lv)
{
	uint64_t left = lv->maps - lv->rewrites;	/* rewrites <= maps */

	return left > SIZE_MAX - 1 ? SIZE_MAX - 1 : (size_t)left;
}

/* Writes again at tt the code maps in u (a map found twice once), in
 * their time order, an earlier read's first at one time: perf's maps
 * under the tables are then as they were.  All of them within the live
 * dump's budget, or none: half a group could let an older map hide a
 * newer one. */
static int push_under(struct inj *j, struct live *lv, struct under *u, size_t nu, uint64_t tt)
{
	size_t w = 0;
	int ret = 0;

	if (!nu)	/* (u may be NULL then) */
		return 0;
	qsort(u, nu, sizeof(*u), under_cmp);
	for (size_t i = 0; i < nu; i++)	/* copies are side by side now */
		if (!w || under_cmp(&u[w - 1], &u[i]))
			u[w++] = u[i];
	if (w > budget_left(lv)) {
		if (!lv->rewrites_warned)
			pg_warn(j->diag, "%s: its reads put unwind tables over each other's code more than %llu times; the rest left as they are (samples there may be named as a tables image)",
				lv->path, (unsigned long long)lv->maps);
		lv->rewrites_warned = true;
		return 0;
	}
	lv->rewrites += w;
	for (size_t i = 0; i < w && !ret; i++)
		ret = heap_push(j, u[i].ev.set, u[i].ev.map, tt);
	return ret;
}

/* A read of a live dump: its maps count in the dump's budget, and where
 * they lie bounds the reads tables_written() and tables_under_code()
 * look at.  Before both of them. */
static void live_set(struct inj *j)
{
	size_t n, s = j->nsets - 1;
	const struct pg_elf_map *m = pg_elfset_maps(j->sets[s], &n);
	struct setinfo *si = &j->setinfo[s];

	if (!si->live)
		return;
	j->lives[si->live - 1].maps += n;
	for (size_t i = 0; i < n; i++) {
		uint64_t end = m[i].start + m[i].len < m[i].start ? UINT64_MAX
								 : m[i].start + m[i].len;

		si->lo = !i || m[i].start < si->lo ? m[i].start : si->lo;
		si->hi = !i || end > si->hi ? end : si->hi;
	}
}

/* The last set's tables map i, written at t (its own time, or an
 * anonymous map's): noted for later reads' code under it, and the
 * earlier reads' code under it written again at t, with this read's
 * own code over that code (the rewrite must not hide it). */
static int tables_written(struct inj *j, size_t s, size_t i, uint64_t t,
			  uint64_t astart, uint64_t alen)
{
	uint32_t live = j->setinfo[s].live;
	size_t n, nu = 0, cap = 0, below;
	const struct pg_elf_map *m = pg_elfset_maps(j->sets[s], &n);
	struct under *u = NULL;
	struct live *lv;
	int ret;

	if (!live)
		return 0;
	lv = &j->lives[live - 1];
	if (!pg_grow((void **)&j->tabs, &j->tabs_cap, j->ntabs + 1, sizeof(*j->tabs)))
		return pg_err(j->diag, -ENOMEM, "out of memory");
	j->tabs[j->ntabs++] = (struct tab){ { (uint32_t)s, (uint32_t)i }, t, astart, alen };
	ret = collect_under(j, 0, s, live, m[i].pid, m[i].start, m[i].len, t, NULL,
			    budget_left(lv), &u, &nu, &cap);
	below = nu;
	for (size_t k = 0; k < below && !ret; k++) {
		const struct event *e = &u[k].ev;
		size_t ne;
		const struct pg_elf_map *em = &pg_elfset_maps(j->sets[e->set], &ne)[e->map];

		ret = collect_under(j, s, s + 1, live, em->pid, em->start, em->len, t,
				    NULL, budget_left(lv), &u, &nu, &cap);
	}
	if (!ret && below)
		ret = push_under(j, lv, u, nu, t);
	free(u);
	return ret;
}

/* For a read of a live dump (another dump, even of the same pid, is
 * another process's or is read whole): the last set's code under
 * earlier reads' tables, at each time those were written, and its
 * tables over earlier reads' code.  Earlier reads' tables are few (one
 * map per image, and once more per anonymous map over it); finding the
 * code under a new tables map scans the earlier reads' maps.  That is
 * within the read's time, which spaces the reads (poll_live), as the
 * read's parse of the dump from its start is. */
static int tables_under_code(struct inj *j)
{
	size_t n, s = j->nsets - 1;
	const struct pg_elf_map *m = pg_elfset_maps(j->sets[s], &n);
	uint32_t live = j->setinfo[s].live;
	struct live *lv;
	struct under *u = NULL;
	size_t nu = 0, cap = 0;
	int ret = 0;

	if (!live)
		return 0;
	lv = &j->lives[live - 1];
	for (size_t k = 0; k < j->ntabs && !ret; k++) {
		const struct tab *e = &j->tabs[k];
		size_t nt;
		const struct pg_elf_map *tm = &pg_elfset_maps(j->sets[e->ev.set], &nt)[e->ev.map];

		if (j->setinfo[e->ev.set].live != live)
			continue;
		nu = 0;
		ret = collect_under(j, s, s + 1, live, tm->pid, tm->start, tm->len, e->time,
				    e, budget_left(lv), &u, &nu, &cap);
		if (!ret)
			ret = push_under(j, lv, u, nu, e->time);
	}
	free(u);
	for (size_t i = 0; i < n && !ret; i++) {
		uint64_t tt, lt;

		if (m[i].kind != PG_ELF_MAP_TABLES)
			continue;
		map_times(j, s, i, &tt, &lt);
		ret = tables_written(j, s, i, tt, 0, 0);
	}
	return ret;
}

/* Writes a dump's images and queues its MMAP2 records.  The set is j's
 * from here on, whatever happens (a failed run discards j's sets).  A
 * set with background_writes is given src: once finished it is
 * j->unsettled, src with it (the caller no longer closes it). */
static int finish_dump(struct inj *j, pg_elfset *set, struct pidinfo *pi, bool arch,
		       uint32_t live, struct pg_diag *dd, pg_code_source *src)
{
	size_t nevs = 0;
	int ret;

	if (!pg_grow((void **)&j->sets, &j->sets_cap, j->nsets + 1, sizeof(*j->sets)) ||
	    !pg_grow((void **)&j->setinfo, &j->setinfo_cap, j->nsets + 1, sizeof(*j->setinfo))) {
		pg_elfset_discard(set);
		pg_elfset_free(set);
		return pg_err(dd, -ENOMEM, "out of memory");
	}
	j->setinfo[j->nsets] = (struct setinfo){ .arch = arch, .live = live };
	j->sets[j->nsets++] = set;
	ret = pg_elfset_finish(set);
	if (!ret && src) {
		j->unsettled = set;
		j->unsettled_src = src;
	}
	if (!ret)
		ret = queue_maps(j, pi, &nevs);
	for (size_t i = 0; !ret && i < pg_elfset_count(set); i++)
		ret = add_image(j, pg_elfset_image(set, i));
	if (!ret)
		j->setinfo[j->nsets - 1].nimgs = (uint32_t)pg_elfset_count(set);
	if (!ret)
		ret = push_staged(j, nevs);
	/* the tables' own times take the budget first: rehide_anons()'s
	 * groups at later times only add to them */
	if (!ret) {
		live_set(j);
		ret = tables_under_code(j);
	}
	if (!ret)
		ret = rehide_anons(j, pi->pid);
	if (!ret)
		j->st->dumps++;
	return ret;
}

/* A later read of a live dump, before it reads: the code indexes that
 * its new MOVEs and UNLOADs name (events from done on), into ids, and
 * how many events the dump holds now, *n: the read takes no more, since
 * the JIT may write on in between.  An earlier read injected the LOADs of
 * those indexes in its own set; this read's set takes them again (the
 * same code at the same address), so that the MOVE has its code to map. */
static int live_wanted(const char *path, uint64_t done, struct pg_diag *dd,
		       struct pg_u64map *ids, uint64_t *n)
{
	pg_code_source *src;
	struct pg_code_event ev;
	pg_warn_fn warn = dd->warn;
	uint64_t k = 0;
	int ret;

	dd->warn = NULL;	/* the read itself says what is wrong, once */
	ret = pg_code_open(path, dd, &src);
	if (!ret)
		while ((ret = pg_code_next(src, &ev)) > 0)
			if (k++ >= done && (ev.kind == PG_CODE_MOVE || ev.kind == PG_CODE_UNLOAD) &&
			    !pg_u64map_put(ids, ev.id, NULL)) {
				ret = pg_err(dd, -ENOMEM, "out of memory");
				break;
			}
	pg_code_close(src);
	dd->warn = warn;
	*n = k;
	return ret < 0 ? ret : 0;
}

/* Keeps the first reason a dump was left out (see first_failed). */
static void note_failed(struct inj *j, const char *fmt, ...)
{
	va_list ap;

	if (j->first_failed[0])
		return;
	va_start(ap, fmt);
	vsnprintf(j->first_failed, sizeof(j->first_failed), fmt, ap);
	va_end(ap);
}

/* Reads one dump: writes its images and queues its MMAP2 records.  A
 * dump that cannot be used (damaged, wrong clock) is a warning and the
 * rest goes on; an image that cannot be written (a full disk) fails the
 * run, since the output would silently lack that code. */
/* opts.progress_bytes, with dump_done bytes of the dump being read */
static void report_progress(struct inj *j, uint64_t dump_done)
{
	bool pipe = pg_perfdata_pipe(j->pd);
	uint64_t total = pipe ? 0 : pg_perfdata_data_size(j->pd) + j->prog_dumps_total;

	if (j->o->progress_bytes)
		j->o->progress_bytes(j->o->progress_ctx, j->prog_in + j->prog_dumps + dump_done,
				     total);
}

static int load_dump(struct inj *j, const char *path, uint32_t want_pid, bool by_hand,
		     struct live *lv, bool final)
{
	const struct pg_pd_time_conv *tc = pg_perfdata_time_conv(j->pd);
	struct pg_diag *dd = &j->dd;	/* the set and the source keep it */
	struct pg_elfset_opts eo = { .sz = sizeof(eo), .dir = j->image_dir, .per_function = j->o->per_function,
				     .cfi_layout_perf_5_19 = j->cfi_compat,
				     .build_id_names = true,
				     .dir_nofollow = !j->o->image_dir,
				     .memory_layout = j->o->layout != PG_INJECT_LAYOUT_PACKED,
				     .plain_debug = j->o->plain_debug, .budget = j->budget };
	const struct pg_code_process *h;
	struct pg_code_event rec;
	pg_code_source *src = NULL;
	pg_elfset *set = NULL;
	struct pidinfo *pi;
	size_t base_img = j->nimgs, base_set = j->nsets;
	char prefix[64];
	bool arch, fatal = false;
	pg_warn_fn warn = dd->warn;
	uint64_t nev = 0, nread = 0, last = 0, limit = UINT64_MAX;
	struct pg_u64map wanted = PG_U64MAP_INIT(1);
	int ret;

	/* the last dump's images are written before this one is read: one
	 * dump's memory at a time */
	if ((ret = settle(j)) < 0)
		return ret;
	dd->err[0] = '\0';	/* whatever fails below says why there, or in j->diag */
	if (lv && lv->nev && (ret = live_wanted(path, lv->nev, dd, &wanted, &limit)) < 0)
		goto fail;
	if (!j->attrs_checked)
		check_attrs(j);
	eo.carry_live = j->user_stacks;
	/* a live dump is parsed again on every read: what it says (a tail
	 * cut mid-record above all, which is only the JIT still writing) is
	 * said once, by the last read, which parses it all */
	if (lv && !final)
		dd->warn = NULL;
	ret = pg_code_open(path, dd, &src);
	if (ret) {
		/* a dump named by --jitdump is an input like -i: one that
		 * cannot be opened, or is no jitdump, fails the run */
		if (by_hand) {
			pg_err(j->diag, ret, "--jitdump %s", dd->err);
			dd->err[0] = '\0';
			fatal = true;
		}
		goto fail;
	}
	if (!lv)	/* a live one counts as it grows (poll_live) */
		j->prog_dumps_total += pg_code_size(src);
	h = pg_code_process(src);
	if (want_pid && h->pid != want_pid && (!lv || final))
		pg_warn(j->diag, "%s: the dump says pid %u, its mmap was made by pid %u; using the dump's",
			path, h->pid, want_pid);
	arch = h->arch_time;
	if (arch && !tc) {
		ret = pg_err(dd, -EINVAL, "%s: the dump uses arch timestamps (TSC) but the perf.data has no TIME_CONV record to convert them; re-record with a perf that writes it, or on hardware with cap_user_time_zero",
			     path);
		goto fail;
	}
	if (!arch && !j->monotonic) {
		ret = pg_err(dd, -EINVAL, "%s: the dump's times are CLOCK_MONOTONIC but the events were not recorded with that clock; re-record with 'perf record -k mono'",
			     path);
		goto fail;
	}
	pi = pidinfo(j, h->pid);
	if (!pi) {
		ret = pg_err(dd, -ENOMEM, "out of memory");
		goto fail;
	}
	pi->by_hand |= by_hand;
	if (by_hand && !pi->hand_path)
		pi->hand_path = path;	/* o->jitdumps[i]: lives as long as the run */
	/* a second dump of the same pid (pid reuse) gets its own names */
	if (lv && lv->prefix[0])	/* a live dump's later reads: parts */
		snprintf(prefix, sizeof(prefix), "%.40s-part%u", lv->prefix, lv->chunks);
	else if (pi->dumps++)
		snprintf(prefix, sizeof(prefix), "jitted-%u.%u", h->pid, pi->dumps);
	else
		snprintf(prefix, sizeof(prefix), "jitted-%u", h->pid);
	if (lv && !lv->prefix[0])
		snprintf(lv->prefix, sizeof(lv->prefix), "%s", prefix);
	eo.prefix = prefix;
	if (!pg_grow((void **)&j->sets, &j->sets_cap, j->nsets + 1, sizeof(*j->sets))) {
		ret = pg_err(dd, -ENOMEM, "out of memory");
		goto fail;
	}
	fatal = true;	/* from here on, errors are the output's */
	/* the images written while the records go on, up to the next dump
	 * or the commit (settle()); not those a later read or the
	 * prescan's notes finish */
	eo.background_writes = !lv && !(j->defer && eo.carry_live && !arch &&
					eo.memory_layout && !eo.per_function);
	ret = pg_elfset_new(h, path, &eo, dd, &set);
	if (ret)
		goto fail;
	while ((ret = pg_code_next(src, &rec)) > 0) {
		struct pg_elf_place pl;

		if (nev >= limit) {	/* written since live_wanted(): the next read's */
			ret = 0;
			break;
		}
		last = rec.time;
		if (!lv && !(nread++ & 0x3ff))
			report_progress(j, rec.src_offset);
		if (lv && nev++ < lv->nev) {	/* injected by an earlier read */
			if (rec.kind != PG_CODE_LOAD || !pg_u64map_get(&wanted, rec.id))
				continue;
			/* again, for a MOVE or UNLOAD of this read (live_wanted) */
			ret = pg_elfset_add_since(set, &rec, pg_code_since(src), &pl);
			if (ret < 0)
				goto fail;
			ret = 1;
			continue;
		}
		ret = pg_elfset_add_since(set, &rec, pg_code_since(src), &pl);
		if (ret < 0)
			goto fail;
		if (ret == 0 && rec.kind == PG_CODE_LOAD)
			j->st->loads++;
		else if (ret == 0 && rec.kind == PG_CODE_MOVE)
			j->st->moves++;
		ret = 1;
	}
	dd->warn = warn;
	if (ret < 0) {		/* a damaged record: the dump is not used */
		fatal = false;
		goto fail;
	}
	if (lv) {
		uint64_t t = arch ? tsc_to_perf(tc, last) : last;

		if (nev > lv->nev) {	/* after the header's time too */
			if (t > lv->readable)
				lv->readable = t;
		}
		if (nev == lv->nev) {	/* nothing new complete yet */
			pg_elfset_discard(set);
			goto out;
		}
		lv->nev = nev;
		ret = finish_dump(j, set, pi, arch, (uint32_t)(lv - j->lives) + 1, dd, NULL);
		set = NULL;
		if (ret < 0)
			goto fail;
		if (lv->chunks++)	/* one dump, however many reads */
			j->st->dumps--;
		goto out;
	}
	if (j->defer && eo.carry_live && !arch && eo.memory_layout && !eo.per_function) {
		/* carry only the code the samples' stacks reach (note_sample) */
		if (!pg_grow((void **)&j->later, &j->later_cap, j->nlater + 1, sizeof(*j->later))) {
			ret = pg_err(dd, -ENOMEM, "out of memory");
			goto fail;
		}
		ret = pg_elfset_note_frames(set, 0, NULL, 0);
		if (ret)
			goto fail;
		j->later[j->nlater++] = (struct deferred){ .set = set, .src = src, .pid = h->pid,
							   .mmap_pid = want_pid ? want_pid : h->pid,
							   .is_64bit = h->is_64bit };
		return 0;
	}
	ret = finish_dump(j, set, pi, arch, 0, dd, eo.background_writes ? src : NULL);
	set = NULL;
	if (j->unsettled_src == src) {	/* background writes: not live */
		j->prog_dumps += pg_code_size(src);	/* read whole */
		src = NULL;	/* settle() closes it */
	}
	if (ret < 0)
		goto fail;
	goto out;

fail:
	dd->warn = warn;
	if (lv)			/* what it gave so far stays; no more waiting */
		lv->ended = lv->final_done = true;
	pg_elfset_discard(set);
	/* its images are not in the output: none for the build-id cache */
	j->nimgs = base_img;
	for (size_t s = base_set; s < j->nsets; s++)
		j->setinfo[s].nimgs = 0;
	/* a dump that changed while read (zeros where it shrank) fails the
	 * run, as the commit would: not a damaged dump left out */
	if (!fatal && pg_inputs_check(dd) < 0)
		fatal = true;
	if (fatal) {
		/* dd's message names the image file and the system's error;
		 * the output's own errors (add_image, the heap) are in j->diag */
		ret = ret < 0 ? ret : -EIO;
		if (dd->err[0])
			pg_err(j->diag, ret, "%s", dd->err);
		goto out;
	}
	j->st->dumps_failed++;
	note_failed(j, "%s", dd->err);
	pg_warn(j->diag, "%s; this dump is not injected", dd->err);
	ret = 0;
out:
	if (src && !lv)
		j->prog_dumps += pg_code_size(src);
	pg_u64map_free(&wanted);
	pg_elfset_free(set);
	pg_code_close(src);
	return ret;
}

/* ---- live dumps (pipe-mode input) ---- */

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reads what the JIT added to a live dump since the last read.  final:
 * the process is gone or the input ended; the dump is read whole one
 * last time (its warnings said once) and nothing waits for it again.
 * Otherwise the dump is read only when it grew, at most once per
 * LIVE_POLL_NS; one not written for live_wait_ns has ended too. */
static int poll_live(struct inj *j, struct live *lv, bool final)
{
	struct stat sb;
	uint64_t t, nev;
	int ret;

	if (lv->final_done)
		return 0;
	if (pg_inject_live_hook)
		pg_inject_live_hook(lv->path, final);
	else if (!final) {
		t = now_ns(CLOCK_MONOTONIC);
		if (lv->last_poll && t - lv->last_poll < lv->interval)
			return 0;
		lv->last_poll = t;
	}
	if (stat(lv->path, &sb) != 0) {	/* gone: what was read stays */
		lv->ended = lv->final_done = true;
		return 0;
	}
	if (!final && (uint64_t)sb.st_size == lv->size) {
		struct timespec mt = sb.st_mtim;
		uint64_t m = (uint64_t)mt.tv_sec * 1000000000ull + (uint64_t)mt.tv_nsec;

		if (now_ns(CLOCK_REALTIME) - m >= j->live_wait_ns)
			lv->ended = lv->stale = true;
		return 0;
	}
	if ((uint64_t)sb.st_size > lv->size)	/* progress: what it grew by */
		j->prog_dumps += (uint64_t)sb.st_size - lv->size;
	lv->size = (uint64_t)sb.st_size;
	j->st->live_reads++;
	if (final)
		lv->ended = lv->final_done = true;
	nev = lv->nev;
	t = now_ns(CLOCK_MONOTONIC);
	ret = load_dump(j, lv->path, lv->mmap_pid, false, lv, final);
	t = now_ns(CLOCK_MONOTONIC) - t;
	lv->interval = t * LIVE_POLL_SHARE > LIVE_POLL_NS ? t * LIVE_POLL_SHARE : LIVE_POLL_NS;
	lv->last_poll = now_ns(CLOCK_MONOTONIC);
	if (!ret && lv->stale && lv->nev > nev) {
		lv->stale = false;
		pg_warn(j->diag, "%s was not written for %.1f s, then grew: samples of pid %u in the code it added may not be named (--live-wait)",
			lv->path, (double)j->live_wait_ns / 1e9, lv->pid);
	}
	return ret;
}

/* A dump found through a marker in a pipe: followed from now on. */
static int follow_dump(struct inj *j, const char *path, uint32_t pid, uint32_t mmap_pid)
{
	struct live *lv;

	if (!pg_grow((void **)&j->lives, &j->lives_cap, j->nlives + 1, sizeof(*j->lives)))
		return pg_err(j->diag, -ENOMEM, "out of memory");
	lv = &j->lives[j->nlives];
	memset(lv, 0, sizeof(*lv));
	lv->path = strdup(path);
	if (!lv->path)
		return pg_err(j->diag, -ENOMEM, "out of memory");
	lv->pid = pid;
	lv->mmap_pid = mmap_pid;
	j->nlives++;
	return poll_live(j, lv, false);
}

/* A process exited: its dumps are complete. */
static int live_exit(struct inj *j, uint32_t pid)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < j->nlives; i++)
		if (j->lives[i].pid == pid || j->lives[i].mmap_pid == pid)
			ret = poll_live(j, &j->lives[i], true);
	return ret;
}

static bool anon_exec(const struct pg_pd_mmap *mm);

/* Must this record wait for a live dump to be read past its time?
 * Samples wait (they are what the images name), and so do a JIT's
 * executable anonymous maps: output() drops those made after the dump's
 * first LOAD, as in file mode, and only a dump read past the map tells
 * (a JIT maps each page before it writes the LOAD of the code in it).
 * What comes after a waiting record waits behind it, so the order
 * stays. */
static int waits(struct inj *j, const struct pg_pd_rec *r, bool *w)
{
	struct pg_pd_mmap mm;
	uint32_t pid;

	*w = false;
	if (!j->nlives || !r->has_time)
		return 0;
	if (r->type == PG_PERF_RECORD_SAMPLE && r->has_tid)
		pid = r->pid;
	else if ((r->type == PG_PERF_RECORD_MMAP || r->type == PG_PERF_RECORD_MMAP2) &&
		 !pg_perfdata_mmap(j->pd, r, &mm) && anon_exec(&mm))
		pid = mm.pid;
	else
		return 0;
	for (size_t i = 0; i < j->nlives; i++) {
		struct live *lv = &j->lives[i];
		int ret;

		if (lv->ended || (lv->pid != pid && lv->mmap_pid != pid) ||
		    lv->readable >= r->time)
			continue;
		if ((ret = poll_live(j, lv, false)))
			return ret;
		if (!lv->ended && lv->readable < r->time)
			*w = true;
	}
	return 0;
}

static int hold(struct inj *j, const struct pg_pd_rec *r)
{
	struct held *h;
	size_t at;

	if (j->hq_n == j->hq_cap) {	/* grow the ring, unwrapped */
		size_t cap = j->hq_cap ? 2 * j->hq_cap : 256;
		struct held *n = malloc(cap * sizeof(*n));

		if (!n)
			return pg_err(j->diag, -ENOMEM, "out of memory");
		for (size_t i = 0; i < j->hq_n; i++)
			n[i] = j->hq[(j->hq_head + i) % j->hq_cap];
		free(j->hq);
		j->hq = n;
		j->hq_cap = cap;
		j->hq_head = 0;
	}
	at = (j->hq_head + j->hq_n) % j->hq_cap;
	h = &j->hq[at];
	h->r = *r;
	h->buf = malloc(r->size + r->extra_size + 1);
	if (!h->buf)
		return pg_err(j->diag, -ENOMEM, "out of memory");
	memcpy(h->buf, r->data, r->size);
	if (r->extra_size)
		memcpy(h->buf + r->size, r->extra, r->extra_size);
	h->r.data = h->buf;
	h->r.extra = r->extra_size ? h->buf + r->size : NULL;
	h->bytes = r->size + r->extra_size + sizeof(*h);
	j->hq_n++;
	j->held_bytes += h->bytes;
	if (j->held_bytes > j->st->held_max_bytes)
		j->st->held_max_bytes = j->held_bytes;
	return 0;
}

static int output(struct inj *j, const struct pg_pd_rec *r);

/* Writes the held records that need not wait any longer; all of them
 * when all, and the oldest past the bound on what is held. */
static int drain(struct inj *j, bool all)
{
	while (j->hq_n) {
		struct held *h = &j->hq[j->hq_head];
		bool w = false;
		int ret;

		if (!all && (ret = waits(j, &h->r, &w)))
			return ret;
		if (w && j->held_bytes <= j->live_hold)
			break;
		if (w) {
			j->st->held_forced++;
			if (!j->hold_warned)
				pg_warn(j->diag, "%.1f MiB of records held back waiting for JIT dumps to be written (--live-hold): writing them as they are; their samples in code not yet in the dump are not named",
					(double)j->held_bytes / 1048576.0);
			j->hold_warned = true;
		}
		ret = output(j, &h->r);
		j->held_bytes -= h->bytes;
		free(h->buf);
		j->hq_head = (j->hq_head + 1) % j->hq_cap;
		j->hq_n--;
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- finding dumps ---- */

/* A dump is read once however the recording spells its path (/./, //,
 * symlinks, a hard link): the key is the file's device and inode, or the
 * path when it cannot be stat'ed (a missing dump is then reported once
 * per spelling, bounded by the records naming it). */
static bool seen_before(struct inj *j, const char *path)
{
	struct stat sb;
	bool added;
	char *key;
	long idx;

	if (stat(path, &sb) == 0) {
		if (asprintf(&key, "i%llx:%llx", (unsigned long long)sb.st_dev,
			     (unsigned long long)sb.st_ino) < 0)
			key = NULL;
	} else if (asprintf(&key, "p%s", path) < 0) {
		key = NULL;
	}
	if (!key)
		return true;
	idx = pg_strmap_intern(&j->seen, key, &added);
	if (idx < 0 || !added) {
		free(key);
		return true;
	}
	return false;
}

static bool by_hand(const struct inj *j, uint32_t pid)
{
	for (size_t i = 0; i < j->npids; i++)
		if (j->pids[i].pid == pid && j->pids[i].by_hand)
			return true;
	return false;
}

/* An MMAP of a jitdump (discover.c has the rule): returns true when the
 * record is a marker (it is dropped from the output), and reads the dump
 * the first time. */
static int on_marker(struct inj *j, const struct pg_pd_mmap *mm, bool *is_marker)
{
	struct pg_jd_found f;
	int ret;

	*is_marker = false;
	ret = pg_jd_discover(mm->filename, mm->pid, mm->exec, j->o->jitdump_dir, j->jdc, &f);
	if (ret < 0)
		return pg_err(j->diag, ret, "out of memory");
	if (ret == 0) {
		if (f.other_pid && !seen_before(j, f.path))
			pg_warn(j->diag, "%s is the jitdump of pid %u but was mapped by pid %u; not injected (--jitdump %s injects it for pid %u)",
				f.path, f.pid, mm->pid, f.path, f.pid);
		return 0;
	}
	*is_marker = true;
	if (by_hand(j, f.pid))
		return 0;
	if (seen_before(j, f.path))
		return 0;
	if (f.err) {
		j->st->dumps_failed++;
		note_failed(j, "%s: %s (--jitdump-dir DIR finds dumps that moved)", f.path, f.problem);
		pg_warn(j->diag, "%s: %s; the JIT code of pid %u is not injected (--jitdump-dir DIR finds dumps that moved)",
			f.path, f.problem, f.pid);
		return 0;
	}
	if (j->o->found)
		j->o->found(j->o->found_ctx, f.path, f.pid, pg_jd_how_str(f.how));
	if (j->live_in)
		return follow_dump(j, f.path, f.pid, mm->pid);
	return load_dump(j, f.path, mm->pid, false, NULL, false);
}

/* The pid of a record that has one (its own, or its sample_id's), noted
 * when --jitdump named dumps: a dump of a pid the recording has nothing
 * of is injected, but nothing will use its code (warn_unrecorded). */
static void note_recorded(struct inj *j, const struct pg_pd_rec *r)
{
	int32_t pid, tid;
	bool added = false;

	if (!pg_perfdata_own_tid(j->pd, r, &pid, &tid)) {
		if (!r->has_tid)
			return;
		pid = (int32_t)r->pid;
	}
	if (pid <= 0 || pid == j->last_recorded)	/* -1: none; 0: the kernel's */
		return;
	j->last_recorded = pid;
	if (pg_u64map_put(&j->recorded, (uint64_t)pid, &added) && added &&
	    j->nrecorded_first < sizeof(j->recorded_first) / sizeof(j->recorded_first[0]))
		j->recorded_first[j->nrecorded_first++] = (uint32_t)pid;
}

static void warn_unrecorded(struct inj *j)
{
	for (size_t i = 0; i < j->npids; i++) {
		const struct pidinfo *pi = &j->pids[i];
		char list[96] = "";
		size_t len = 0, n = pg_u64map_count(&j->recorded);

		if (!pi->by_hand || pg_u64map_get(&j->recorded, pi->pid))
			continue;
		for (size_t k = 0; k < j->nrecorded_first && len < sizeof(list); k++)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%u", k ? ", " : "",
						j->recorded_first[k]);
		if (n > j->nrecorded_first && len < sizeof(list))
			snprintf(list + len, sizeof(list) - len, " and %zu more", n - j->nrecorded_first);
		pg_warn(j->diag, "--jitdump %s: pid %u has no sample, COMM or MMAP in the recording (%s%s): its code is injected, but no sample is in it; is it the dump of another run?",
			pi->hand_path ? pi->hand_path : "?", pi->pid, n ? "its pids: " : "it has no pid",
			list);
	}
}

/* The image directory this run made: removed (when empty) on a signal. */
static long register_dir(const char *path)
{
	char *d = strdup(path), *b = strdup(path);
	long reg = -1;
	int fd;

	if (d && b) {
		fd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			reg = pg_cleanup_add(fd, basename(b), true);
			close(fd);
		}
	}
	free(d);
	free(b);
	return reg;
}

static int load_explicit(struct inj *j)
{
	int ret = 0;

	j->explicit_done = true;
	for (size_t i = 0; !ret && i < j->o->njitdumps; i++)
		if (!seen_before(j, j->o->jitdumps[i]))
			ret = load_dump(j, j->o->jitdumps[i], 0, true, NULL, false);
	return ret;
}

/* ---- maps that start before their LOAD ---- */

#define EARLY_CHECKS 64	/* recording maps over a pid's early maps, then none */

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	uint64_t ae = a + alen < a ? UINT64_MAX : a + alen;
	uint64_t be = b + blen < b ? UINT64_MAX : b + blen;

	return a < be && b < ae;
}

/* A map the recording keeps, at time t, over the range of a LOAD's map
 * that starts early (pg_code_since): perf would let it hide the JIT's
 * code from t on.  A file (a library, data: perf records no munmap, the
 * file may have stayed until the LOAD) means the range held other things:
 * such a map starts at its LOAD's time instead, one still queued moved
 * there, one already written written again there.  Anonymous memory
 * (a JIT mapping a page, then making it executable) was mapped at t and
 * the code can only have run after: a map already written is written
 * again at t, after the recording's (anon).  Past EARLY_CHECKS such maps
 * in a pid, every early map of it starts at its LOAD at once, which
 * bounds the work. */
static int cancel_early(struct inj *j, uint32_t pid, uint64_t start, uint64_t len, uint64_t t,
			bool anon)
{
	struct pidinfo *pi = pid_known(j, pid);
	bool moved = false;

	if (!pi || pi->early_lo >= pi->early_hi ||
	    !overlaps(start, len, pi->early_lo, pi->early_hi - pi->early_lo))
		return 0;
	if (++pi->early_checks > EARLY_CHECKS) {
		start = 0;
		len = UINT64_MAX;
		anon = false;
		pi->early_lo = pi->early_hi = 0;	/* none left after this */
	}
	if (!anon) {	/* the keys may change: the heap keeps them in order */
		int ret = run_to_heap(j);

		if (ret)
			return ret;
	}
	for (size_t i = 0; i < j->nheap && !anon; i++) {
		struct hkey *k = &j->heap[i];
		const struct event *e = &j->evs[SLOT_OF(*k)];
		size_t n;
		const struct pg_elf_map *m = &pg_elfset_maps(j->sets[e->set], &n)[e->map];
		uint64_t t, lt;

		if (m->pid != pid || !overlaps(m->start, m->len, start, len))
			continue;
		map_times(j, e->set, e->map, &t, &lt);
		if (k->time < lt) {
			k->time = lt;
			moved = true;
		}
	}
	for (size_t i = j->nheap / 2; moved && i-- > 0;)
		sift_down(j, i);
	for (size_t s = 0; s < j->nsets; s++) {
		size_t n;
		const struct pg_elf_map *m = pg_elfset_maps(j->sets[s], &n);

		for (size_t i = 0; i < n; i++) {
			uint64_t et, lt;
			int ret;

			if (m[i].pid != pid || !overlaps(m[i].start, m[i].len, start, len))
				continue;
			map_times(j, s, i, &et, &lt);
			if (!(et <= t && t < lt))
				continue;
			if ((ret = heap_push(j, (uint32_t)s, (uint32_t)i, anon ? t : lt)))
				return ret;
		}
	}
	return 0;
}

/* exec //anon, [anon:...], /memfd: maps hide JIT code once it is injected */
static bool anon(const struct pg_pd_mmap *mm)
{
	return !strncmp(mm->filename, "//anon", 6) || !strncmp(mm->filename, "[anon:", 6) ||
	       !strncmp(mm->filename, "/memfd:", 7);
}

static bool anon_exec(const struct pg_pd_mmap *mm)
{
	return mm->exec && anon(mm);
}

/* ---- the stacks of DWARF call graphs ---- */

/* A sample of a process whose dump waits: what its stack may hold is
 * noted, so that its images carry only the code stacks reach. */
static int note_sample(struct inj *j, const struct pg_pd_rec *r)
{
	long n = -1;
	bool is64 = false;

	for (size_t i = 0; i < j->nlater; i++) {
		struct deferred *d = &j->later[i];
		int ret;

		if (!d->set || (r->pid != d->pid && r->pid != d->mmap_pid))
			continue;
		if (n < 0 || is64 != d->is_64bit) {	/* parsed once per class */
			is64 = d->is_64bit;
			n = pg_inj_sample_words(j->pd, r, is64, &j->words, &j->words_cap);
		}
		if (n < 0)
			return pg_err(j->diag, -ENOMEM, "out of memory");
		ret = pg_elfset_note_frames(d->set, r->time, j->words, (size_t)n);
		if (ret)
			return ret;
	}
	return 0;
}

/* The dumps that waited for the samples: their images, in the order the
 * dumps were read.  On a failure the ones not yet finished stay in
 * j->later for inject()'s cleanup. */
static int finish_later(struct inj *j)
{
	for (size_t i = 0; i < j->nlater; i++) {
		struct deferred *d = &j->later[i];
		struct pidinfo *pi = pidinfo(j, d->pid);
		pg_elfset *set = d->set;
		int ret;

		if (!pi)
			return pg_err(j->diag, -ENOMEM, "out of memory");
		d->set = NULL;	/* finish_dump takes it */
		j->dd.err[0] = '\0';
		ret = finish_dump(j, set, pi, false, 0, &j->dd, NULL);
		pg_code_close(d->src);
		d->src = NULL;
		if (ret && j->dd.err[0])	/* else finish_dump said it in j->diag */
			pg_err(j->diag, ret, "%s", j->dd.err);
		if (ret)
			return ret;
	}
	j->nlater = 0;
	return 0;
}

/* ---- the walk ---- */

static int prescan(struct inj *j)
{
	struct pg_pd_rec r;
	int ret;

	while ((ret = pg_perfdata_next(j->pd, &r)) > 0) {
		struct pg_pd_mmap mm;
		bool marker;

		if ((r.type == PG_PERF_RECORD_MMAP || r.type == PG_PERF_RECORD_MMAP2) &&
		    !pg_perfdata_mmap(j->pd, &r, &mm)) {
			ret = on_marker(j, &mm, &marker);
			if (ret)
				return ret;
		} else if (r.type == PG_PERF_RECORD_SAMPLE && j->nlater && r.has_time &&
			   r.has_tid) {
			ret = note_sample(j, &r);
			if (ret)
				return ret;
		}
	}
	if (ret < 0)
		return ret;
	ret = finish_later(j);
	if (ret)
		return ret;
	return pg_perfdata_rewind(j->pd);
}

/* Writes one input record (held back or not): the injected records due
 * before it first. */
static int output(struct inj *j, const struct pg_pd_rec *r)
{
	int ret;

	if (r->type == PG_PERF_RECORD_MMAP || r->type == PG_PERF_RECORD_MMAP2) {
		struct pg_pd_mmap mm;

		if (!pg_perfdata_mmap(j->pd, r, &mm) && anon_exec(&mm)) {
			struct pidinfo *pi = pid_known(j, mm.pid);

			if (pi && r->has_time && r->time >= pi->first_load) {
				j->st->anon_dropped++;
				return 0;
			}
			/* kept: a dump read later may still need to undo it */
			if (j->live_in && r->has_time && (pi || (pi = pidinfo(j, mm.pid))) &&
			    pi->nanons < sizeof(pi->anons) / sizeof(pi->anons[0])) {
				pi->anons[pi->nanons].start = mm.start;
				pi->anons[pi->nanons].len = mm.len;
				pi->anons[pi->nanons].time = r->time;
				pi->nanons++;
			}
		}
	}
	if (r->has_time) {
		ret = flush_until(j, r->time);
		if (ret)
			return ret;
	}
	if (r->has_time && (r->type == PG_PERF_RECORD_MMAP || r->type == PG_PERF_RECORD_MMAP2)) {
		struct pg_pd_mmap mm;

		if (!pg_perfdata_mmap(j->pd, r, &mm) &&
		    (ret = cancel_early(j, mm.pid, mm.start, mm.len, r->time, anon(&mm))))
			return ret;
	}
	ret = pg_pdw_write(j->w, r->data, r->size, r->extra, r->extra_size);
	if (ret)
		return ret;
	j->st->records_out++;
	return 0;
}

/* The image directory of a run writing a stream: a new
 * ./perfgraft-jit-YYYYmmdd-HHMMSS-PID.d (".N" added when taken), made
 * here.  NULL with errno on failure. */
static char *run_dir(void)
{
	char stamp[32], *d = NULL;
	time_t now = time(NULL);
	struct tm tm;

	if (!localtime_r(&now, &tm) || !strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm))
		snprintf(stamp, sizeof(stamp), "%lld", (long long)now);
	for (unsigned n = 0; n < 1000; n++) {
		int r = n ? asprintf(&d, "perfgraft-jit-%s-%d.d.%u", stamp, (int)getpid(), n)
			  : asprintf(&d, "perfgraft-jit-%s-%d.d", stamp, (int)getpid());

		if (r < 0) {
			errno = ENOMEM;
			return NULL;
		}
		if (mkdir(d, 0755) == 0)
			return d;
		free(d);
		if (errno != EEXIST)
			return NULL;
	}
	errno = EEXIST;
	return NULL;
}

/* pg_inject() on the library's own copies of the options and the counts */
static int inject(const struct pg_inject_opts *o, struct pg_diag *diag,
		  struct pg_inject_stats *st)
{
	struct inj j = { .o = o, .diag = diag, .st = st,
			 .dd = { .warn = diag->warn, .ctx = diag->ctx },
			 .recorded = PG_U64MAP_INIT(1), .last_recorded = -1 };
	struct pg_pdw_opts wo = { .sz = sizeof(wo) };
	struct pg_pd_rec r;
	struct stat ost;
	bool made_dir = false;
	long dir_reg = -1;
	int ret;

	j.live_wait_ns = (o->live_wait_ms ? o->live_wait_ms : LIVE_WAIT_DEFAULT_MS) * 1000000ull;
	j.live_hold = o->live_hold ? o->live_hold : LIVE_HOLD_DEFAULT;
	j.jdc = pg_jd_cache_new();
	j.budget = pg_elfset_budget_new();
	if (!j.jdc || !j.budget) {
		pg_jd_cache_free(j.jdc);
		pg_elfset_budget_free(j.budget);
		return pg_err(diag, -ENOMEM, "out of memory");
	}
	ret = pg_perfdata_open(o->input, diag, &j.pd);
	if (ret) {
		pg_jd_cache_free(j.jdc);
		pg_elfset_budget_free(j.budget);
		return ret;
	}

	/* images beside the output; a stream's own in a directory of this
	 * run (not one shared by every run into the working directory) */
	if (o->image_dir)
		j.image_dir = strdup(o->image_dir);
	else if (!strcmp(o->output, "-"))
		j.image_dir = run_dir();
	else if (asprintf(&j.image_dir, "%s.d", o->output) < 0)
		j.image_dir = NULL;
	if (!j.image_dir) {
		ret = pg_err(diag, errno == ENOMEM ? -ENOMEM : -errno, "%s",
			     errno == ENOMEM ? "out of memory" : strerror(errno));
		goto out;
	}
	if (!o->image_dir && !strcmp(o->output, "-")) {	/* run_dir made it */
		made_dir = true;
		dir_reg = register_dir(j.image_dir);
	} else if (mkdir(j.image_dir, 0755) == 0) {
		made_dir = true;
		dir_reg = register_dir(j.image_dir);
	} else if (errno != EEXIST) {
		ret = pg_err(diag, -errno, "%s: %s", j.image_dir, strerror(errno));
		goto out;
	} else if (!o->image_dir && lstat(j.image_dir, &ost) == 0 && S_ISLNK(ost.st_mode)) {
		/* OUTPUT.d is the output's own: a planted link would send the
		 * images (and their removal) elsewhere */
		ret = pg_err(diag, -ELOOP, "%s: is a symbolic link; not following it (remove it, or name a directory with --image-dir)",
			     j.image_dir);
		goto out;
	}
	st->image_dir = strdup(j.image_dir);
	if (!st->image_dir) {
		ret = pg_err(diag, -ENOMEM, "out of memory");
		goto out;
	}
	j.abs_dir = realpath(j.image_dir, NULL);
	if (!j.abs_dir) {
		ret = pg_err(diag, -errno, "%s: %s", j.image_dir, strerror(errno));
		goto out;
	}
	/* a stream is read while it is written: its images must be in place
	 * before the records that name them; a file's wait for the file */
	j.pipe_out = !strcmp(o->output, "-") ||
		     (stat(o->output, &ost) == 0 && !S_ISREG(ost.st_mode));

	j.cfi_compat = o->cfi_layout == PG_CFI_LAYOUT_PERF_5_19;
	/* a recording in a pipe may be read while its JITs still write */
	j.live_in = pg_perfdata_pipe(j.pd);

	wo.pipe = pg_perfdata_pipe(j.pd) || !strcmp(o->output, "-");
	wo.big_endian = pg_perfdata_big_endian(j.pd);
	ret = pg_pdw_open(o->output, &wo, diag, &j.w);
	if (ret)
		goto out;
	j.bid_later = pg_pdw_build_ids_later(j.w, build_id_ent, &j);

	if (!pg_perfdata_pipe(j.pd)) {
		for (size_t i = 0; !ret && i < pg_perfdata_nattrs(j.pd); i++) {
			const struct pg_pd_attr *a = pg_perfdata_attr(j.pd, i);

			ret = pg_pdw_add_attr(j.w, a->raw, a->raw_size, a->ids, a->nr_ids);
		}
		for (size_t i = 0; !ret && i < pg_perfdata_nfeatures(j.pd); i++) {
			const struct pg_pd_feature *f = pg_perfdata_feature(j.pd, i);

			if (f->bit == PG_FEAT_COMPRESSED)
				continue;	/* the output holds plain records */
			ret = pg_pdw_add_feature(j.w, f->bit, f->data, f->size);
		}
		check_attrs(&j);
		/* DWARF call graphs: the images wait for the samples' stacks */
		j.defer = j.user_stacks;
		if (!ret)
			ret = load_explicit(&j);
		if (!ret)
			ret = prescan(&j);
		j.defer = false;
		if (ret)
			goto out;
	}

	while ((ret = pg_perfdata_next(j.pd, &r)) > 0) {
		bool w = false;

		st->records_in++;
		if (o->njitdumps)
			note_recorded(&j, &r);
		if (r.type == PG_PERF_RECORD_HEADER_FEATURE && r.size >= 16) {
			uint64_t bit = pg_pd_u64(j.pd, r.data + 8);

			if (bit == PG_FEAT_COMPRESSED)
				continue;	/* the output holds plain records */
		}
		if (r.type < PG_PERF_RECORD_USER_TYPE_START && pg_perfdata_pipe(j.pd) &&
		    !j.explicit_done) {
			check_attrs(&j);
			ret = load_explicit(&j);
			if (ret)
				break;
		}
		if (r.type == PG_PERF_RECORD_MMAP || r.type == PG_PERF_RECORD_MMAP2) {
			struct pg_pd_mmap mm;
			bool marker = false;

			if (!pg_perfdata_mmap(j.pd, &r, &mm)) {
				ret = on_marker(&j, &mm, &marker);
				if (ret)
					break;
				if (marker) {
					st->markers_dropped++;
					continue;
				}
			}
		}
		/* a process that exited wrote its dump whole */
		if (r.type == PG_PERF_RECORD_EXIT && j.nlives && r.size >= 24 &&
		    pg_pd_u32(j.pd, r.data + 8) == pg_pd_u32(j.pd, r.data + 16) &&
		    (ret = live_exit(&j, pg_pd_u32(j.pd, r.data + 8))))
			break;
		if (!j.hq_n && (ret = waits(&j, &r, &w)))
			break;
		if (j.hq_n || w)
			ret = hold(&j, &r);
		else
			ret = output(&j, &r);
		if (!ret)
			ret = drain(&j, false);
		if (ret)
			break;
		if (o->progress && !pg_perfdata_pipe(j.pd) && !(st->records_in & 0xffff))
			o->progress(o->progress_ctx, (double)r.offset /
					(double)(pg_perfdata_data_size(j.pd) + 1));
		j.prog_in = r.offset + r.size;
		if (!(st->records_in & 0x3ff))
			report_progress(&j, 0);
	}
	/* the whole input read: 100% (the header and the sections after
	 * the data are not in the total) */
	if (ret == 0) {
		if (!pg_perfdata_pipe(j.pd))
			j.prog_in = pg_perfdata_data_size(j.pd);
		report_progress(&j, 0);
	}
	/* the input ended: every dump is read for the last time, and what
	 * waited for them goes out */
	for (size_t i = 0; ret >= 0 && i < j.nlives; i++)
		ret = poll_live(&j, &j.lives[i], true);
	if (!ret)
		ret = drain(&j, true);
	if (!ret && st->held_forced)
		pg_warn(diag, "%llu samples were written before their JIT dump was read past them (--live-hold, --live-wait): those in code the dump had not yet described are not named",
			(unsigned long long)st->held_forced);
	if (!ret)
		ret = flush_until(&j, UINT64_MAX);
	if (!ret)
		warn_unrecorded(&j);
	/* every dump is planned: one warning for those the run's bound packed */
	if (!ret)
		pg_elfset_budget_report(j.budget, diag);
	st->cfi_compat = j.cfi_compat;
	/* The recording mapped jitdumps (or --jitdump named some) and not one
	 * of them could be injected: what was asked for is not done, as perf
	 * inject --jit fails (exit 255) on a dump it cannot use.  Before the
	 * commit, so the earlier output stays.  A recording with no JIT
	 * process at all is copied as it is (perf inject --jit exits 0). */
	if (!ret && st->dumps == 0 && st->dumps_failed)
		ret = pg_err(diag, -ENODATA, "nothing injected: %s%s", j.first_failed,
			     st->dumps_failed > 1 ? " (and every other dump was left out too: see the warnings)" : "");
	/* The output's bytes first, then the images' names, then the
	 * output's name: a run that fails or is killed before the end leaves
	 * the earlier output and its images as they were. */
	if (!ret && j.w) {
		/* the size once finished: the compression workers and the
		 * trailing sections are written only then */
		if (!(ret = pg_pdw_finish(j.w)))
			st->output_bytes = pg_pdw_bytes(j.w);
	}
	if (!ret)
		ret = commit_sets(&j);
	if (!ret && j.w) {
		sigset_t old;

		/* The images are the output's before its rename: a signal or a
		 * failure between the two leaves unreferenced images (a leak)
		 * and the earlier output, never an output without its images;
		 * and no signal is taken until the rename is done. */
		pg_block_fatal_signals(true, &old);
		pg_cleanup_del(dir_reg);
		dir_reg = -1;
		ret = pg_pdw_close(j.w);
		j.w = NULL;
		pg_block_fatal_signals(false, &old);
	}
	if (!ret)
		cache_images(&j);
out:
	/* the images were written before the output went on: one that
	 * failed is what failed first, and its message is the run's */
	if (ret && j.unsettled) {
		int r = settle(&j);

		if (r)
			ret = r;
	}
	if (j.w)
		pg_pdw_abort(j.w);
	pg_perfdata_close(j.pd);
	for (size_t i = 0; i < j.nsets; i++) {
		if (ret)	/* a failed run removes only what it created */
			pg_elfset_discard(j.sets[i]);
		pg_elfset_free(j.sets[i]);
	}
	pg_code_close(j.unsettled_src);	/* after the writes that read it */
	free(j.sets);
	free(j.setinfo);
	free(j.path);
	if (ret && made_dir)
		rmdir(j.image_dir);
	pg_cleanup_del(dir_reg);
	free(j.image_dir);
	free(j.abs_dir);
	for (size_t i = 0; i < j.nlater; i++) {
		pg_elfset_discard(j.later[i].set);
		pg_elfset_free(j.later[i].set);
		pg_code_close(j.later[i].src);
	}
	free(j.later);
	for (size_t i = 0; i < j.nlives; i++)
		free(j.lives[i].path);
	free(j.lives);
	for (size_t i = 0; i < j.hq_n; i++)
		free(j.hq[(j.hq_head + i) % j.hq_cap].buf);
	free(j.hq);
	free(j.words);
	free(j.heap);
	free(j.run);
	free(j.evs);
	free(j.freeslots);
	free(j.tabs);
	free(j.pids);
	for (size_t i = 0; i < j.seen.n; i++)
		free((char *)j.seen.keys[i]);
	pg_strmap_free(&j.seen);
	pg_u64map_free(&j.recorded);
	pg_jd_cache_free(j.jdc);
	pg_elfset_budget_free(j.budget);
	return ret;
}

int pg_inject(const struct pg_inject_opts *opts, struct pg_diag *diag,
	      struct pg_inject_stats *st)
{
	struct pg_inject_opts o;
	struct pg_inject_stats v = { .sz = sizeof(v) };
	int ret;

	ret = pg_sized_opts(&o, sizeof(o), opts, true, "inject", diag);
	if (ret == 0)
		ret = inject(&o, diag, &v);
	/* image_dir becomes the caller's only when its struct has room for it */
	if (!st || st->sz < offsetof(struct pg_inject_stats, image_dir) + sizeof(v.image_dir)) {
		free(v.image_dir);
		v.image_dir = NULL;
	}
	if (st)
		pg_sized_out(st, &v, sizeof(v));
	return ret;
}
