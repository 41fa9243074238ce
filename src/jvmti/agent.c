/* SPDX-License-Identifier: MIT */
/* libperfgraft-jvmti.so: a JVMTI agent that writes a jitdump of the JVM's
 * compiled methods and generated stubs through the library's jitdump
 * writer (src/jitwriter), with line tables and inline chains.
 *
 *   java -agentpath:/path/libperfgraft-jvmti.so[=OPTIONS] ...
 *   jcmd PID JVMTI.agent_load /path/libperfgraft-jvmti.so [OPTIONS]
 *
 * OPTIONS: comma-separated key=value: dir=PATH (default "."), names=java|jvm,
 * stubs=on|off, inline=on|off, verbose=on|off (man/perfgraft-jvmti.7).
 *
 * Records.  One LOAD per CompiledMethodLoad and per DynamicCodeGenerated
 * (interpreter, adapters, stubs), a DEBUG_INFO from the compiled method's
 * PC descriptors, an INLINE_INFO (perfgraft's extension) from the same
 * descriptors, an UNLOAD per CompiledMethodUnload of a method we announced.
 * HotSpot never moves compiled code, so no MOVE is written.
 *
 * What a PC descriptor covers.  HotSpot records a descriptor (the inlining
 * scopes and bytecode indexes) at the pc AFTER a call or safepoint poll: the
 * return address.  HotSpot's own approximate lookup (PcDescContainer's
 * match_desc, used by AsyncGetCallTrace and JFR to place a sampled pc) gives
 * a pc X the first descriptor P with prev(P) < X <= P.  We do the same: the
 * descriptor at P covers the bytes (prev, P], i.e. [prev + 1, P + 1), the
 * first one from the start of the code.  So the instructions leading up to a
 * call are the call's scope, and both a caller frame's return address P and
 * P - 1 (what unwinders that step back into the call look up) land in the
 * right scope.  perf's tools/perf/jvmti/libjvmti.c instead starts the row AT
 * the pc, which gives the code before a call the previous scope.  Code past
 * the last descriptor keeps the last row.  Descriptors outside the code
 * (HotSpot reports some in the stub section) are left out.
 *
 * Threads.  Callbacks come from many threads at once; the writer is
 * thread-safe; a read-write lock keeps Agent_OnUnload's close from running
 * under a callback (it waits at most a few seconds, then leaves the dump
 * without its CLOSE rather than stall the JVM).  Every JVMTI allocation is
 * Deallocate'd; every buffer of a callback is freed before it returns. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jvmti.h>
#include <jvmticmlr.h>

#include <perfgraft/jitwriter.h>
#include "util/util.h"

#define PFX "perfgraft-jvmti: "
#define MAX_FRAMES 1024
/* live compiled methods remembered for their UNLOAD (33 bytes each) */
#define LIVE_MAX (1u << 20)

/* ------------------------------------------------------------------ */
/* State */

static struct {
	char *dir;
	int names_jvm;
	int stubs;
	int inlines;
	int verbose;
} opt;

static jvmtiEnv *g_jvmti;
static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static pg_jitwriter *g_w;		/* under g_lock */
static atomic_int g_failed;		/* a write failed: write nothing more */
static atomic_int g_started;		/* OnLoad/OnAttach succeeded once */
static atomic_ulong n_methods, n_stubs, n_unloads, n_retries;
static int have_lines, have_files;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, PFX "%s\n", buf);
}

/* A write failed (disk full...): one message, then the agent stays quiet. */
static void fail_write(const struct pg_diag *d, int rc)
{
	if (atomic_exchange(&g_failed, 1))
		return;
	if (d->err[0])
		say("%s; no more records are written, the JVM runs on", d->err);
	else
		say("writing the dump failed (%s); no more records are written, the JVM runs on",
		    strerror(-rc));
}

/* ------------------------------------------------------------------ */
/* Live methods: code address -> (code_index, size, method), for UNLOAD,
 * bounded by LIVE_MAX entries; taken (deleted) by their unload. */

struct live {
	uint64_t index;
	uint64_t size;
	jmethodID m;
};

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pg_u64map live_map = PG_U64MAP_INIT(sizeof(struct live));

