/* SPDX-License-Identifier: MIT */
/* Unwinds the user stacks of a `perf record --call-graph dwarf` recording
 * the way perf's libdw unwinder does (tools/perf/util/unwind-libdw.c, the
 * default unwinder of perf >= 6.13), so that image layouts can be tested
 * against it on a machine whose perf uses libunwind.
 *
 * Followed: unwind-libdw.c as of Linux v6.13..v6.16 (after Namhyung Kim's
 * "perf unwind-libdw: Handle JIT-generated DSOs properly", Dec 2023, the
 * is_regular_file() check and the frame_callback that reports the module
 * of a pc before asking dwfl_frame_pc() for isactivation).  This is a
 * re-implementation from reading that file, not a copy; where it differs
 * from perf it says so below.
 *
 * Per sample, as perf does:
 *   - a fresh Dwfl (dwfl_begin) with perf's offline callbacks: no find_elf
 *     (modules are reported with dwfl_report_elf), a find_debuginfo that
 *     finds nothing (perf's only points libdw at a symsrc file perf found
 *     elsewhere: none here, perf's build-id cache is not used), and
 *     dwfl_offline_section_address;
 *   - report_module(ip): the map of ip among the maps of the sample's pid
 *     (MMAP/MMAP2 records in time order, a newer map replacing the part of
 *     older ones it overlaps, as perf's maps__fixup_overlappings does);
 *     base = map.start - map.pgoff, or map.start for a file whose path
 *     starts with "/tmp/jitted-"; a module dwfl_addrmodule(ip) returns is
 *     kept only when its base (dwfl_module_info's start) equals that base,
 *     else the file (when it is a regular file) is reported with
 *     dwfl_report_elf(dwfl, basename, path, -1, base, false); the frame
 *     then fails unless dwfl_addrmodule(ip) is the module in hand.  An ip
 *     in no map passes (perf: no dso, return 0).  Not done: perf's second
 *     try through its build-id cache (dso__build_id_filename);
 *   - a sample without user registers, or whose user stack copy is empty
 *     (dyn_size 0), gets no user chain (perf: "Bail out if nothing was
 *     captured", before either unwinder);
 *   - the initial registers are the sample's PERF_SAMPLE_REGS_USER mapped
 *     from perf's x86-64 register order to DWARF numbers (perf's
 *     arch/x86/util/unwind-libdw.c: 17 registers, rip as DWARF 16);
 *   - memory reads inside [sp, sp + dyn_size) come from the sample's
 *     PERF_SAMPLE_STACK_USER copy, outside from the mapped file at
 *     addr - map.start + map.pgoff (perf's dso__data_read_addr);
 *   - dwfl_attach_state(EM_NONE) after reporting the module of the sample
 *     ip (a failure there gives no chain), dwfl_getthread_frames(), and
 *     per frame: report_module(pc) with its result ignored, then
 *     dwfl_frame_pc(&isactivation), pc - 1 for a non-activation frame, and
 *     the entry: report_module(pc) again, which ends the walk when it
 *     fails; at most max_stack frames (perf script: 127);
 *   - perf keeps the frames before a failure when at least one frame was
 *     taken (err && max_stack changed -> 0) and drops the whole chain
 *     otherwise; so does this tool (the status line says why).
 * libdw's own frame-pointer fallback (elfutils >= 0.169 on x86-64, used
 * when a pc has no module or no CFI) applies as it would under perf.
 *
 * Output, one line per sample with user registers and stack, in file
 * order:
 *     PID/TID SEC.NSEC: IP IP ... | STATUS
 * IPs in hex without 0x, innermost first; with --symbols each is
 * IP@NAME, the name from dwfl_module_addrname() with '%', ' ' and '|'
 * written as %25, %20 and %7c ('?' when it has none).  STATUS is
 *     ok                 libdw reached the outermost frame
 *     max-stack          max_stack frames taken
 *     end: MSG           libdw could not unwind further (chain kept)
 *     module: MSG        perf's report_module check failed at a frame
 *                        (chain kept up to the frame before)
 *     error: MSG         no chain at all (perf prints none either)
 * --perf-ip prints the ips as perf script -F ip prints a callchain: an ip
 * in a file map as its map-relative address ip - start + pgoff (with the
 * maps of the sample's time), else as is.
 *
 * usage: libdw_unwind [--symbols] [--perf-ip] [--max-stack N] PERF.DATA */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdwfl.h>

