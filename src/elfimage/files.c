/* SPDX-License-Identifier: MIT */
/* An image's file: a unique name in the directory, the build-id that
 * completes it (and names it with build_id_names), reuse of an identical
 * file already there, the temporary written through emit.c, and commit,
 * keep and discard of the set's files.  Apart from emit.c, which makes
 * the bytes: this part is what a run leaves in the directory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <gelf.h>

#include "elfimage/builder.h"

/* bump when the bytes written for the same input change (3: the
 * build-id's digest is XXH3, not SHA-1); not for a change of what the
 * digest reads, which changes the build-ids itself (the memory layout's
 * code by its functions' own digests) */
#define IMAGE_FORMAT 3

/* A temporary the code is written into while the image is built
 * (pg_files_stream): named after the image's first name, which the
 * build-id may change, so renamed at the write (write_file).  The image
 * holds its sink. */
struct stream {
	struct pg_ahash_sink s;
	int dirfd;		/* the set's */
	long reg;		/* the temporary's cleanup registration */
	unsigned rnd;
	char flat[NAME_MAX + 1];	/* the name it was made from */
};

static struct stream *stream_of(const struct img *im)
{
	return im->sink ? (struct stream *)((char *)im->sink - offsetof(struct stream, s)) : NULL;
}

/* Removes the temporary of a streamed image not written (a failure, an
 * identical file reused, a name that is not a regular file). */
static void stream_drop(struct img *im)
{
	struct stream *st = stream_of(im);
	char tmp[NAME_MAX + 41];

	if (!st)
		return;
	close(st->s.g.fd);
	if (pg_tmpname(tmp, sizeof(tmp), st->flat, st->rnd) == 0)
		unlinkat(st->dirfd, tmp, 0);
	pg_cleanup_del(st->reg);
	free(st);
	im->sink = NULL;
}

void pg_files_free_image(struct img *im)
{
	if (!im)
		return;
	pg_ahash_wait(im->ah);	/* nothing queued may reach im->dig after */
	stream_drop(im);	/* nor write into its temporary */
	pg_digest_free(im->dig);
	pg_buf_free(&im->meh);
	pg_buf_free(&im->mhdr);
	free(im->funcs);
	pg_dwarf_free(&im->dw);
	pg_buf_free(&im->strtab);
	free(im);
}

/* Registers a new public image under a unique file name. */
int pg_files_new_image(pg_elfset *set, const char *want, struct img **out)
{
	struct pg_elf_image *pi;
	struct img *im;
	char name[256];
	bool added;

	snprintf(name, sizeof(name), "%s", want);
	for (unsigned k = 1;; k++) {
		long idx;

		/* the strmap keeps a pointer: intern a heap copy */
		char *key = strdup(name);

		if (!key)
			return pg_err(set->diag, -ENOMEM, "out of memory");
		idx = pg_strmap_intern(&set->names, key, &added);
		if (idx < 0) {
			free(key);
			return pg_err(set->diag, -ENOMEM, "out of memory");
		}
		if (added)
			break;
		free(key);
		/* a code_index used twice in one dump */
		snprintf(name, sizeof(name), "%.*s-dup%u.so", (int)(strlen(want) - 3), want, k);
	}
	if (!pg_grow((void **)&set->images, &set->cap, set->nimages + 1, sizeof(*set->images)) ||
	    !pg_grow((void **)&set->pend, &set->pend_cap, set->nimages + 1, sizeof(*set->pend)))
		return pg_err(set->diag, -ENOMEM, "out of memory");
	set->pend[set->nimages] = (struct pend){ .reg = -1, .dreg = -1 };
	im = calloc(1, sizeof(*im));
	if (im && !(im->dig = pg_digest_new())) {
		free(im);
		im = NULL;
	}
	if (!im)
		return pg_err(set->diag, -ENOMEM, "out of memory");
	pi = &set->images[set->nimages];
	memset(pi, 0, sizeof(*pi));
	if (asprintf(&pi->path, "%s/%s", set->dir, name) < 0) {
		pg_digest_free(im->dig);
		free(im);
		return pg_err(set->diag, -ENOMEM, "out of memory");
	}
	pi->name = pi->path + strlen(set->dir) + 1;
	im->pub = set->nimages++;
	im->text_off = im->text_end = set->text_off;
	pg_dwarf_init(&im->dw, set->hdr.big_endian, set->hdr.is_64bit ? 8 : 4);
	pg_buf_u8(&im->strtab, 0);
	/* queued for im->dig only from here on: these are applied at once */
	im->ah = set->ah;
	{
		/* identity of the input: same dump, same build-ids */
		uint64_t id[3] = { set->hdr.pid, set->hdr.timestamp, set->hdr.elf_mach };
		/* the layout and the writer's format are part of what an image
		 * is: an image of another layout (or of an older writer) must not
		 * pass for this one when an existing file is reused */
		uint8_t layout[2] = { IMAGE_FORMAT, set->cfi_compat | set->zdebug << 1 };

		pg_digest_update(im->dig, "perfgraft-jit", 14);
		pg_digest_update(im->dig, layout, sizeof(layout));
		pg_digest_update(im->dig, id, sizeof(id));
		pg_digest_update(im->dig, name, strlen(name) + 1);
	}
	*out = im;
	return 0;
}

