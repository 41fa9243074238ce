/* SPDX-License-Identifier: MIT */
/* gperftools CPU profile -> perf.data.
 *
 * One process (the profile has no pid or tid): a COMM, an MMAP2 for every
 * executable mapping of the profile's maps text (exact pgoff, prot, flags,
 * path, inode; the build-id of the file at that path when it is an ELF),
 * then cpu-clock SAMPLEs: IP = the interrupted PC, call chain = that PC and
 * the return addresses minus 1 (so a call that ends a function stays in
 * it, as pprof attributes it).  While the profile counts at most
 * max_samples ticks, one SAMPLE per tick with period = the sampling period
 * in ns, as `perf record -c` writes a fixed-period profile (what counts
 * records - perf report -n, stackcollapse scripts - then counts ticks);
 * above it, one SAMPLE per distinct stack whose period is its count times
 * the sampling period, so that the output is bounded by the distinct
 * stacks whatever the counts (a damaged count near 4e9 must not write for
 * hours).  perf's period-weighted answers (overhead, period, annotate's
 * percentages) are the same either way.  A sample's time is T0 + the
 * ticks written so far (its own included) x the period.  Frames pprof
 * drops are dropped: address 0 (the end of an unwind) and addresses above
 * user space ([vsyscall]).  With pprof_frames, the frames perl pprof removes
 * by default (see pprof_rule()) are left out as well. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <perfgraft/gperf.h>
#include <perfgraft/perfdata.h>
#include "perfdata/synth.h"
#include "perfdata/writer.h"
#include "util/util.h"

#define ROUND_EVENTS 65536
#define T0 1000000000ull		/* mappings at 1 s; samples after */
#define USER_MAX 0x7fffffffffffffffull	/* perl pprof skips frames above */
#define SAMPLE_TYPE (PG_SAMPLE_IP | PG_SAMPLE_TID | PG_SAMPLE_TIME | \
		     PG_SAMPLE_PERIOD | PG_SAMPLE_CALLCHAIN)

struct conv {
	const struct pg_gperf_opts *o;
	struct pg_diag *diag;
	struct pg_gperf_convert_stats *st;
	struct pg_gperf_stats *profile;
	pg_gperf *g;
	pg_pdw *w;
	struct pg_pdw_rounds rounds;	/* w, a FINISHED_ROUND every ROUND_EVENTS records */
	struct pg_rec rec;	/* one record (PG_REC_MAX + 1 bytes) */
	uint32_t *skip;		/* pprof_frames: per stack, frames left out after
				 * the first; NULL: none */
};

/* The path perf should open: the first --map rule whose prefix matches at
 * a component boundary, else --root prepended; pseudo paths ([vdso]) and
 * relative ones stay.  A new string. */
static char *remap(const struct pg_gperf_opts *o, const char *path)
{
	char *out = NULL;

	if (path[0] != '/')
		return strdup(path);
	for (size_t i = 0; i < o->nmaps; i++) {
		const char *from = o->maps[i].from;
		size_t n = strlen(from);

		if (n && !strncmp(path, from, n) &&
		    (path[n] == '/' || path[n] == 0 || from[n - 1] == '/'))
			return asprintf(&out, "%s%s", o->maps[i].to, path + n) < 0 ? NULL : out;
	}
	if (o->root && *o->root) {
		int n = (int)strlen(o->root);

		while (n > 0 && o->root[n - 1] == '/')	/* "DIR/" + "/usr" */
			n--;
		return asprintf(&out, "%.*s%s", n, o->root, path) < 0 ? NULL : out;
	}
	return strdup(path);
}

static bool is_lib(const char *path)
{
	const char *b = strrchr(path, '/'), *so;

	b = b ? b + 1 : path;
	so = strstr(b, ".so");
	return so && (so[3] == 0 || so[3] == '.');
}

/* The main program: the first executable mapping of a file that is not a
 * shared object or a pseudo path. */
static const char *main_path(const pg_gperf *g)
{
	for (size_t i = 0; i < pg_gperf_mapping_count(g); i++) {
		const struct pg_gperf_mapping *m = pg_gperf_mapping(g, i);

		if ((m->prot & 4) && m->path[0] == '/' && !is_lib(m->path))
			return m->path;
	}
	return NULL;
}

/* gperftools names a child's profile NAME_PID */
static uint32_t pid_from_name(const char *file)
{
	const char *u = strrchr(file, '_');
	unsigned long v;
	char *end;

	if (!u || u[1] < '1' || u[1] > '9')
		return 1;
	v = strtoul(u + 1, &end, 10);
	return *end || v > 4194304 ? 1 : (uint32_t)v;
}