static void live_put(uint64_t addr, uint64_t size, uint64_t index, jmethodID m)
{
	struct live *e;

	pthread_mutex_lock(&live_mu);
	/* full: this one's UNLOAD is not written */
	if ((pg_u64map_count(&live_map) < LIVE_MAX || pg_u64map_get(&live_map, addr)) &&
	    (e = pg_u64map_put(&live_map, addr, NULL)))
		*e = (struct live){ index, size, m };
	pthread_mutex_unlock(&live_mu);
}

static int live_take(uint64_t addr, jmethodID m, uint64_t *index, uint64_t *size)
{
	struct live *e;
	int found = 0;

	pthread_mutex_lock(&live_mu);
	if ((e = pg_u64map_get(&live_map, addr)) && e->m == m) {
		*index = e->index;
		*size = e->size;
		pg_u64map_del(&live_map, addr);
		found = 1;
	}
	pthread_mutex_unlock(&live_mu);
	return found;
}

/* ------------------------------------------------------------------ */
/* Names */

/* Names are built in a pg_buf (util/buf.c, compiled into the agent). */
static void s_cat(struct pg_buf *s, const char *p)
{
	pg_buf_add(s, p, strlen(p));
}

/* The string built in s, NUL-terminated and the caller's (NULL when
 * memory ran out). */
static char *s_done(struct pg_buf *s)
{
	pg_buf_u8(s, 0);
	if (s->oom) {
		pg_buf_free(s);
		return NULL;
	}
	return (char *)s->p;
}

/* "com/example/Foo$Bar" (the inside of an L...; descriptor) as
 * "com.example.Foo$Bar", what Class.getName() and stack traces say.  A
 * hidden class's descriptor ends in ".0x..." where getName() has "/0x..."
 * ("java.lang.invoke.LambdaForm$MH/0x0000000800c03000"): '.' never occurs
 * in the internal form of other names, so '/' and '.' are swapped. */
static void s_dotted(struct pg_buf *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pg_buf_add(s, p[i] == '/' ? "." : p[i] == '.' ? "/" : p + i, 1);
}

/* One field type of a method descriptor at *pp, in Java form; 0 when the
 * descriptor is malformed. */
static int s_type(struct pg_buf *s, const char **pp)
{
	const char *p = *pp;
	unsigned dims = 0;
	const char *prim;

	while (*p == '[')
		dims++, p++;
	switch (*p) {
	case 'B': prim = "byte"; break;
	case 'C': prim = "char"; break;
	case 'D': prim = "double"; break;
	case 'F': prim = "float"; break;
	case 'I': prim = "int"; break;
	case 'J': prim = "long"; break;
	case 'S': prim = "short"; break;
	case 'Z': prim = "boolean"; break;
	case 'V': prim = "void"; break;
	case 'L': {
		const char *e = strchr(p, ';');

		if (!e || e == p + 1)
			return 0;
		s_dotted(s, p + 1, (size_t)(e - p - 1));
		p = e;
		prim = NULL;
		break;
	}
	default:
		return 0;
	}
	if (prim)
		s_cat(s, prim);
	p++;
	while (dims--)
		s_cat(s, "[]");
	*pp = p;
	return 1;
}

/* Java form: "com.example.Foo.bar(int, java.lang.String)"; jvm form:
 * "Lcom/example/Foo;bar(ILjava/lang/String;)V". */
static char *method_name(const char *csig, const char *name, const char *msig)
{
	struct pg_buf s = { 0 };
	size_t cn = strlen(csig);

	if (opt.names_jvm) {
		s_cat(&s, csig);
		s_cat(&s, name);
		s_cat(&s, msig);
		return s_done(&s);
	}
	if (cn >= 2 && csig[0] == 'L' && csig[cn - 1] == ';')
		s_dotted(&s, csig + 1, cn - 2);
	else
		s_dotted(&s, csig, cn);	/* not a class descriptor: as it is */
	s_cat(&s, ".");
	s_cat(&s, name);
	if (msig[0] == '(') {
		const char *p = msig + 1;
		size_t mark = s.len;

		s_cat(&s, "(");
		while (*p && *p != ')') {
			if (p != msig + 1)
				s_cat(&s, ", ");
			if (!s_type(&s, &p))
				break;
		}
		if (*p == ')') {
			s_cat(&s, ")");
			return s_done(&s);
		}
		if (!s.oom) {		/* malformed: the descriptor as it is */
			s.len = mark;
			s.p[mark] = 0;
		}
	}
	s_cat(&s, msig);
	return s_done(&s);
}