#include <perfgraft/perfdata.h>

/* sample_type bits beyond the ones perfdata.h names */
#define S_READ (1u << 4)
#define S_BRANCH_STACK (1u << 11)
#define S_REGS_USER (1u << 12)
#define S_STACK_USER (1u << 13)
/* read_format bits */
#define RF_TOTAL_TIME_ENABLED 1u
#define RF_TOTAL_TIME_RUNNING 2u
#define RF_ID 4u
#define RF_GROUP 8u
#define RF_LOST 16u
#define BRANCH_HW_INDEX (1ull << 17)
#define PERF_RECORD_FORK 7

/* perf's x86 register numbers (arch/x86/include/uapi/asm/perf_regs.h) */
enum { R_AX, R_BX, R_CX, R_DX, R_SI, R_DI, R_BP, R_SP, R_IP, R_FLAGS,
       R_CS, R_SS, R_DS, R_ES, R_FS, R_GS, R_R8, R_R9, R_R10, R_R11,
       R_R12, R_R13, R_R14, R_R15, R_NUM };

/* DWARF register n of x86-64 is perf register dwarf_of[n] */
static const int dwarf_of[17] = {
	R_AX, R_DX, R_CX, R_BX, R_SI, R_DI, R_BP, R_SP,
	R_R8, R_R9, R_R10, R_R11, R_R12, R_R13, R_R14, R_R15, R_IP,
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("libdw_unwind: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory");
	return p;
}

/* ---- maps ---- */

struct map {
	uint64_t start, end, pgoff;
	const char *path;	/* owned by the event list */
};

struct proc {
	uint32_t pid;
	struct map *maps;	/* sorted by start, not overlapping */
	size_t n, cap;
};

struct mev {			/* an MMAP/MMAP2 (or FORK) of the input */
	uint64_t time, seq;
	uint32_t type, pid, ppid;
	uint64_t start, len, pgoff;
	char *path;
};

static struct proc *procs;
static size_t nprocs;

static struct proc *proc_get(uint32_t pid, bool create)
{
	for (size_t i = 0; i < nprocs; i++)
		if (procs[i].pid == pid)
			return &procs[i];
	if (!create)
		return NULL;
	procs = xrealloc(procs, (nprocs + 1) * sizeof(*procs));
	procs[nprocs] = (struct proc){ .pid = pid };
	return &procs[nprocs++];
}

static void procs_reset(void)
{
	for (size_t i = 0; i < nprocs; i++)
		free(procs[i].maps);
	free(procs);
	procs = NULL;
	nprocs = 0;
}

static void map_put(struct proc *p, const struct map *m)
{
	if (p->n + 3 > p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->maps = xrealloc(p->maps, p->cap * sizeof(*p->maps));
	}
	size_t i = p->n;
	while (i > 0 && p->maps[i - 1].start > m->start)
		i--;
	memmove(&p->maps[i + 1], &p->maps[i], (p->n - i) * sizeof(*p->maps));
	p->maps[i] = *m;
	p->n++;
}

/* perf's maps__fixup_overlappings + insert: the parts of older maps that
 * the new one covers go, the rest stay (a right part keeps
 * start - pgoff). */
static void map_insert(struct proc *p, uint64_t start, uint64_t len,
		       uint64_t pgoff, const char *path)
{
	uint64_t end = start + len;
	struct map keep[2];
	size_t nkeep = 0;

	for (size_t i = 0; i < p->n;) {
		struct map *o = &p->maps[i];
		if (o->end <= start || o->start >= end) {
			i++;
			continue;
		}
		struct map old = *o;
		memmove(o, o + 1, (p->n - i - 1) * sizeof(*o));
		p->n--;
		if (old.start < start && nkeep < 2) {
			keep[nkeep] = old;
			keep[nkeep++].end = start;
		}
		if (old.end > end && nkeep < 2) {
			keep[nkeep] = old;
			keep[nkeep].start = end;
			keep[nkeep++].pgoff = old.pgoff + (end - old.start);
		}
		for (size_t k = 0; k < nkeep; k++)
			map_put(p, &keep[k]);
		nkeep = 0;
		i = 0;	/* restart: the array moved */
		/* the kept pieces do not overlap [start, end): skipped */
	}
	struct map m = { start, end, pgoff, path };
	map_put(p, &m);
}