static int write_header(struct conv *cv)
{
	static const uint64_t id = 1;
	const struct pg_synth_attr a = {
		.type = PG_PERF_TYPE_SOFTWARE, .config = PG_PERF_COUNT_SW_CPU_CLOCK,
		.period = cv->st->period_ns, .sample_type = SAMPLE_TYPE,
		.flags = PG_ATTR_EXCLUDE_KERNEL | PG_ATTR_EXCLUDE_HV | PG_ATTR_MMAP |
			 PG_ATTR_COMM | PG_ATTR_SAMPLE_ID_ALL | PG_ATTR_MMAP2,
		.ids = &id, .nr_ids = 1,
	};

	return pg_pdw_add_attrs(cv->w, &a, 1);
}

static int write_comm(struct conv *cv)
{
	const struct pg_synth_sample sid = { .pid = cv->st->pid, .tid = cv->st->pid, .time = T0 };

	/* the whole comm[16], not perf's 8-byte rounding: what this
	 * converter has always written */
	pg_synth_comm(&cv->rec, cv->st->pid, cv->st->pid, cv->st->comm, 16, SAMPLE_TYPE, &sid);
	if (pg_rec_end(&cv->rec) < 0)
		return pg_err(cv->diag, -EINVAL, "internal: COMM record too large");
	return pg_pdw_write(cv->w, cv->rec.p, cv->rec.len, NULL, 0);
}

static int write_mmaps(struct conv *cv)
{
	struct pg_pd_attr a = { .sample_type = SAMPLE_TYPE, .sample_id_all = true };
	struct pg_strmap files = { 0 };	/* paths looked at for a build-id */
	int ret = 0;

	for (size_t i = 0; !ret && i < pg_gperf_mapping_count(cv->g); i++) {
		const struct pg_gperf_mapping *m = pg_gperf_mapping(cv->g, i);
		char *path;
		uint8_t id[20];
		unsigned idn;
		bool added = false;

		if (!(m->prot & 4) || m->start > USER_MAX)	/* [vsyscall]: frames dropped */
			continue;
		if (!(path = remap(cv->o, m->path[0] ? m->path : "//anon")))
			return pg_err(cv->diag, -ENOMEM, "out of memory");
		struct pg_pdw_mmap2 mm = {
			.pid = cv->st->pid, .tid = cv->st->pid,
			.start = m->start, .len = m->end - m->start, .pgoff = m->offset,
			.maj = m->maj, .min = m->min, .ino = m->inode,
			.prot = m->prot, .flags = m->flags, .filename = path, .time = T0,
		};
		ret = pg_pdw_mmap2(cv->w, &a, &mm);
		cv->st->mmaps++;
		if (!ret && pg_strmap_intern(&files, path, &added) < 0)
			ret = pg_err(cv->diag, -ENOMEM, "out of memory");
		/* one build-id per file that is there and is an ELF */
		if (!ret && added && path[0] == '/' && (idn = pg_file_build_id(path, id))) {
			ret = pg_pdw_build_id(cv->w, (int32_t)cv->st->pid, PG_PERF_RECORD_MISC_USER, id, idn, path);
			cv->st->build_ids++;
		}
		if (!added)	/* the map keeps the first copy of each path */
			free(path);
	}
	for (size_t j = 0; j < files.n; j++)
		free((char *)files.keys[j]);
	pg_strmap_free(&files);
	return ret;
}

static bool drop_pc(uint64_t pc)
{
	return pc == 0 || pc > USER_MAX;
}

/* perl pprof's RemoveUninterestingFrames for CPU profiles (what
 * google-pprof does unless --no-auto-signal-frm): while every stack has
 * at least two frames and all share the same second one, that frame is
 * taken for the profiler's signal handler and removed from every stack;
 * then, in a stack still at least 3 frames long, a new second frame equal
 * to the first (an unwinder that reported the interrupted PC twice) goes
 * too.  pprof compares caller PCs minus 1, so equal raw values are equal
 * there, except a 0 caller (it wraps and never equals the first PC).  It
 * runs on every stack as read (zero and above-user-space frames included,
 * pprof drops those later), before anything else is dropped.  The removal
 * always takes the frame after the first, so a stack stays its first PC
 * followed by a tail of its PCs: skip[i] counts the frames left out.  Each
 * pass removes a frame from every stack, so the work is bounded by the PCs
 * read.  pprof then also drops frames by name (ProfileData::Add,
 * CpuProfiler::prof_handler, __restore, ...); perfgraft does not symbolize
 * and gperftools since 2.x records no handler frame, so that part is not
 * done. */
