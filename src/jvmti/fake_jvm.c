/* SPDX-License-Identifier: MIT */
/* jvmti_fake: the agent's callbacks driven by a fake JVMTI environment with
 * hostile compile info (pcs outside the code and repeated, 0 or 1100
 * frames, NULL methods, negative bcis, hundreds of methods per nmethod,
 * missing source files and line tables, unsorted line tables), so that a
 * sanitizer build checks the agent's memory handling without a JVM.
 * Checks: the writer never refused a method (-EINVAL: the agent's rows and
 * ranges are valid), every JVMTI allocation was Deallocate'd, the LOADs
 * and UNLOADs are counted.  Exit 0 on success. */
#include "agent.c"

#include <dirent.h>
#include <unistd.h>

static long outstanding;

static jvmtiError JNICALL f_alloc(size_t n, unsigned char **p)
{
	*p = malloc(n ? n : 1);
	outstanding++;
	return JVMTI_ERROR_NONE;
}

static jvmtiError JNICALL f_Deallocate(jvmtiEnv *env, unsigned char *p)
{
	(void)env;
	free(p);
	outstanding--;
	return JVMTI_ERROR_NONE;
}

static char *f_str(const char *s)
{
	unsigned char *p;

	f_alloc(strlen(s) + 1, &p);
	return strcpy((char *)p, s);
}

static unsigned mid(jmethodID m)
{
	return (unsigned)((uintptr_t)m / 16 - 1);
}

static jvmtiError JNICALL f_GetMethodName(jvmtiEnv *env, jmethodID m, char **name, char **sig,
					  char **gen)
{
	char buf[64];

	(void)env;
	if (mid(m) % 97 == 96)
		return JVMTI_ERROR_INVALID_METHODID;
	snprintf(buf, sizeof(buf), "m%u", mid(m));
	if (name)
		*name = f_str(buf);
	if (sig)
		*sig = f_str(mid(m) % 11 == 3 ? "(I[[Ljava/lang/String;JLbroken" :
			     "(I[[Ljava/lang/String;J[Z)V");
	if (gen)
		*gen = NULL;
	return JVMTI_ERROR_NONE;
}

static jvmtiError JNICALL f_GetMethodDeclaringClass(jvmtiEnv *env, jmethodID m, jclass *c)
{
	(void)env;
	*c = (jclass)(uintptr_t)(mid(m) % 7 + 1);
	return JVMTI_ERROR_NONE;
}

static jvmtiError JNICALL f_GetClassSignature(jvmtiEnv *env, jclass c, char **sig, char **gen)
{
	char buf[64];
	unsigned k = (unsigned)(uintptr_t)c;

	(void)env;
	if (k == 1)
		snprintf(buf, sizeof(buf), "LTop;");
	else if (k == 2)
		snprintf(buf, sizeof(buf), "Lp/q/Hidden$$Lambda$1.0x0000000800c03000;");
	else
		snprintf(buf, sizeof(buf), "Lcom/example/C%u$In;", k);
	*sig = f_str(buf);
	if (gen)
		*gen = NULL;
	return JVMTI_ERROR_NONE;
}

static jvmtiError JNICALL f_GetSourceFileName(jvmtiEnv *env, jclass c, char **name)
{
	(void)env;
	if ((uintptr_t)c == 5)
		return JVMTI_ERROR_ABSENT_INFORMATION;
	*name = f_str("C.java");
	return JVMTI_ERROR_NONE;
}

static jvmtiError JNICALL f_GetLineNumberTable(jvmtiEnv *env, jmethodID m, jint *n,
					       jvmtiLineNumberEntry **t)
{
	unsigned k = mid(m);
	unsigned char *p;

	(void)env;
	if (k % 3 == 0)
		return JVMTI_ERROR_ABSENT_INFORMATION;
	*n = k % 4;		/* 0..3 entries, unsorted */
	f_alloc(sizeof(**t) * 3, &p);
	*t = (jvmtiLineNumberEntry *)p;
	(*t)[0] = (jvmtiLineNumberEntry){ 10, (jint)k + 3 };
	(*t)[1] = (jvmtiLineNumberEntry){ 0, (jint)k + 1 };
	(*t)[2] = (jvmtiLineNumberEntry){ 5, (jint)k + 2 };
	return JVMTI_ERROR_NONE;
}

static unsigned rnd_state = 12345;

static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 8) % n;
}

static jmethodID meth(unsigned k)
{
	return (jmethodID)(uintptr_t)((k + 1) * 16);
}

static unsigned char code[8192];