static const struct map *map_find(const struct proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p ? p->n : 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (p && lo < p->n && p->maps[lo].start <= addr && addr < p->maps[lo].end)
		return &p->maps[lo];
	return NULL;
}

static void mev_apply(const struct mev *e)
{
	if (e->type == PERF_RECORD_FORK) {
		/* a new process starts with a copy of its parent's maps */
		size_t ci = (size_t)(proc_get(e->pid, true) - procs);
		struct proc *par = proc_get(e->ppid, false);	/* no realloc */

		if (par == &procs[ci])
			return;
		procs[ci].n = 0;
		for (size_t i = 0; par && i < par->n; i++)
			map_put(&procs[ci], &par->maps[i]);
		return;
	}
	map_insert(proc_get(e->pid, true), e->start, e->len, e->pgoff, e->path);
}

/* ---- files read for memory outside the stack copy ---- */

struct file {
	char *path;
	int fd;			/* -1: not a readable regular file */
};

static struct file *files;
static size_t nfiles;

static bool is_regular(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int file_fd(const char *path)
{
	for (size_t i = 0; i < nfiles; i++)
		if (!strcmp(files[i].path, path))
			return files[i].fd;
	files = xrealloc(files, (nfiles + 1) * sizeof(*files));
	files[nfiles].path = strdup(path);
	if (!files[nfiles].path)
		die("out of memory");
	files[nfiles].fd = is_regular(path) ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	return files[nfiles++].fd;
}

/* ---- one sample ---- */

struct sample {
	uint32_t pid, tid;
	uint64_t time;
	uint64_t abi;
	uint64_t regs[R_NUM];
	bool have[R_NUM];
	const uint8_t *stack;
	uint64_t stack_size;	/* dyn_size, as perf uses it */
};

struct unwind {
	const struct sample *s;
	const struct proc *p;
	Dwfl *dwfl;
	int max_stack, left;
	size_t n;
	uint64_t *ips;
	char **names;
	bool symbols, rel;
	char why[512];		/* why report_module failed, or why the walk ended */
	bool module_failed;
};

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  Dwarf_Addr base, const char *file_name,
			  const char *debuglink_file, GElf_Word debuglink_crc,
			  char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static char *debuginfo_path;

static const Dwfl_Callbacks offline_callbacks = {
	.find_debuginfo = find_debuginfo,
	.debuginfo_path = &debuginfo_path,
	.section_address = dwfl_offline_section_address,
};

/* perf's __report_module (v6.13..v6.16):
 *	base = !strncmp(long_name, "/tmp/jitted-", 12) ? map.start
 *						       : map.start - map.pgoff;
 *	mod = dwfl_addrmodule(dwfl, ip);  if (mod && its start != base) mod = NULL;
 *	if (!mod && is_regular_file(path)) mod = dwfl_report_elf(..., base, false);
 *	(if (!mod) try the build-id cache file: not done here)
 *	return mod && dwfl_addrmodule(dwfl, ip) == mod ? 0 : -1;
 * and no map (no dso) is 0. */
static int report_module(struct unwind *u, uint64_t ip, Dwfl_Module **out)
{
	const struct map *m = map_find(u->p, ip);
	Dwfl_Module *mod, *now;
	Dwarf_Addr base, s;

	if (out)
		*out = NULL;
	if (!m)
		return 0;
	base = strncmp(m->path, "/tmp/jitted-", 12) ? m->start - m->pgoff : m->start;
	mod = dwfl_addrmodule(u->dwfl, ip);
	if (mod) {
		dwfl_module_info(mod, NULL, &s, NULL, NULL, NULL, NULL, NULL);
		if (s != base)
			mod = NULL;
	}
	if (!mod && is_regular(m->path)) {
		const char *sl = strrchr(m->path, '/');
		mod = dwfl_report_elf(u->dwfl, sl ? sl + 1 : m->path, m->path, -1,
				      base, false);
		if (!mod) {
			snprintf(u->why, sizeof(u->why), "%" PRIx64 " %s: dwfl_report_elf: %s",
				 ip, m->path, dwfl_errmsg(-1));
			return -1;
		}
	}
	if (!mod) {
		snprintf(u->why, sizeof(u->why), "%" PRIx64 " %s: not a regular file",
			 ip, m->path);
		return -1;
	}
	now = dwfl_addrmodule(u->dwfl, ip);
	if (now != mod) {
		const char *name = now ? dwfl_module_info(now, NULL, &s, NULL, NULL,
							  NULL, NULL, NULL) : NULL;
		if (now)
			snprintf(u->why, sizeof(u->why),
				 "%" PRIx64 " %s base %" PRIx64 ": dwfl_addrmodule gives %s base %"
				 PRIx64, ip, m->path, base, name ? name : "?", s);
		else
			snprintf(u->why, sizeof(u->why),
				 "%" PRIx64 " %s base %" PRIx64 ": dwfl_addrmodule gives no module",
				 ip, m->path, base);
		return -1;
	}
	if (out)
		*out = mod;
	return 0;
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	if (*thread_argp)
		return 0;
	*thread_argp = arg;
	return dwfl_pid(dwfl);
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unwind *u = arg;
	const struct sample *s = u->s;
	uint64_t start, end;

	(void)dwfl;
	if (!s->have[R_SP])
		return false;
	start = s->regs[R_SP];
	end = start + s->stack_size;
	if (addr + sizeof(Dwarf_Word) < addr)
		return false;
	if (addr < start || addr + sizeof(Dwarf_Word) > end) {
		/* perf's access_dso_mem: the bytes of the mapped file */
		const struct map *m = map_find(u->p, addr);
		int fd;

		if (!m)
			return false;
		fd = file_fd(m->path);
		if (fd < 0)
			return false;
		return pread(fd, result, sizeof(*result),
			     (off_t)(addr - m->start + m->pgoff)) == (ssize_t)sizeof(*result);
	}
	memcpy(result, s->stack + (addr - start), sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct unwind *u = arg;
	Dwarf_Word regs[17];

	for (int i = 0; i < 17; i++)
		regs[i] = u->s->regs[dwarf_of[i]];
	return dwfl_thread_state_registers(thread, 0, 17, regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

static char *encode_name(const char *name)
{
	size_t n = 0;
	char *out, *o;

	if (!name)
		name = "?";
	for (const char *p = name; *p; p++)
		n += (*p == '%' || *p == ' ' || *p == '|') ? 3 : 1;
	out = o = xrealloc(NULL, n + 1);
	for (const char *p = name; *p; p++) {
		if (*p == '%' || *p == ' ' || *p == '|')
			o += sprintf(o, "%%%02x", (unsigned char)*p);
		else
			*o++ = *p;
	}
	*o = 0;
	return out;
}

static int frame_callback(Dwfl_Frame *state, void *arg)
{
	struct unwind *u = arg;
	Dwarf_Addr pc;
	bool isactivation;
	Dwfl_Module *mod;

	if (!dwfl_frame_pc(state, &pc, NULL)) {
		snprintf(u->why, sizeof(u->why), "%s", dwfl_errmsg(-1));
		return DWARF_CB_ABORT;
	}
	/* perf reports the module before asking for isactivation (which
	 * unwinds this frame); its result is not checked here */
	report_module(u, pc, NULL);
	u->why[0] = 0;
	if (!dwfl_frame_pc(state, &pc, &isactivation)) {
		snprintf(u->why, sizeof(u->why), "%s", dwfl_errmsg(-1));
		return DWARF_CB_ABORT;
	}
	if (!isactivation)
		pc--;
	if (report_module(u, pc, &mod)) {
		u->module_failed = true;
		return DWARF_CB_ABORT;
	}
	u->ips[u->n] = pc;
	if (u->symbols) {
		if (!mod)
			mod = dwfl_addrmodule(u->dwfl, pc);
		u->names[u->n] = encode_name(mod ? dwfl_module_addrname(mod, pc) : NULL);
	}
	u->n++;
	return --u->left ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* perf script's form of a user callchain ip: map-relative
 * (ip - start + pgoff) in a file map, the ip itself in perf's
 * identity-mapped anon/no-dso maps and outside every map */
static uint64_t perf_ip(const struct proc *p, uint64_t ip)
{
	const struct map *m = map_find(p, ip);
	static const char *const identity[] = {
		"//anon", "/dev/zero", "/anon_hugepage", "/SYSV", "/memfd:", "[",
	};

	if (!m)
		return ip;
	for (size_t i = 0; i < sizeof(identity) / sizeof(identity[0]); i++)
		if (!strncmp(m->path, identity[i], strlen(identity[i])))
			return ip;
	return ip - m->start + m->pgoff;
}

static void unwind_sample(const struct sample *s, const struct proc *p,
			  int max_stack, bool symbols, bool rel)
{
	struct unwind u = {
		.s = s, .p = p, .max_stack = max_stack, .left = max_stack,
		.symbols = symbols, .rel = rel,
	};
	const char *status = NULL;
	char buf[600];
	int err;

	u.ips = xrealloc(NULL, max_stack * sizeof(*u.ips));
	u.names = xrealloc(NULL, max_stack * sizeof(*u.names));
	if (!s->abi || !s->have[R_IP] || !s->have[R_SP]) {
		status = "error: no user registers";
		goto print;
	}
	/* perf bails out before any unwinder when the stack copy is empty
	 * (dyn_size 0: a sample taken where the kernel could not read the
	 * user stack, as in the middle of an exec) */
	if (!s->stack_size) {
		status = "error: no user stack";
		goto print;
	}
	u.dwfl = dwfl_begin(&offline_callbacks);
	if (!u.dwfl) {
		snprintf(buf, sizeof(buf), "error: dwfl_begin: %s", dwfl_errmsg(-1));
		status = buf;
		goto print;
	}
	if (report_module(&u, s->regs[R_IP], NULL)) {
		snprintf(buf, sizeof(buf), "error: module: %s", u.why);
		status = buf;
		goto print;
	}
	/* perf passes EM_NONE as the Elf: the machine comes from the module */
	if (!dwfl_attach_state(u.dwfl, NULL, s->tid, &thread_callbacks, &u)) {
		snprintf(buf, sizeof(buf), "error: dwfl_attach_state: %s", dwfl_errmsg(-1));
		status = buf;
		goto print;
	}
	err = dwfl_getthread_frames(u.dwfl, s->tid, frame_callback, &u);
	if (err == 0)
		status = "ok";
	else if (u.left != u.max_stack) {
		/* perf: err && max_stack changed -> the frames taken are kept */
		if (!u.left)
			status = "max-stack";
		else if (u.module_failed)
			snprintf(buf, sizeof(buf), "module: %s", u.why), status = buf;
		else
			snprintf(buf, sizeof(buf), "end: %s",
				 u.why[0] ? u.why : dwfl_errmsg(-1)), status = buf;
	} else {
		snprintf(buf, sizeof(buf), "error: %s%s",
			 u.module_failed ? "module: " : "",
			 u.why[0] ? u.why : dwfl_errmsg(-1));
		status = buf;
		for (size_t i = 0; i < u.n && symbols; i++)
			free(u.names[i]);
		u.n = 0;
	}
print:
	printf("%" PRIu32 "/%" PRIu32 " %" PRIu64 ".%09" PRIu64 ":", s->pid, s->tid,
	       s->time / 1000000000, s->time % 1000000000);
	for (size_t i = 0; i < u.n; i++) {
		printf(" %" PRIx64, rel ? perf_ip(p, u.ips[i]) : u.ips[i]);
		if (symbols) {
			printf("@%s", u.names[i]);
			free(u.names[i]);
		}
	}
	printf(" | %s\n", status);
	if (u.dwfl)
		dwfl_end(u.dwfl);
	free(u.ips);
	free(u.names);
}

/* ---- sample parsing ---- */

static uint64_t attr_u64(const pg_perfdata *pd, const struct pg_pd_attr *a, size_t off)
{
	return off + 8 <= a->raw_size ? pg_pd_u64(pd, a->raw + off) : 0;
}

/* Walks a SAMPLE record to its user registers and stack. 0 or -1 (the
 * record is shorter than its sample_type says, or has a field this tool
 * cannot skip). */
static int parse_sample(const pg_perfdata *pd, const struct pg_pd_rec *rec,
			const struct pg_pd_attr *a, struct sample *s)
{
	const uint8_t *p = rec->data + 8, *end = rec->data + rec->size;
	uint64_t st = a->sample_type;
	uint64_t read_format = attr_u64(pd, a, 32);
	uint64_t branch_type = attr_u64(pd, a, 72);
	uint64_t regs_mask = attr_u64(pd, a, 80);

#define NEED(n) do { if ((uint64_t)(end - p) < (uint64_t)(n)) return -1; } while (0)
#define SKIP(n) do { NEED(n); p += (n); } while (0)
	memset(s, 0, sizeof(*s));
	s->pid = rec->pid;
	s->tid = rec->tid;
	s->time = rec->has_time ? rec->time : 0;
	if (st & PG_SAMPLE_IDENTIFIER) SKIP(8);
	if (st & PG_SAMPLE_IP) SKIP(8);
	if (st & PG_SAMPLE_TID) SKIP(8);
	if (st & PG_SAMPLE_TIME) SKIP(8);
	if (st & PG_SAMPLE_ADDR) SKIP(8);
	if (st & PG_SAMPLE_ID) SKIP(8);
	if (st & PG_SAMPLE_STREAM_ID) SKIP(8);
	if (st & PG_SAMPLE_CPU) SKIP(8);
	if (st & PG_SAMPLE_PERIOD) SKIP(8);
	if (st & S_READ) {
		unsigned per = 1 + !!(read_format & RF_ID) + !!(read_format & RF_LOST);
		uint64_t nr = 1;
		if (read_format & RF_GROUP) {
			NEED(8);
			nr = pg_pd_u64(pd, p);
			p += 8;
		}
		uint64_t words = !!(read_format & RF_TOTAL_TIME_ENABLED) +
				 !!(read_format & RF_TOTAL_TIME_RUNNING);
		if (nr > (uint64_t)(end - p) / 8)
			return -1;
		words += nr * per;
		NEED(words * 8);
		p += words * 8;
	}
	if (st & PG_SAMPLE_CALLCHAIN) {
		NEED(8);
		uint64_t nr = pg_pd_u64(pd, p);
		p += 8;
		if (nr > (uint64_t)(end - p) / 8)
			return -1;
		p += nr * 8;
	}
	if (st & PG_SAMPLE_RAW) {
		NEED(4);
		uint32_t sz = pg_pd_u32(pd, p);
		NEED(4 + (uint64_t)sz);
		p += 4 + sz;
	}
	if (st & S_BRANCH_STACK) {
		NEED(8);
		uint64_t nr = pg_pd_u64(pd, p);
		p += 8;
		if (branch_type & BRANCH_HW_INDEX)
			SKIP(8);
		if (nr > (uint64_t)(end - p) / 24)
			return -1;
		p += nr * 24;
	}
	if (st & S_REGS_USER) {
		NEED(8);
		s->abi = pg_pd_u64(pd, p);
		p += 8;
		if (s->abi) {
			for (int bit = 0; bit < 64; bit++) {
				if (!(regs_mask & (1ull << bit)))
					continue;
				NEED(8);
				if (bit < R_NUM) {
					s->regs[bit] = pg_pd_u64(pd, p);
					s->have[bit] = true;
				}
				p += 8;
			}
		}
	}
	if (st & S_STACK_USER) {
		NEED(8);
		uint64_t sz = pg_pd_u64(pd, p);
		p += 8;
		NEED(sz);
		s->stack = p;
		p += sz;
		if (sz) {
			NEED(8);
			s->stack_size = pg_pd_u64(pd, p);
			if (s->stack_size > sz)
				s->stack_size = sz;
		}
	}
#undef NEED
#undef SKIP
	return 0;
}

/* ---- main ---- */

static int mev_cmp(const void *a, const void *b)
{
	const struct mev *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int main(int argc, char **argv)
{
	bool symbols = false, rel = false;
	int max_stack = 127;	/* perf script: PERF_MAX_STACK_DEPTH */
	const char *path = NULL;
	struct pg_diag diag = { 0 };
	pg_perfdata *pd;
	struct pg_pd_rec rec;
	struct mev *ev = NULL;
	size_t nev = 0, cap = 0, next = 0;
	uint64_t seq = 0, nsamples = 0, nbad = 0;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--symbols"))
			symbols = true;
		else if (!strcmp(argv[i], "--perf-ip"))
			rel = true;
		else if (!strcmp(argv[i], "--max-stack") && i + 1 < argc)
			max_stack = atoi(argv[++i]);
		else if (argv[i][0] == '-' || path)
			die("usage: libdw_unwind [--symbols] [--perf-ip] [--max-stack N] PERF.DATA");
		else
			path = argv[i];
	}
	if (!path || max_stack < 1)
		die("usage: libdw_unwind [--symbols] [--perf-ip] [--max-stack N] PERF.DATA");
	rc = pg_perfdata_open(path, &diag, &pd);
	if (rc < 0)
		die("%s", diag.err);
	if (pg_perfdata_big_endian(pd))
		die("%s: big-endian perf.data: x86-64 only", path);

	/* pass 1: the maps (and forks), to apply in time order */
	while ((rc = pg_perfdata_next(pd, &rec)) == 1) {
		seq++;
		struct pg_pd_mmap mm;
		if (rec.type == PERF_RECORD_FORK && rec.size >= 8 + 16) {
			uint32_t pid = pg_pd_u32(pd, rec.data + 8);
			uint32_t ppid = pg_pd_u32(pd, rec.data + 12);
			if (pid == ppid)
				continue;	/* a thread: shares the maps */
			if (nev == cap)
				ev = xrealloc(ev, (cap = cap ? 2 * cap : 256) * sizeof(*ev));
			ev[nev++] = (struct mev){ .time = rec.has_time ? rec.time : 0,
						  .seq = seq, .type = rec.type,
						  .pid = pid, .ppid = ppid };
			continue;
		}
		if (rec.type != PG_PERF_RECORD_MMAP && rec.type != PG_PERF_RECORD_MMAP2)
			continue;
		if ((rec.misc & 7) == PG_PERF_RECORD_MISC_KERNEL)
			continue;
		if (pg_perfdata_mmap(pd, &rec, &mm))
			continue;
		if (nev == cap)
			ev = xrealloc(ev, (cap = cap ? 2 * cap : 256) * sizeof(*ev));
		ev[nev] = (struct mev){ .time = rec.has_time ? rec.time : 0, .seq = seq,
					.type = rec.type, .pid = mm.pid, .start = mm.start,
					.len = mm.len, .pgoff = mm.pgoff,
					.path = strdup(mm.filename) };
		if (!ev[nev++].path)
			die("out of memory");
	}
	if (rc < 0)
		die("%s", diag.err);
	qsort(ev, nev, sizeof(*ev), mev_cmp);

	/* pass 2: the samples, with the maps of their time */
	if (pg_perfdata_rewind(pd) < 0)
		die("%s: cannot read twice", path);
	seq = 0;
	uint64_t last_time = 0, last_seq = 0;
	while ((rc = pg_perfdata_next(pd, &rec)) == 1) {
		seq++;
		if (rec.type != PG_PERF_RECORD_SAMPLE || rec.attr < 0)
			continue;
		const struct pg_pd_attr *a = pg_perfdata_attr(pd, (size_t)rec.attr);
		if (!a || (a->sample_type & (S_REGS_USER | S_STACK_USER)) !=
			  (S_REGS_USER | S_STACK_USER))
			continue;
		uint64_t t = rec.has_time ? rec.time : 0;
		struct mev key = { .time = t, .seq = seq };
		if (mev_cmp(&key, &(struct mev){ .time = last_time, .seq = last_seq }) < 0) {
			/* out of time order: replay the maps from the start */
			procs_reset();
			next = 0;
		}
		while (next < nev && mev_cmp(&ev[next], &key) < 0)
			mev_apply(&ev[next++]);
		last_time = t;
		last_seq = seq;

		struct sample s;
		nsamples++;
		if (parse_sample(pd, &rec, a, &s)) {
			nbad++;
			printf("%" PRIu32 "/%" PRIu32 " %" PRIu64 ".%09" PRIu64
			       ": | error: sample record too short\n", rec.pid, rec.tid,
			       t / 1000000000, t % 1000000000);
			continue;
		}
		unwind_sample(&s, proc_get(s.pid, false), max_stack, symbols, rel);
	}
	if (rc < 0)
		die("%s", diag.err);
	fflush(stdout);
	fprintf(stderr, "libdw_unwind: %" PRIu64 " samples, %" PRIu64 " damaged\n",
		nsamples, nbad);
	pg_perfdata_close(pd);
	procs_reset();
	for (size_t i = 0; i < nev; i++)
		free(ev[i].path);
	free(ev);
	for (size_t i = 0; i < nfiles; i++) {
		if (files[i].fd >= 0)
			close(files[i].fd);
		free(files[i].path);
	}
	free(files);
	return 0;
}