static int pprof_rule(struct conv *cv)
{
	size_t n = pg_gperf_stack_count(cv->g);

	if (!n)
		return 0;
	if (!(cv->skip = calloc(n, sizeof(*cv->skip))))
		return pg_err(cv->diag, -ENOMEM, "out of memory");
	for (;;) {
		const struct pg_gperf_stack *s0 = pg_gperf_stack(cv->g, 0);
		uint64_t second;

		if (s0->depth - cv->skip[0] < 2)
			return 0;
		second = s0->pcs[1 + cv->skip[0]];
		for (size_t i = 1; i < n; i++) {
			const struct pg_gperf_stack *s = pg_gperf_stack(cv->g, i);

			if (s->depth - cv->skip[i] < 2 || s->pcs[1 + cv->skip[i]] != second)
				return 0;
		}
		cv->st->pprof_passes++;
		for (size_t i = 0; i < n; i++) {
			const struct pg_gperf_stack *s = pg_gperf_stack(cv->g, i);
			uint32_t k = ++cv->skip[i];

			cv->st->pprof_removed += s->count;
			if (s->depth - k >= 3 && s->pcs[1 + k] == s->pcs[0] && s->pcs[0]) {
				cv->skip[i]++;
				cv->st->pprof_removed += s->count;
			}
		}
	}
}

static int write_samples(struct conv *cv)
{
	struct pg_rec *r = &cv->rec;
	uint64_t t = T0, period = cv->st->period_ns;
	size_t time_at = pg_synth_sample_offset(SAMPLE_TYPE, PG_SAMPLE_TIME);
	size_t ip_at = pg_synth_sample_offset(SAMPLE_TYPE, PG_SAMPLE_IP);
	bool weighted = cv->st->weighted;
	int ret = 0;

	for (size_t i = 0; !ret && i < pg_gperf_stack_count(cv->g); i++) {
		const struct pg_gperf_stack *s = pg_gperf_stack(cv->g, i);
		/* the caller checked that every count x period fits */
		struct pg_synth_sample smp = {
			.pid = cv->st->pid, .tid = cv->st->pid,
			.period = weighted ? s->count * period : period,
		};
		size_t nr_at, n = 0;

		pg_synth_sample_start(r, SAMPLE_TYPE, PG_PERF_RECORD_MISC_USER, &smp);
		nr_at = pg_synth_chain_start(r);
		pg_rec_u64(r, PG_PERF_CONTEXT_USER);
		for (uint32_t k = 0; k < s->depth; k++) {
			/* frames 1 .. skip[i] removed by pprof_rule() */
			if (k == 1 && cv->skip && (k += cv->skip[i]) >= s->depth)
				break;
			uint64_t pc = s->pcs[k];

			if (drop_pc(pc)) {
				cv->st->dropped_frames += s->count;
				continue;
			}
			if (!n++)	/* IP: the first frame kept */
				pg_rec_put64(r, ip_at, k ? pc - 1 : pc);
			pg_rec_u64(r, k ? pc - 1 : pc);
		}
		if (!n) {
			cv->st->dropped_samples += s->count;
			continue;
		}
		pg_synth_chain_end(r, nr_at);
		if (pg_rec_end(r) < 0)	/* cannot happen: the reader caps a stack at 1016 PCs */
			return pg_err(cv->diag, -EINVAL, "%s: offset %llu: a stack of %u PCs does not fit a perf record",
				      cv->o->profile, (unsigned long long)s->offset, s->depth);
		for (uint64_t c = 0; !ret && c < (weighted ? 1 : s->count); c++) {
			t += smp.period;
			pg_rec_put64(r, time_at, t);
			ret = pg_pdw_write_rec(&cv->rounds, r);
			cv->st->samples++;
		}
	}
	return ret ? ret : pg_pdw_round(&cv->rounds);
}

/* Chooses one SAMPLE per tick or per distinct stack and checks that the
 * periods and times fit perf's 64-bit sums. */
static int plan_samples(struct conv *cv, uint64_t period_us)
{
	const struct pg_gperf_opts *o = cv->o;
	struct pg_gperf_convert_stats *st = cv->st;
	uint64_t max = o->max_samples ? o->max_samples : PG_GPERF_DEFAULT_MAX_SAMPLES;
	uint64_t total_ns, ticks = cv->profile->samples;
	uint64_t big = cv->profile->max_count, big_at = cv->profile->max_count_at;

	if (__builtin_mul_overflow(period_us, 1000, &st->period_ns))
		return pg_err(cv->diag, -EINVAL, "%s: offset %u: a sampling period of %llu us does not fit perf's 64-bit nanoseconds: a damaged header?",
			      o->profile, 3 * pg_gperf_header(cv->g)->word_bits / 8,
			      (unsigned long long)period_us);
	/* perf sums the periods and orders the times in 64 bits: 584 years
	 * of ticks in all is damage, not a profile */
	if (__builtin_mul_overflow(ticks, st->period_ns, &total_ns) ||
	    total_ns > UINT64_MAX - T0)
		return pg_err(cv->diag, -EFBIG, "%s: offset %llu: a count of %llu makes %llu ticks of %llu ns in all, more than perf's 64-bit sums of periods and times hold: a damaged count?",
			      o->profile, (unsigned long long)big_at, (unsigned long long)big,
			      (unsigned long long)ticks, (unsigned long long)st->period_ns);
	st->weighted = o->weighted || ticks > max;
	if (st->weighted && !o->weighted)
		pg_warn(cv->diag, "%s: %llu ticks, more than --max-samples %llu: written as one sample per distinct stack (%zu) whose period is its ticks x %llu ns (largest record count %llu, offset %llu%s); perf report's overhead and period and perf annotate's percentages stay pprof's counts, perf report -n and sample-counting scripts (stackcollapse) count stacks",
			o->profile, (unsigned long long)ticks, (unsigned long long)max,
			pg_gperf_stack_count(cv->g), (unsigned long long)st->period_ns,
			(unsigned long long)big, (unsigned long long)big_at,
			big > max ? ": a damaged count?" : "");
	return 0;
}