/* ------------------------------------------------------------------ */
/* What one callback learns about the methods it meets (freed at its end) */

struct minfo {
	jmethodID m;
	char *name;		/* malloc'ed, never NULL after lookup */
	char *file;		/* "com/example/Foo.java" or NULL */
	jvmtiLineNumberEntry *lt;	/* sorted by start_location; JVMTI memory */
	jint nlt;
};

struct cache {
	jvmtiEnv *jvmti;
	struct minfo *v;
	size_t n, cap;
	size_t last;
};

static void jfree(jvmtiEnv *jvmti, void *p)
{
	if (p)
		(*jvmti)->Deallocate(jvmti, p);
}

static int by_location(const void *a, const void *b)
{
	jlocation x = ((const jvmtiLineNumberEntry *)a)->start_location;
	jlocation y = ((const jvmtiLineNumberEntry *)b)->start_location;

	return x < y ? -1 : x > y;
}

static void minfo_fill(jvmtiEnv *jvmti, struct minfo *mi)
{
	char *mname = NULL, *msig = NULL, *csig = NULL, *src = NULL;
	jclass cls = NULL;

	if ((*jvmti)->GetMethodName(jvmti, mi->m, &mname, &msig, NULL) == JVMTI_ERROR_NONE &&
	    (*jvmti)->GetMethodDeclaringClass(jvmti, mi->m, &cls) == JVMTI_ERROR_NONE &&
	    (*jvmti)->GetClassSignature(jvmti, cls, &csig, NULL) == JVMTI_ERROR_NONE) {
		mi->name = method_name(csig, mname, msig);
		if (have_files &&
		    (*jvmti)->GetSourceFileName(jvmti, cls, &src) == JVMTI_ERROR_NONE && src) {
			/* the class's package path + the source file's name */
			size_t cn = strlen(csig);
			struct pg_buf s = { 0 };

			if (cn >= 2 && csig[0] == 'L') {
				const char *slash = memrchr(csig, '/', cn);

				if (slash) {
					pg_buf_add(&s, csig + 1, (size_t)(slash - csig));
				}
			}
			s_cat(&s, src);
			mi->file = s_done(&s);
		}
	} else if (mname) {
		mi->name = strdup(mname);
	}
	if (!mi->name)
		mi->name = strdup("[unknown method]");
	if (have_lines &&
	    (*jvmti)->GetLineNumberTable(jvmti, mi->m, &mi->nlt, &mi->lt) == JVMTI_ERROR_NONE) {
		if (mi->nlt > 0)
			qsort(mi->lt, (size_t)mi->nlt, sizeof(*mi->lt), by_location);
	} else {
		mi->lt = NULL;
		mi->nlt = 0;
	}
	jfree(jvmti, mname);
	jfree(jvmti, msig);
	jfree(jvmti, csig);
	jfree(jvmti, src);
	/* cls: a local reference, released when the callback returns */
}

static struct minfo *lookup(struct cache *c, jmethodID m)
{
	struct minfo *mi;

	if (!m)
		return NULL;
	if (c->n && c->v[c->last].m == m)
		return &c->v[c->last];
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].m == m) {
			c->last = i;
			return &c->v[i];
		}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct minfo *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		c->v = v;
		c->cap = cap;
	}
	mi = &c->v[c->n];
	*mi = (struct minfo){ .m = m };
	minfo_fill(c->jvmti, mi);
	if (!mi->name) {
		jfree(c->jvmti, mi->lt);
		free(mi->file);
		return NULL;
	}
	c->last = c->n++;
	return mi;
}