int main(void)
{
	struct jvmtiInterface_1_ fn;
	const struct jvmtiInterface_1_ *fnp = &fn;
	jvmtiEnv *env = &fnp;
	char dir[] = "/tmp/perfgraft-jvmti-fake.XXXXXX";
	char opts[128];
	int rc = 0;
	unsigned loads = 0;

	memset(&fn, 0, sizeof(fn));
	fn.Deallocate = f_Deallocate;
	fn.GetMethodName = f_GetMethodName;
	fn.GetMethodDeclaringClass = f_GetMethodDeclaringClass;
	fn.GetClassSignature = f_GetClassSignature;
	fn.GetSourceFileName = f_GetSourceFileName;
	fn.GetLineNumberTable = f_GetLineNumberTable;
	if (!mkdtemp(dir))
		return 1;
	snprintf(opts, sizeof(opts), "dir=%s,verbose=on", dir);
	if (parse_options(opts) < 0)
		return 1;
	{
		struct pg_jitwriter_opts wo = { .sz = sizeof(wo), .dir = opt.dir };
		struct pg_diag d = { 0 };

		if (pg_jitwriter_open(&wo, &d, &g_w) < 0) {
			fprintf(stderr, "%s\n", d.err);
			return 1;
		}
	}
	have_lines = have_files = 1;

	for (unsigned it = 0; it < 300; it++) {
		uint64_t size = 64 + rnd(4000);
		const unsigned char *base = code + 16 * (1 + rnd(200));
		jint npcs = (jint)rnd(1500);
		PCStackInfo *pcs = calloc((size_t)npcs + 1, sizeof(*pcs));
		jmethodID self = meth(rnd(400));
		jvmtiCompiledMethodLoadDummyRecord dummy = { { JVMTI_CMLR_DUMMY, 1, 0, NULL }, "x" };
		jvmtiCompiledMethodLoadInlineRecord rec = {
			{ JVMTI_CMLR_INLINE_INFO, JVMTI_CMLR_MAJOR_VERSION_1, 0, NULL }, npcs, pcs };
		jvmtiAddrLocationMap map[8];

		dummy.header.next = &rec.header;
		for (jint i = 0; i < npcs; i++) {
			jint nf = rnd(50) == 0 ? 1100 : (jint)rnd(6);
			/* mostly increasing, some repeated, some outside */
			uint64_t off = rnd(10) == 0 ? rnd((unsigned)size + 64) : (uint64_t)i * size / (uint64_t)npcs;

			pcs[i].pc = (void *)((uintptr_t)base + off - (rnd(40) == 0 ? 32 : 0));
			pcs[i].numstackframes = nf;
			pcs[i].methods = nf ? calloc((size_t)nf, sizeof(jmethodID)) : NULL;
			pcs[i].bcis = nf ? calloc((size_t)nf, sizeof(jint)) : NULL;
			for (jint j = 0; j < nf; j++) {
				/* runs of equal chains, so that ranges merge */
				pcs[i].methods[j] = j == nf - 1 ? self : meth((i / 7 + (unsigned)j * 31) % 400);
				pcs[i].bcis[j] = rnd(20) == 0 ? -1 : (jint)((i / 5) % 16);
			}
			if (nf && rnd(100) == 0)
				pcs[i].methods[rnd((unsigned)nf)] = NULL;
		}
		for (int i = 0; i < 8; i++)
			map[i] = (jvmtiAddrLocationMap){ (void *)((uintptr_t)base + rnd((unsigned)size + 8)),
							 (jlocation)rnd(12) };
		if (it % 5 == 4)	/* C1 without an inline record: the map */
			cb_load(env, self, (jint)size, base, 8, map, NULL);
		else if (it % 7 == 6) {
			/* an inline record with no descriptors but an array (HotSpot
			 * makes such), beside a map: the map is used, the one-entry
			 * array never read past */
			PCStackInfo *one = calloc(1, sizeof(*one));
			jvmtiCompiledMethodLoadInlineRecord none = {
				{ JVMTI_CMLR_INLINE_INFO, JVMTI_CMLR_MAJOR_VERSION_1, 0, NULL }, 0, one };

			cb_load(env, self, (jint)size, base, 8, map, &none);
			free(one);
		} else
			cb_load(env, self, (jint)size, base, 0, NULL, it % 2 ? &dummy : (void *)&rec);
		loads++;
		if (it % 3 == 0)
			cb_unload(env, self, base);
		cb_stub(env, "StubRoutines (1)", base, (jint)size);
		for (jint i = 0; i < npcs; i++) {
			free(pcs[i].methods);
			free(pcs[i].bcis);
		}
		free(pcs);
	}
	if (atomic_load(&n_retries) || atomic_load(&n_methods) != loads || atomic_load(&g_failed)) {
		fprintf(stderr, "jvmti_fake: %lu retries, %lu of %u methods written, failed %d\n",
			atomic_load(&n_retries), atomic_load(&n_methods), loads, atomic_load(&g_failed));
		rc = 1;
	}
	if (!atomic_load(&n_unloads) || atomic_load(&n_stubs) != loads) {
		fprintf(stderr, "jvmti_fake: %lu unloads, %lu stubs\n", atomic_load(&n_unloads),
			atomic_load(&n_stubs));
		rc = 1;
	}
	if (outstanding) {
		fprintf(stderr, "jvmti_fake: %ld JVMTI allocations not deallocated\n", outstanding);
		rc = 1;
	}
	Agent_OnUnload(NULL);
	free(opt.dir);
	pg_u64map_free(&live_map);
	if (getenv("JVMTI_FAKE_KEEP"))		/* to look at the dump */
		printf("jvmti_fake: dump kept in %s\n", dir);
	else {
		DIR *dd = opendir(dir);
		struct dirent *e;
		char p[PATH_MAX];

		while (dd && (e = readdir(dd)))
			if (e->d_name[0] != '.') {
				snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
				unlink(p);
			}
		if (dd)
			closedir(dd);
		rmdir(dir);
	}
	if (!rc)
		printf("jvmti_fake: %u methods, %lu unloads: ok\n", loads, atomic_load(&n_unloads));
	return rc;
}