/* pg_gperf_convert() on the library's own copies of the options and the
 * counts */
static int convert(const struct pg_gperf_opts *o, struct pg_diag *diag,
		   struct pg_gperf_convert_stats *st, struct pg_gperf_stats *profile)
{
	struct conv cv = { .o = o, .diag = diag, .st = st, .profile = profile };
	struct pg_pdw_opts wo = { .sz = sizeof(wo), .pipe = o->pipe,
				  .compress_level = o->compress_level };
	const struct pg_gperf_header *h;
	const char *mp, *slash;
	int ret;

	if ((ret = pg_gperf_open(o->profile, diag, &cv.g)) < 0)
		return ret;
	h = pg_gperf_header(cv.g);
	pg_gperf_stats(cv.g, profile);
	st->stacks = pg_gperf_stack_count(cv.g);
	st->pid = o->pid >= 0 ? (uint32_t)o->pid : pid_from_name(o->profile);
	mp = main_path(cv.g);
	if (o->comm)
		snprintf(st->comm, sizeof(st->comm), "%s", o->comm);
	else if (mp)
		snprintf(st->comm, sizeof(st->comm), "%s", (slash = strrchr(mp, '/')) ? slash + 1 : mp);
	else
		snprintf(st->comm, sizeof(st->comm), "gperf");
	if ((ret = plan_samples(&cv, h->period_us ? h->period_us : PG_GPERF_DEFAULT_PERIOD_US)) < 0)
		goto out;
	if (o->pprof_frames && (ret = pprof_rule(&cv)) < 0)
		goto out;
	if (profile->samples && !pg_gperf_mapping_count(cv.g))
		pg_warn(diag, "%s: no mapped objects: perf will show every address as unknown",
			o->profile);
	if (!(cv.rec.p = malloc(PG_REC_MAX + 1))) {
		ret = pg_err(diag, -ENOMEM, "out of memory");
		goto out;
	}
	cv.rec.cap = PG_REC_MAX + 1;
	cv.rec.big_endian = wo.big_endian;
	if ((ret = pg_pdw_open(o->output, &wo, diag, &cv.w)) < 0)
		goto out;
	cv.rounds = (struct pg_pdw_rounds){ .w = cv.w, .every = ROUND_EVENTS };
	if ((ret = write_header(&cv)) < 0 || (ret = write_comm(&cv)) < 0 ||
	    (ret = write_mmaps(&cv)) < 0 || (ret = write_samples(&cv)) < 0) {
		pg_pdw_abort(cv.w);
		goto out;
	}
	/* the size once every section is written (pg_pdw_bytes lags
	 * behind the compression workers until then) */
	if (!(ret = pg_pdw_finish(cv.w)))
		st->out_bytes = pg_pdw_bytes(cv.w);
	ret = pg_pdw_close(cv.w);
out:
	free(cv.skip);
	free(cv.rec.p);
	pg_gperf_close(cv.g);
	return ret;
}

int pg_gperf_convert(const struct pg_gperf_opts *opts, struct pg_diag *diag,
		     struct pg_gperf_convert_stats *st)
{
	struct pg_gperf_opts o;
	struct pg_gperf_convert_stats v = { .sz = sizeof(v) };
	struct pg_gperf_stats profile = { .sz = sizeof(profile) };
	int ret;

	ret = pg_sized_opts(&o, sizeof(o), opts, true, "gperf conversion", diag);
	if (ret == 0)
		ret = convert(&o, diag, &v, &profile);
	if (st) {
		struct pg_gperf_stats *p = st->sz >= offsetof(struct pg_gperf_convert_stats, profile) +
						     sizeof(st->profile) ? st->profile : NULL;

		if (p)
			pg_sized_out(p, &profile, sizeof(profile));
		v.profile = p;
		pg_sized_out(st, &v, sizeof(v));
	}
	return ret;
}