static void cache_free(struct cache *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].name);
		free(c->v[i].file);
		jfree(c->jvmti, c->v[i].lt);
	}
	free(c->v);
}

/* The source line of bytecode index bci: the entry with the largest
 * start_location <= bci (a negative bci, the method's entry: its first
 * line); 0 when not known. */
static uint32_t line_of(const struct minfo *mi, jint bci)
{
	size_t lo = 0, hi = (size_t)mi->nlt;

	if (!mi->nlt)
		return 0;
	if (bci < 0)
		bci = 0;
	while (lo < hi) {		/* first entry with start_location > bci */
		size_t mid = lo + (hi - lo) / 2;

		if (mi->lt[mid].start_location <= bci)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return mi->lt[0].line_number > 0 ? (uint32_t)mi->lt[0].line_number : 0;
	return mi->lt[lo - 1].line_number > 0 ? (uint32_t)mi->lt[lo - 1].line_number : 0;
}

/* ------------------------------------------------------------------ */
/* Compiled methods */

/* One PC descriptor, from the inline record or from the map. */
struct desc {
	uint64_t pc;
	uint64_t start;		/* first byte it covers (see the top comment) */
	const PCStackInfo *si;	/* NULL: from the map */
	jint bci;		/* map only */
	size_t order;
};

static int by_pc(const void *a, const void *b)
{
	const struct desc *x = a, *y = b;

	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static const jvmtiCompiledMethodLoadInlineRecord *inline_record(const void *compile_info)
{
	const jvmtiCompiledMethodLoadRecordHeader *h = compile_info;

	for (int n = 0; h && n < 64; h = h->next, n++)
		if (h->kind == JVMTI_CMLR_INLINE_INFO && h->majorinfoversion == JVMTI_CMLR_MAJOR_VERSION_1)
			return (const jvmtiCompiledMethodLoadInlineRecord *)h;
	return NULL;
}

/* Do descriptors a and b have the same inline chain (methods, and the
 * call lines of the outer frames)? */
static int same_chain(struct cache *c, const PCStackInfo *a, const PCStackInfo *b)
{
	if (a->numstackframes != b->numstackframes)
		return 0;
	for (jint i = 0; i < a->numstackframes; i++)
		if (a->methods[i] != b->methods[i])
			return 0;
	for (jint i = 1; i < a->numstackframes; i++) {
		struct minfo *mi;

		if (a->bcis[i] == b->bcis[i])
			continue;
		if (!(mi = lookup(c, a->methods[i])) || line_of(mi, a->bcis[i]) != line_of(mi, b->bcis[i]))
			return 0;
	}
	return 1;
}

static int usable(const PCStackInfo *si)
{
	return si->numstackframes >= 1 && si->methods && si->bcis && si->methods[0];
}

static void write_method(jvmtiEnv *jvmti, jmethodID method, jint code_size, const void *code_addr,
			 jint map_length, const jvmtiAddrLocationMap *map, const void *compile_info)
{
	struct cache c = { .jvmti = jvmti };
	const jvmtiCompiledMethodLoadInlineRecord *rec = inline_record(compile_info);
	const uint64_t addr = (uintptr_t)code_addr, end = addr + (uint64_t)code_size;
	struct desc *ds = NULL;
	size_t nd = 0;
	struct pg_jit_line *rows = NULL;
	size_t nrows = 0;
	struct pg_jit_inline *inl = NULL;
	struct pg_jit_frame *frames = NULL;
	size_t ninl = 0, nframes = 0;
	struct minfo *self;
	size_t self_idx;
	char *name;
	uint64_t idx;
	struct pg_diag d = { 0 };
	int rc;

	if (code_size <= 0 || !code_addr)
		return;
	if (!(self = lookup(&c, method)))
		goto out;
	/* a pointer into c.v: valid until the next lookup (realloc) */
	name = self->name;
	self_idx = (size_t)(self - c.v);

	/* the descriptors inside the code, sorted, one per pc */
	{
		/* one source for both the count and the entries: a record with
		 * no descriptors (numpcs 0) falls back to the map */
		bool use_rec = rec && rec->numpcs > 0 && rec->pcinfo;
		size_t cap = use_rec ? (size_t)rec->numpcs
			   : map && map_length > 0 ? (size_t)map_length : 0;

		if (cap && !(ds = calloc(cap, sizeof(*ds))))
			goto out;
		for (size_t i = 0; i < cap; i++) {
			uint64_t pc;

			if (use_rec) {
				if (!usable(&rec->pcinfo[i]))
					continue;
				pc = (uintptr_t)rec->pcinfo[i].pc;
				ds[nd].si = &rec->pcinfo[i];
			} else {
				pc = (uintptr_t)map[i].start_address;
				ds[nd].bci = (jint)map[i].location;
			}
			if (pc < addr || pc > end)
				continue;
			ds[nd].pc = pc;
			ds[nd].order = i;
			nd++;
		}
		qsort(ds, nd, sizeof(*ds), by_pc);
		size_t k = 0;
		for (size_t i = 0; i < nd; i++) {
			uint64_t start = k ? ds[k - 1].pc + 1 : addr;

			if (k && ds[i].pc == ds[k - 1].pc)
				continue;	/* same pc twice: the first one */
			if (start >= end)
				break;
			ds[k] = ds[i];
			ds[k].start = start;
			k++;
		}
		nd = k;
	}

	/* DEBUG_INFO: the innermost method's line at each descriptor */
	if (nd && have_lines && (rows = calloc(nd, sizeof(*rows)))) {
		int known = 0;

		for (size_t i = 0; i < nd; i++) {
			struct minfo *mi = ds[i].si ? lookup(&c, ds[i].si->methods[0])
						    : &c.v[self_idx];
			jint bci = ds[i].si ? ds[i].si->bcis[0] : ds[i].bci;
			uint32_t line;
			const char *file;

			if (!mi)
				goto out;
			line = line_of(mi, bci);
			file = mi->file ? mi->file : "??";
			known |= line || mi->file;
			if (nrows && rows[nrows - 1].line == line && !strcmp(rows[nrows - 1].file, file))
				continue;
			rows[nrows++] = (struct pg_jit_line){ .addr = ds[i].start, .line = line,
							      .file = file };
		}
		if (!known)
			nrows = 0;
	}

	/* INLINE_INFO: one range per run of descriptors with the same chain */
	if (opt.inlines && nd && ds[0].si) {
		size_t total = 0;

		for (size_t i = 0; i < nd; i++)
			if (ds[i].si->numstackframes >= 2 && ds[i].si->numstackframes <= MAX_FRAMES)
				total += (size_t)ds[i].si->numstackframes;
		if (total && (!(inl = calloc(nd, sizeof(*inl))) ||
			      !(frames = calloc(total, sizeof(*frames)))))
			goto out;
		for (size_t i = 0; total && i < nd; i++) {
			const PCStackInfo *si = ds[i].si;
			uint64_t stop = ds[i].pc + 1 < end ? ds[i].pc + 1 : end;
			struct pg_jit_frame *f = frames + nframes;
			int ok = 1;

			if (si->numstackframes < 2 || si->numstackframes > MAX_FRAMES)
				continue;
			if (ninl && i && ds[i - 1].si->numstackframes == si->numstackframes &&
			    inl[ninl - 1].addr + inl[ninl - 1].size == ds[i].start &&
			    same_chain(&c, ds[i - 1].si, si)) {
				inl[ninl - 1].size = stop - inl[ninl - 1].addr;
				continue;
			}
			for (jint j = 0; j < si->numstackframes; j++) {
				struct minfo *mi = lookup(&c, si->methods[j]);

				if (!mi) {
					ok = 0;
					break;
				}
				f[j] = (struct pg_jit_frame){ mi->name, mi->file,
							      line_of(mi, si->bcis[j]) };
			}
			if (!ok)
				continue;
			inl[ninl++] = (struct pg_jit_inline){ ds[i].start, stop - ds[i].start,
							      (uint32_t)si->numstackframes, f };
			nframes += (size_t)si->numstackframes;
		}
	}

	{
		struct pg_jit_func f = { .name = name, .addr = addr, .code_size = (uint64_t)code_size,
					 .lines = rows, .nlines = nrows };
		struct pg_jit_func_ext x = { .sz = sizeof(x), .inlines = inl, .ninlines = ninl };

		if (atomic_load(&g_failed))
			goto out;
		pthread_rwlock_rdlock(&g_lock);
		if (!g_w) {
			pthread_rwlock_unlock(&g_lock);
			goto out;
		}
		rc = pg_jitwriter_load_ext(g_w, &f, &x, &idx, &d);
		/* The ranges and rows are built to be valid; should the writer
		 * still refuse them, the method goes out with less. */
		if (rc == -EINVAL && ninl) {
			if (opt.verbose)
				say("%s; written without its inline chains", d.err);
			atomic_fetch_add(&n_retries, 1);
			rc = pg_jitwriter_load(g_w, &f, &idx, &d);
		}
		if (rc == -EINVAL && nrows) {
			if (opt.verbose)
				say("%s; written without its lines", d.err);
			atomic_fetch_add(&n_retries, 1);
			f.lines = NULL;
			f.nlines = 0;
			rc = pg_jitwriter_load(g_w, &f, &idx, &d);
		}
		pthread_rwlock_unlock(&g_lock);
		if (rc == 0) {
			atomic_fetch_add(&n_methods, 1);
			live_put(addr, (uint64_t)code_size, idx, method);
		} else if (rc == -EINVAL || rc == -ENOMEM) {
			if (opt.verbose)
				say("%s", d.err);
		} else {
			fail_write(&d, rc);
		}
	}
out:
	free(ds);
	free(rows);
	free(inl);
	free(frames);
	cache_free(&c);
}

static void JNICALL cb_load(jvmtiEnv *jvmti, jmethodID method, jint code_size,
			    const void *code_addr, jint map_length,
			    const jvmtiAddrLocationMap *map, const void *compile_info)
{
	if (atomic_load(&g_failed))
		return;
	write_method(jvmti, method, code_size, code_addr, map_length, map, compile_info);
}

static void JNICALL cb_unload(jvmtiEnv *jvmti, jmethodID method, const void *code_addr)
{
	uint64_t idx, size;
	struct pg_diag d = { 0 };
	int rc = 0;

	(void)jvmti;
	if (atomic_load(&g_failed) || !live_take((uintptr_t)code_addr, method, &idx, &size))
		return;
	pthread_rwlock_rdlock(&g_lock);
	if (g_w)
		rc = pg_jitwriter_unload(g_w, idx, (uintptr_t)code_addr, size, &d);
	pthread_rwlock_unlock(&g_lock);
	if (rc == 0)
		atomic_fetch_add(&n_unloads, 1);
	else if (rc != -EINVAL && rc != -ENOMEM)	/* this record only, as for a LOAD */
		fail_write(&d, rc);
}

static void JNICALL cb_stub(jvmtiEnv *jvmti, const char *name, const void *address, jint length)
{
	struct pg_diag d = { 0 };
	uint64_t idx;
	int rc = 0;

	(void)jvmti;
	if (!opt.stubs || atomic_load(&g_failed) || length <= 0 || !address)
		return;
	struct pg_jit_func f = { .name = name && name[0] ? name : "[stub]",
				 .addr = (uintptr_t)address, .code_size = (uint64_t)length };
	pthread_rwlock_rdlock(&g_lock);
	if (g_w)
		rc = pg_jitwriter_load(g_w, &f, &idx, &d);
	pthread_rwlock_unlock(&g_lock);
	if (rc == 0)
		atomic_fetch_add(&n_stubs, 1);
	else if (rc == -EINVAL || rc == -ENOMEM) {
		if (opt.verbose)
			say("%s", d.err);
	} else {
		fail_write(&d, rc);
	}
}

/* ------------------------------------------------------------------ */
/* Options */

static int on_off(const char *key, const char *v, int *out)
{
	if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "true"))
		*out = 1;
	else if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "false"))
		*out = 0;
	else {
		say("bad option %s=%s: the value must be on or off", key, v);
		return -1;
	}
	return 0;
}