/* An existing regular file of the image's name with its build-id is the
 * same image (the build-id digests the dump's identity and the image's
 * bytes): it is kept as it is, neither rewritten nor, later, removed. */
static bool reuse(pg_elfset *set, struct pg_elf_image *pi)
{
	uint8_t id[20];
	struct stat st;

	if (fstatat(set->dirfd, pi->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return false;
	if (pg_file_build_id(pi->path, id) != BUILD_ID_SIZE ||
	    memcmp(id, pi->build_id, BUILD_ID_SIZE))
		return false;
	pi->dev = st.st_dev;
	pi->ino = st.st_ino;
	pi->size = (uint64_t)st.st_size;
	pi->written = true;
	pi->reused = true;
	return true;
}

/* Completes the build-id (the .eh_frame is the last part it digests) and,
 * with build_id_names, puts it into the file name. */
static int name_image(pg_elfset *set, struct img *im, const struct layout *lo)
{
	struct pg_elf_image *pi = &set->images[im->pub];
	uint8_t bid[PG_DIGEST_SIZE];

	if (im->memory) {	/* all of it on this thread (emit.c) */
		pg_digest_update(im->dig, lo->ehp, lo->eh_size);
	} else {
		pg_ahash_update(im->ah, im->dig, lo->ehp, lo->eh_size);
		pg_ahash_wait(im->ah);
	}
	pg_digest_final(im->dig, bid);
	memcpy(pi->build_id, bid, BUILD_ID_SIZE);
	if (set->build_id_names) {
		size_t dl = strlen(set->dir), nl = strlen(pi->name);
		const char *sl = strchr(pi->name, '/');
		/* "SUB/NAME" (plan.c): the build-id goes into SUB, NAME is
		 * what perf must see the same in every image of it */
		size_t kl = sl ? (size_t)(sl - pi->name) : nl - 3;
		char *np = malloc(dl + nl + 16);

		if (!np)
			return pg_err(set->diag, -ENOMEM, "out of memory");
		/* "<dir>/<name less .so>-<12 hex>.so", "<dir>/<SUB>-<12 hex>/<NAME>" */
		snprintf(np, dl + nl + 16, "%s/%.*s-%02x%02x%02x%02x%02x%02x%s", set->dir,
			 (int)kl, pi->name, pi->build_id[0], pi->build_id[1],
			 pi->build_id[2], pi->build_id[3], pi->build_id[4], pi->build_id[5],
			 pi->name + kl);
		free(pi->path);
		pi->path = np;
		pi->name = np + dl + 1;
	}
	return 0;
}

/* An image being written: the worker thread (set->ah) writes it into its
 * open temporary and frees it; pg_files_join() finishes or removes the
 * temporary on the set's thread.  It holds everything the write reads,
 * so that the set may grow meanwhile. */
struct wjob {
	struct img *im;
	struct layout lo;
	int fd;
	size_t pub;
	uint8_t build_id[BUILD_ID_SIZE];
	char *path;
	struct emit_out o;
	bool zdebug;
	const char *dump_name;	/* the set's, which outlives its jobs */
	struct pg_diag d;	/* the worker's messages, copied at join */
	uint64_t size;		/* the file's, once written */
	int ret;
	/* who writes the code (CODE_*): the worker after the ELF parts, or
	 * the set's thread when it comes to join first (the code lies where
	 * libelf writes nothing: .text has no data for it), with its own
	 * message and result */
	atomic_int code;
	struct pg_diag cd;
	int code_ret;
	/* The DWARF sections' compression, each taken by the worker or by
	 * the set's thread waiting at join (claimed: bit i for section i);
	 * whichever finishes the last (left) lays out and writes the rest.
	 * dw_ready: 1 once sections may be taken, 2 when there are none
	 * (plain DWARF, or the job failed before); set before the job is
	 * queued when the set's thread finished the DWARF itself. */
	struct pg_ahash *ah;
	/* a memory-layout image's stream, its code still being written:
	 * the worker writes its last batch first (run_job) */
	struct stream *st;
	atomic_int dw_ready;
	atomic_uint claimed;
	atomic_int left;
};

/* CODE_DONE: written while the image was built (pg_files_stream) */
enum { CODE_FREE, CODE_WORKER, CODE_CALLER, CODE_DONE };

#define MAX_JOBS 8

static void job_free(struct wjob *jb)
{
	if (!jb)
		return;
	pg_emit_layout_free(&jb->lo);
	pg_files_free_image(jb->im);	/* the set's thread: waits for its digest */
	free(jb->st);
	free(jb->path);
	free(jb);
}

/* The name an image's temporary is written under, beside its final
 * name: "SUB/NAME" is written as "SUB.so", renamed into SUB at commit. */
static const char *flat_name(const struct pg_elf_image *pi, char flat[NAME_MAX + 1])
{
	const char *sl = strchr(pi->name, '/');

	if (!sl)
		return pi->name;
	snprintf(flat, NAME_MAX + 1, "%.*s.so", (int)(sl - pi->name), pi->name);
	return flat;
}

/* The temporary's name, made again from the image's and its rnd (as
 * pg_tmpfile_open made it): not kept for each image. */
static void tmp_name(const struct pg_elf_image *pi, const struct pend *p,
		     char buf[NAME_MAX + 41])
{
	char flat[NAME_MAX + 1];

	/* it fitted when the file was opened */
	(void)pg_tmpname(buf, NAME_MAX + 41, flat_name(pi, flat), p->rnd);
}

void pg_files_stream(pg_elfset *set, struct img *im)
{
	struct pg_elf_image *pi = &set->images[im->pub];
	struct stream *st = calloc(1, sizeof(*st));
	struct pg_diag quiet = { 0 };
	char flat[NAME_MAX + 1];
	struct stat sb;
	bool direct;
	int fd;

	if (!st)
		return;
	snprintf(st->flat, sizeof(st->flat), "%s", flat_name(pi, flat));
	/* not a name that is no regular file: pg_tmpfile_open would open
	 * that itself (a FIFO: and wait for a reader) */
	if (fstatat(set->dirfd, st->flat, &sb, 0) == 0 && !S_ISREG(sb.st_mode)) {
		free(st);
		return;
	}
	fd = pg_tmpfile_open(set->dirfd, st->flat, 0644, &direct, &st->rnd, &st->reg, &quiet);
	if (fd < 0 || direct) {
		if (fd >= 0)
			close(fd);
		free(st);
		return;
	}
	st->dirfd = set->dirfd;
	/* only the gaps between pieces are filled: all of them in .text */
	pg_gather_init(&st->s.g, fd, im->text_off, UINT64_MAX);
	im->sink = &st->s;
}

/* Renames from to to in dirfd unless to exists: 0 or -errno (-EEXIST).
 * A file system without RENAME_NOREPLACE: a hard link, then the unlink. */
static int no_replace_rename(int dirfd, const char *from, const char *to)
{
	if (renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(dirfd, from, dirfd, to, 0) < 0)
		return -errno;
	if (unlinkat(dirfd, from, 0) < 0) {
		int e = -errno;

		(void)unlinkat(dirfd, to, 0);
		return e;
	}
	return 0;
}

/* A streamed image's temporary, all its code written, given the name
 * tmp_name() makes from the image's final name: its descriptor, the
 * pend filled in as pg_tmpfile_open would have; or a negative errno
 * (the temporary is then removed): -EAGAIN, unsaid, when the image is
 * to be written the usual way instead (no stream; a final name that is
 * no regular file, written in place; a file system without
 * RENAME_NOREPLACE or hard links).  A memory-layout image's code may
 * still be queued: its stream goes to *later, whose last batch the
 * worker writes before the rest (run_job); the set's thread does not
 * wait for it. */
static int stream_adopt(pg_elfset *set, struct img *im, struct pend *p, struct stream **later)
{
	struct pg_elf_image *pi = &set->images[im->pub];
	struct stream *st = stream_of(im);
	char fbuf[NAME_MAX + 1], from[NAME_MAX + 41], to[NAME_MAX + 41];
	const char *flat;
	struct stat sb;
	unsigned rnd;
	long reg;
	int ret, fd;

	if (!st)
		return -EAGAIN;
	rnd = st->rnd;
	reg = st->reg;
	fd = st->s.g.fd;
	ret = im->memory ? 0 : pg_ahash_sink_flush(&st->s);
	if (ret) {
		pg_err(set->diag, ret, "%s: cannot write ELF image: %s", pi->path, strerror(-ret));
		stream_drop(im);
		return ret;
	}
	flat = flat_name(pi, fbuf);
	if (fstatat(set->dirfd, flat, &sb, 0) == 0 && !S_ISREG(sb.st_mode)) {
		pg_ahash_wait(im->ah);	/* its writes done before the close */
		stream_drop(im);
		return -EAGAIN;
	}
	if (strcmp(flat, st->flat)) {
		/* the build-id named it: the temporary follows, never onto a
		 * file that is there */
		ret = -EEXIST;
		(void)pg_tmpname(from, sizeof(from), st->flat, st->rnd);
		for (int tries = 0; tries < 100 && ret == -EEXIST; tries++) {
			rnd = ((unsigned)rand() ^ (unsigned)tries) & PG_TMP_RND_MASK;
			if (pg_tmpname(to, sizeof(to), flat, rnd) < 0) {
				ret = -ENAMETOOLONG;
				break;
			}
			reg = pg_cleanup_add(set->dirfd, to, false);	/* before it exists */
			ret = no_replace_rename(set->dirfd, from, to);
			if (ret)
				pg_cleanup_del(reg);
		}
		if (ret) {
			pg_ahash_wait(im->ah);
			stream_drop(im);
			return -EAGAIN;
		}
		pg_cleanup_del(st->reg);
	}
	*p = (struct pend){ .reg = (int32_t)reg, .dreg = -1, .rnd = rnd, .pending = true };
	if (im->memory)
		*later = st;
	else
		free(st);
	im->sink = NULL;
	return fd;
}

/* Removes image i's temporary (not written in place, no file to
 * remove) and its registration. */
static void tmp_abort(pg_elfset *set, size_t i)
{
	struct pend *p = &set->pend[i];
	char tmp[NAME_MAX + 41];

	if (!p->pending)
		return;
	if (!p->direct) {
		tmp_name(&set->images[i], p, tmp);
		unlinkat(set->dirfd, tmp, 0);
	}
	pg_cleanup_del(p->reg);
	p->reg = -1;
	p->pending = false;
}

void pg_files_abort_pending(pg_elfset *set)
{
	for (size_t i = 0; i < set->nimages; i++)
		tmp_abort(set, i);
}

/* What follows the DWARF's compression: the layout, the ELF parts and
 * (unless written already) the code.  On the worker (a job of its own
 * when the set's thread finished the last section). */
static void job_rest(void *arg)
{
	struct wjob *jb = arg;
	int want = CODE_FREE;
	bool code;

	if (!jb->ret)
		jb->ret = pg_emit_layout_rest(jb->o.hdr, jb->im, &jb->lo, &jb->d);
	jb->size = jb->lo.sh_off + SEC_COUNT * (jb->o.hdr->is_64bit ? sizeof(Elf64_Shdr)
								     : sizeof(Elf32_Shdr));
	if (!jb->ret)
		jb->ret = pg_emit_elf(&jb->o, jb->im, &jb->lo, jb->fd);
	/* every layout's code, not through libelf: this thread's unless the
	 * set's thread took it, or it was written as the image was built */
	code = atomic_compare_exchange_strong(&jb->code, &want, CODE_WORKER);
	if (!jb->ret && code)
		jb->ret = pg_emit_code(&jb->o, jb->im, jb->fd);
	code |= want == CODE_DONE;
	/* its memory now, not at join: a run's images are not all held */
	pg_emit_layout_free(&jb->lo);
	memset(&jb->lo, 0, sizeof(jb->lo));
	if (code) {	/* else the set's thread writes the code from im */
		jb->im->ah = NULL;
		pg_files_free_image(jb->im);
		jb->im = NULL;
	}
}

/* Compresses the sections of order[0..n) not taken yet; true when this
 * thread finished the last of them (and so goes on with job_rest). */
static bool take_sections(struct wjob *jb, const int *order, int n)
{
	bool last = false;

	for (int k = 0; k < n; k++) {
		unsigned bit = 1u << order[k];

		if (atomic_fetch_or(&jb->claimed, bit) & bit)
			continue;
		pg_emit_zsection(jb->o.hdr, jb->im, &jb->lo, order[k]);
		last = atomic_fetch_sub(&jb->left, 1) == 1;
	}
	return last;
}

/* The worker takes the largest first (.debug_info, .debug_line), the
 * set's thread the other end: on a pack of node code they are 14 and 6
 * ms of zlib, the join's whole wait. */
static const int worker_order[4] = { 1, 2, 0, 3 }, caller_order[4] = { 3, 0, 2, 1 };
/* a memory-layout image's, as it is queued: all but .debug_info, the
 * worker's first */
static const int early_order[3] = { 2, 0, 3 };

/* The DWARF finished and its sections open to both threads (or none). */
static void dwarf_ready(struct wjob *jb)
{
	bool sections;

	jb->ret = pg_emit_dwarf_finish(jb->dump_name, jb->im, &jb->lo, &jb->d);
	sections = !jb->ret && jb->zdebug;
	if (sections)
		atomic_store(&jb->left, 4);
	/* either way the set's thread, if waiting for it, need not wait on */
	atomic_store(&jb->dw_ready, sections ? 1 : 2);
}

/* The write, on the worker thread (or at once without one). */
static void run_job(void *arg)
{
	struct wjob *jb = arg;

	if (jb->st) {	/* its code's last batch, queued before this job */
		int r = pg_ahash_sink_flush(&jb->st->s);

		if (r) {	/* the code's own result, as the join's writes have */
			jb->code_ret = r;
			snprintf(jb->cd.err, sizeof(jb->cd.err), "%s: cannot write ELF image: %s",
				 jb->path, strerror(-r));
		}
		free(jb->st);
		jb->st = NULL;
	}

	if (!atomic_load(&jb->dw_ready)) {	/* (not finished by the set's thread) */
		dwarf_ready(jb);
		pg_ahash_notify(jb->ah);
	}
	if (atomic_load(&jb->dw_ready) == 1 && !take_sections(jb, worker_order, 4))
		return;	/* the set's thread finishes the last */
	job_rest(jb);
}

/* The set's thread's share of jb's sections (those of order not taken);
 * the rest back to the worker when it finished the last: libelf writes
 * on one thread. */
static void share_sections(pg_elfset *set, struct wjob *jb, const int *order, int n)
{
	if (atomic_load(&jb->dw_ready) == 1 && take_sections(jb, order, n))
		pg_ahash_run(set->ah, job_rest, jb);
}

int pg_files_join(pg_elfset *set, bool report)
{
	struct pg_diag none = { 0 }, *diag = set->diag;
	int ret = 0;

	if (!report)	/* a failure being reported already keeps its message */
		set->diag = &none;

	/* the code of an image the worker is still compressing or laying
	 * out: written here meanwhile, this thread would only wait */
	for (size_t i = 0; i < set->njobs && report; i++) {
		struct wjob *jb = set->jobs[i];
		int want = CODE_FREE;

		if (atomic_compare_exchange_strong(&jb->code, &want, CODE_CALLER)) {
			struct emit_out o = jb->o;

			o.diag = &jb->cd;
			jb->code_ret = pg_emit_code(&o, jb->im, jb->fd);
		}
	}
	/* a section the worker has not taken yet: compressed here meanwhile */
	for (size_t i = 0; i < set->njobs && report; i++) {
		struct wjob *jb = set->jobs[i];

		if (!jb->zdebug)
			continue;
		pg_ahash_wait_flag(set->ah, &jb->dw_ready);
		share_sections(set, jb, caller_order, 4);
	}
	pg_ahash_wait(set->ah);
	for (size_t i = 0; i < set->njobs; i++) {
		struct wjob *jb = set->jobs[i];
		int r = jb->ret;

		if (!r && jb->code_ret) {
			r = jb->code_ret;
			snprintf(jb->d.err, sizeof(jb->d.err), "%s", jb->cd.err);
		}

		if (!r) {
			set->images[jb->pub].size = jb->size;
			if (close(jb->fd) < 0) {
				r = -errno;
				if (!ret)
					pg_err(set->diag, r, "%s: %s", set->images[jb->pub].path,
					       strerror(-r));
			}
		} else {
			close(jb->fd);
			if (!ret)
				pg_err(set->diag, r, "%s", jb->d.err);
		}
		jb->fd = -1;
		if (r) {
			tmp_abort(set, jb->pub);
			set->images[jb->pub].written = false;
			if (!ret)
				ret = r;
		}
		job_free(jb);
	}
	set->njobs = 0;
	set->diag = diag;
	return ret;
}

/* Opens the image's temporary (which pg_elfset_commit() renames into
 * place) and hands the writing to the worker; the temporary is removed
 * again on any error.  Takes jb. */
static int write_file(pg_elfset *set, struct wjob *jb)
{
	struct img *im = jb->im;
	struct pg_elf_image *pi = &set->images[im->pub];
	struct pend *p = &set->pend[im->pub];
	const char *sl = strchr(pi->name, '/');
	char flat[NAME_MAX + 1];
	unsigned rnd = 0;
	bool direct = false, early;
	struct stat st;
	long reg;
	int ret, fd;

	/* each job holds its temporary open: a few at a time (a fallback to
	 * the packed layout may write an image a CFI function in finish) */
	if (set->njobs >= MAX_JOBS && (ret = pg_files_join(set, true))) {
		job_free(jb);
		return ret;
	}
	/* a streamed image's code is in its temporary already (or, in the
	 * memory layout, queued to be) */
	fd = stream_adopt(set, im, p, &jb->st);
	if (fd >= 0) {
		atomic_store(&jb->code, CODE_DONE);
	} else if (fd != -EAGAIN) {
		job_free(jb);
		return fd;
	} else {
		/* "SUB/NAME": the temporary beside SUB, renamed into it at commit */
		fd = pg_tmpfile_open(set->dirfd, flat_name(pi, flat), 0644, &direct, &rnd, &reg,
				     set->diag);
		if (fd < 0) {
			job_free(jb);
			return fd;
		}
		/* the pend holds it from here on: tmp_abort removes it */
		*p = (struct pend){ .reg = (int32_t)reg, .dreg = -1, .rnd = rnd, .pending = true,
				    .direct = direct };
	}
	if (sl && direct) {
		close(fd);
		tmp_abort(set, im->pub);
		job_free(jb);
		return pg_err(set->diag, -EEXIST, "%s/%s: not a regular file", set->dir, flat);
	}
	jb->path = strdup(pi->path);
	if (!jb->path ||
	    !pg_grow((void **)&set->jobs, &set->jobs_cap, set->njobs + 1, sizeof(*set->jobs))) {
		if (jb->st)	/* its code's writes done before the close */
			pg_ahash_wait(set->ah);
		close(fd);
		tmp_abort(set, im->pub);
		job_free(jb);
		return pg_err(set->diag, -ENOMEM, "out of memory");
	}
	if (fstat(fd, &st) == 0) {
		pi->dev = st.st_dev;
		pi->ino = st.st_ino;
	}
	memcpy(jb->build_id, pi->build_id, BUILD_ID_SIZE);
	jb->o = (struct emit_out){ .hdr = &set->hdr, .build_id = jb->build_id, .path = jb->path,
				   .diag = &jb->d };
	jb->fd = fd;
	jb->pub = im->pub;
	jb->zdebug = set->zdebug;
	jb->dump_name = set->dump_name;
	jb->ah = set->ah;
	pi->written = true;	/* its size once joined */
	set->jobs[set->njobs++] = jb;
	/* the memory layout's images are built one after another while the
	 * worker writes the code of each and compresses its .debug_info:
	 * this thread takes the other sections before it goes on (with no
	 * worker, run_job below does them all at once), and the sections of
	 * the images before whose job the worker has not started yet (it is
	 * an image or more behind) */
	early = set->finishing && im->memory && jb->zdebug;
	if (early)
		dwarf_ready(jb);
	pg_ahash_run(set->ah, run_job, jb);
	if (early) {
		share_sections(set, jb, early_order, 3);
		for (size_t i = 0; i + 1 < set->njobs; i++)
			if (set->jobs[i]->zdebug)
				share_sections(set, set->jobs[i], caller_order, 4);
	}
	return set->finishing ? 0 : pg_files_join(set, true);
}

/* Lays out, names and writes an image, or keeps the identical file that
 * already has its name. */
int pg_files_write_image(pg_elfset *set, struct img *im)
{
	struct pg_elf_image *pi = &set->images[im->pub];
	struct wjob *jb = calloc(1, sizeof(*jb));
	int ret;

	if (!jb) {
		pg_files_free_image(im);
		return pg_err(set->diag, -ENOMEM, "out of memory");
	}
	jb->im = im;
	ret = pg_emit_layout(set, im, &jb->lo);
	if (!ret)
		ret = name_image(set, im, &jb->lo);
	if (!ret) {
		pi->nfuncs = im->nfuncs;
		pi->has_cfi = im->unw != NULL || im->nfde;
	}
	if (ret || reuse(set, pi)) {
		job_free(jb);
		return ret;
	}
	return write_file(set, jb);
}

int pg_files_close_pack(pg_elfset *set)
{
	int ret = 0;

	if (set->pack) {
		ret = pg_files_write_image(set, set->pack);
		set->pack = NULL;
	}
	return ret;
}

/* An image "SUB/NAME": SUB removed again if this set made it (and
 * nothing else is in it). */
static void drop_dir(pg_elfset *set, const struct pg_elf_image *pi, struct pend *p)
{
	const char *sl = strchr(pi->name, '/');
	char sub[NAME_MAX + 1];

	if (p->made_dir && sl) {
		snprintf(sub, sizeof(sub), "%.*s", (int)(sl - pi->name), pi->name);
		unlinkat(set->dirfd, sub, AT_REMOVEDIR);
	}
	pg_cleanup_del(p->dreg);
	p->dreg = -1;
	p->made_dir = false;
}

/* Renames image i's temporary to toname in todirfd (nothing to rename
 * when it was written in place); removed on failure.  Its registration
 * goes with it. */
static int tmp_commit(pg_elfset *set, size_t i, int todirfd, const char *toname)
{
	struct pend *p = &set->pend[i];
	char tmp[NAME_MAX + 41];
	/* an input that changed while it was read may be in these bytes */
	int ret = pg_inputs_check(set->diag);

	if (!ret && !p->direct) {
		tmp_name(&set->images[i], p, tmp);
		/* rename gives the name a new inode: a hard link that perf's
		 * build-id cache holds to an earlier image keeps the earlier
		 * bytes */
		if (renameat(set->dirfd, tmp, todirfd, toname) < 0)
			ret = pg_err(set->diag, -errno, "cannot rename to '%s': %s", toname,
				     strerror(errno));
	}
	if (ret) {
		tmp_abort(set, i);
		return ret;
	}
	pg_cleanup_del(p->reg);
	p->reg = -1;
	p->pending = false;
	return 0;
}

/* Renames an image's temporary to its name; "SUB/NAME" into SUB, made
 * here when missing and never followed when it is a symbolic link. */
static int commit_file(pg_elfset *set, size_t i)
{
	const struct pg_elf_image *pi = &set->images[i];
	struct pend *p = &set->pend[i];
	const char *sl = strchr(pi->name, '/');
	char sub[NAME_MAX + 1];
	int subfd, ret;

	if (!sl)
		return tmp_commit(set, i, set->dirfd, pi->name);
	snprintf(sub, sizeof(sub), "%.*s", (int)(sl - pi->name), pi->name);
	if (mkdirat(set->dirfd, sub, 0755) == 0) {
		p->made_dir = true;
		p->dreg = (int32_t)pg_cleanup_add(set->dirfd, sub, true);
	} else if (errno != EEXIST) {
		ret = pg_err(set->diag, -errno, "%s/%s: %s", set->dir, sub, strerror(errno));
		tmp_abort(set, i);
		return ret;
	}
	subfd = openat(set->dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (subfd < 0) {
		int e = errno;
		struct stat st;
		/* O_NOFOLLOW | O_DIRECTORY on a symlink: ENOTDIR or ELOOP */
		bool link = fstatat(set->dirfd, sub, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode);

		ret = pg_err(set->diag, -e, "%s/%s: %s", set->dir, sub,
			     link ? "is a symbolic link; not following it" : strerror(e));
		tmp_abort(set, i);
		return ret;
	}
	ret = tmp_commit(set, i, subfd, sl + 1);
	close(subfd);
	return ret;
}

int pg_elfset_commit(pg_elfset *set)
{
	int jret = pg_elfset_wait(set);

	if (jret)
		return jret;
	for (size_t i = 0; i < set->nimages; i++) {
		struct pend *p = &set->pend[i];
		long reg;
		int ret;

		if (!p->pending)
			continue;
		/* the final name is listed before it exists (no moment where a
		 * signal finds it unlisted); only names no file had are committed
		 * here for inject, and elf commits with the signals blocked */
		reg = pg_cleanup_add(set->dirfd, set->images[i].name, false);
		ret = commit_file(set, i);	/* the temporary is gone either way */
		if (ret) {
			pg_cleanup_del(reg);
			drop_dir(set, &set->images[i], p);
			set->images[i].written = false;
			return ret;
		}
		p->reg = (int32_t)reg;
		p->created = true;
	}
	return 0;
}

void pg_elfset_keep(pg_elfset *set)
{
	for (size_t i = 0; set && i < set->nimages; i++) {
		if (!set->pend[i].pending) {	/* else reg is its temporary's */
			pg_cleanup_del(set->pend[i].reg);
			set->pend[i].reg = -1;
		}
		set->pend[i].created = false;	/* discard leaves it too */
		pg_cleanup_del(set->pend[i].dreg);
		set->pend[i].dreg = -1;
		set->pend[i].made_dir = false;
	}
}

void pg_elfset_discard(pg_elfset *set)
{
	if (set)
		(void)pg_files_join(set, false);
	for (size_t i = 0; set && i < set->nimages; i++) {
		struct pend *p = &set->pend[i];

		if (p->pending) {
			tmp_abort(set, i);
		} else {
			if (p->created)
				unlinkat(set->dirfd, set->images[i].name, 0);
			pg_cleanup_del(p->reg);
			p->reg = -1;
		}
		drop_dir(set, &set->images[i], p);
		p->created = false;
		set->images[i].written = false;
	}
}