static int parse_options(const char *options)
{
	char *copy, *save = NULL;
	int rc = 0;

	free(opt.dir);
	opt.dir = NULL;
	opt.names_jvm = 0;
	opt.stubs = 1;
	opt.inlines = 1;
	opt.verbose = 0;
	if (!options || !options[0])
		goto dflt;
	if (!(copy = strdup(options))) {
		say("out of memory");
		return -1;
	}
	for (char *item = strtok_r(copy, ",", &save); item && !rc;
	     item = strtok_r(NULL, ",", &save)) {
		char *v = strchr(item, '=');

		if (!v) {
			say("bad option \"%s\": expected key=value (keys: dir, names, stubs, inline, verbose; "
			    "jcmd takes KEY=VALUE as its own argument: quote the options, '\"dir=D,stubs=off\"')",
			    item);
			rc = -1;
			break;
		}
		*v++ = 0;
		if (!strcmp(item, "dir")) {
			if (!v[0]) {
				say("bad option dir=: an empty directory");
				rc = -1;
			} else if (!(opt.dir = (free(opt.dir), strdup(v)))) {
				say("out of memory");
				rc = -1;
			}
		} else if (!strcmp(item, "names")) {
			if (!strcmp(v, "java"))
				opt.names_jvm = 0;
			else if (!strcmp(v, "jvm"))
				opt.names_jvm = 1;
			else {
				say("bad option names=%s: java or jvm", v);
				rc = -1;
			}
		} else if (!strcmp(item, "stubs")) {
			rc = on_off(item, v, &opt.stubs);
		} else if (!strcmp(item, "inline")) {
			rc = on_off(item, v, &opt.inlines);
		} else if (!strcmp(item, "verbose")) {
			rc = on_off(item, v, &opt.verbose);
		} else {
			say("unknown option \"%s\" (keys: dir, names, stubs, inline, verbose)", item);
			rc = -1;
		}
	}
	free(copy);
	if (rc)
		return rc;
dflt:
	if (!opt.dir && !(opt.dir = strdup("."))) {
		say("out of memory");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Loading */

static int start(JavaVM *vm, const char *options, int attach)
{
	jvmtiEnv *jvmti = NULL;
	jvmtiCapabilities pot, caps;
	jvmtiEventCallbacks cb;
	struct pg_jitwriter_opts wo = { .sz = sizeof(wo) };
	struct pg_diag d = { 0 };
	pg_jitwriter *w;
	jvmtiError e;
	int rc, busy = 0;

	if (atomic_load(&g_started)) {
		/* the same library again: the first load writes the dump; as
		 * for a copy (-EBUSY below), java still starts */
		say("already loaded in this JVM; options \"%s\" ignored, the JVM runs on",
		    options ? options : "");
		return attach ? JNI_ERR : JNI_OK;
	}
	if (parse_options(options) < 0)
		return JNI_ERR;
	if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_1_2) != JNI_OK || !jvmti) {
		say("this JVM has no JVMTI 1.2 environment");
		return JNI_ERR;
	}
	memset(&pot, 0, sizeof(pot));
	memset(&caps, 0, sizeof(caps));
	if ((*jvmti)->GetPotentialCapabilities(jvmti, &pot) != JVMTI_ERROR_NONE ||
	    !pot.can_generate_compiled_method_load_events) {
		say("this JVM cannot report compiled methods (can_generate_compiled_method_load_events)");
		goto fail_env;
	}
	caps.can_generate_compiled_method_load_events = 1;
	caps.can_get_line_numbers = pot.can_get_line_numbers;
	caps.can_get_source_file_name = pot.can_get_source_file_name;
	if ((e = (*jvmti)->AddCapabilities(jvmti, &caps)) != JVMTI_ERROR_NONE) {
		say("AddCapabilities failed (JVMTI error %d)", (int)e);
		goto fail_env;
	}
	have_lines = caps.can_get_line_numbers;
	have_files = caps.can_get_source_file_name;

	wo.dir = opt.dir;
	if ((rc = pg_jitwriter_open(&wo, &d, &w)) < 0) {
		/* -EBUSY: another writer holds the dump, most likely a copy of
		 * this agent loaded from another path (its globals are its
		 * own, so g_started does not catch it).  That one keeps
		 * writing; this one writes nothing.  At startup it still
		 * returns JNI_OK so that java starts; attached, jcmd reports
		 * the refusal (the JVM runs on either way). */
		busy = rc == -EBUSY;
		say("%s%s", d.err[0] ? d.err : strerror(-rc),
		    busy ? "; this copy of the agent writes nothing, the JVM runs on" : "");
		goto fail_env;
	}
	pthread_rwlock_wrlock(&g_lock);
	g_w = w;
	pthread_rwlock_unlock(&g_lock);
	g_jvmti = jvmti;
	atomic_store(&g_failed, 0);
	if (opt.verbose)
		say("writing %s", pg_jitwriter_path(w));

	memset(&cb, 0, sizeof(cb));
	cb.CompiledMethodLoad = cb_load;
	cb.CompiledMethodUnload = cb_unload;
	cb.DynamicCodeGenerated = cb_stub;
	if ((e = (*jvmti)->SetEventCallbacks(jvmti, &cb, (jint)sizeof(cb))) != JVMTI_ERROR_NONE ||
	    (e = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE,
						     JVMTI_EVENT_COMPILED_METHOD_LOAD, NULL)) ||
	    (e = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE,
						     JVMTI_EVENT_COMPILED_METHOD_UNLOAD, NULL)) ||
	    (e = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE,
						     JVMTI_EVENT_DYNAMIC_CODE_GENERATED, NULL))) {
		say("cannot enable the JVMTI events (JVMTI error %d)", (int)e);
		goto fail_writer;
	}
	atomic_store(&g_started, 1);
	if (attach) {
		/* what was generated and compiled before we came */
		if (opt.stubs && (e = (*jvmti)->GenerateEvents(jvmti,
							  JVMTI_EVENT_DYNAMIC_CODE_GENERATED)))
			say("GenerateEvents(DYNAMIC_CODE_GENERATED) failed (JVMTI error %d)", (int)e);
		if ((e = (*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD)))
			say("GenerateEvents(COMPILED_METHOD_LOAD) failed (JVMTI error %d)", (int)e);
	}
	return JNI_OK;

fail_writer:
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_COMPILED_METHOD_LOAD, NULL);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_COMPILED_METHOD_UNLOAD, NULL);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_DYNAMIC_CODE_GENERATED, NULL);
	pthread_rwlock_wrlock(&g_lock);
	g_w = NULL;
	pthread_rwlock_unlock(&g_lock);
	/* nothing in it yet: removed while its lock is still held, so that
	 * no writer that comes next takes the file about to go */
	remove(pg_jitwriter_path(w));
	pg_jitwriter_close(w, NULL);
fail_env:
	(*jvmti)->DisposeEnvironment(jvmti);
	g_jvmti = NULL;
	return busy && !attach ? JNI_OK : JNI_ERR;
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	(void)reserved;
	return start(vm, options, 0);
}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	(void)reserved;
	return start(vm, options, 1);
}

JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *vm)
{
	struct timespec until;
	struct pg_diag d = { 0 };
	pg_jitwriter *w;
	int rc;

	(void)vm;
	/* a callback blocked in the exiting VM must not stall the exit */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	if (pthread_rwlock_timedwrlock(&g_lock, &until) != 0) {
		if (opt.verbose)
			say("a callback is still running; the dump is left without its CLOSE record");
		return;
	}
	w = g_w;
	g_w = NULL;
	pthread_rwlock_unlock(&g_lock);
	if (!w)
		return;
	if (opt.verbose)
		say("%lu compiled methods, %lu stubs, %lu unloads%s in %s", atomic_load(&n_methods),
		    atomic_load(&n_stubs), atomic_load(&n_unloads),
		    atomic_load(&n_retries) ? " (some written without their chains or lines)" : "",
		    pg_jitwriter_path(w));
	rc = pg_jitwriter_close(w, &d);
	if (rc < 0 && !atomic_load(&g_failed))
		say("%s", d.err);
}
