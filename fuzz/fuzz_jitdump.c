/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the jitdump reader and the ELF image builder.
 *
 * Pass 1 walks every record (PG_JITDUMP_ALL_RECORDS) and reads every byte
 * a record points at (names, line file names, code, unwind blobs, the
 * ranges and frames of INLINE_INFO and their strings, UNLOAD's fields), so
 * that ASan sees any pointer or length that escapes the input buffer.
 * Pass 2 opens the input again in the default mode and feeds every LOAD to
 * an elfset writing into a private temporary directory, then deletes what
 * was written so that a long run does not fill the disk.
 *
 * Build: see fuzz/README.md. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <perfgraft/common.h>
#include <perfgraft/jitdump.h>
#include <perfgraft/elfimage.h>
#include <perfgraft/code.h>
#include "fuzz_tmpdir.h"
#include "fuzz_touch.h"

static unsigned long stray_files;

static uint64_t touch_bytes(const uint8_t *p, uint64_t n)
{
	uint64_t sum = 0;

	if (!p)
		return 0;
	for (uint64_t i = 0; i < n; i++)
		sum += p[i];
	return sum;
}

static uint64_t touch_debug(const struct pg_jd_debug *dbg)
{
	uint64_t sum;

	if (!dbg)
		return 0;
	sum = dbg->offset + dbg->timestamp + dbg->code_addr + dbg->nr_lines;
	if (dbg->nr_lines && !dbg->lines)
		abort();	/* lines promised, none given */
	for (size_t i = 0; i < dbg->nr_lines; i++) {
		const struct pg_jd_line *ln = &dbg->lines[i];

		sum += ln->addr + ln->line + ln->discrim + touch_str(ln->file);
	}
	return sum;
}

static uint64_t touch_unwind(const struct pg_jd_unwind *uw)
{
	uint64_t sum;

	if (!uw)
		return 0;
	sum = uw->offset + uw->timestamp + uw->unwinding_size +
	      uw->eh_frame_hdr_size + uw->mapped_size;
	sum += touch_bytes(uw->eh_frame, uw->eh_frame_size);
	sum += touch_bytes(uw->eh_frame_hdr, uw->eh_frame_hdr_size);
	return sum;
}

/* INLINE_INFO: every range and frame, the strings they name. */
static uint64_t touch_inline(const struct pg_jd_inline *in)
{
	uint64_t sum;

	if (!in)
		return 0;
	sum = in->offset + in->timestamp + in->code_addr + in->nr_strings +
	      in->nr_ranges + in->dropped + in->nranges;
	if (in->nranges && !in->ranges)
		abort();	/* ranges promised, none given */
	if (in->dropped && in->nranges)
		abort();	/* a dropped record keeps no ranges */
	if (in->nranges > in->nr_ranges)
		abort();	/* more ranges than recorded */
	for (size_t i = 0; i < in->nranges; i++) {
		const struct pg_jd_inline_range *rg = &in->ranges[i];

		if (rg->nframes < 2 || rg->nframes > PG_JD_MAX_FRAMES || !rg->frames)
			abort();	/* the reader checks the frame count */
		sum += rg->off + rg->len + rg->nframes;
		for (uint32_t k = 0; k < rg->nframes; k++) {
			const struct pg_jd_frame *f = &rg->frames[k];

			if (!f->func)
				abort();	/* every frame names a function */
			sum += touch_str(f->func) + touch_str(f->file) + f->line;
		}
	}
	return sum;
}

static uint64_t touch_unload(const struct pg_jd_unload *ul)
{
	return ul->pid + ul->tid + ul->code_addr + ul->code_size + ul->code_index;
}

static uint64_t touch_load(const struct pg_jd_load *ld)
{
	uint64_t sum = ld->pid + ld->tid + ld->vma + ld->code_addr +
		       ld->code_size + ld->code_index;

	sum += touch_str(ld->name);
	sum += touch_bytes(ld->code, ld->code_size);
	sum += touch_debug(ld->debug);
	sum += touch_unwind(ld->unwind);
	sum += touch_inline(ld->inl);
	return sum;
}

static uint64_t touch_record(const struct pg_jd_record *rec)
{
	uint64_t sum = rec->id + rec->size + rec->offset + rec->timestamp;

	switch (rec->id) {
	case PG_JD_LOAD:
		sum += touch_load(&rec->u.load);
		break;
	case PG_JD_MOVE: {
		const struct pg_jd_move *mv = &rec->u.move;

		sum += mv->pid + mv->tid + mv->vma + mv->old_code_addr +
		       mv->new_code_addr + mv->code_size + mv->code_index;
		break;
	}
	case PG_JD_DEBUG_INFO:
		sum += touch_debug(&rec->u.debug);
		break;
	case PG_JD_UNWINDING_INFO:
		sum += touch_unwind(&rec->u.unwind);
		break;
	case PG_JD_INLINE_INFO:
		sum += touch_inline(&rec->u.inl);
		break;
	case PG_JD_UNLOAD:
		sum += touch_unload(&rec->u.unload);
		break;
	default:	/* CLOSE and unknown ids: prefix only */
		break;
	}
	return sum;
}

static uint64_t touch_header(const pg_jitdump *jd)
{
	const struct pg_jd_header *h = pg_jitdump_header(jd);
	uint64_t sum;

	if (!h)
		abort();
	sum = h->version + h->total_size + h->elf_mach + h->pad1 + h->pid +
	      h->timestamp + h->flags + h->big_endian + h->is_64bit + h->v8 +
	      h->line_bias;
	sum += touch_str(pg_jitdump_path(jd));
	sum += pg_jitdump_size(jd);
	return sum;
}

/* Pass 1: every record, every byte. */
static void walk_all(const uint8_t *data, size_t size)
{
	struct pg_diag diag;
	struct pg_jd_record rec;
	struct pg_jitdump_stats st = { .sz = sizeof(st) };
	pg_jitdump *jd = NULL;
	uint64_t sum = 0;
	int rc;

	memset(&diag, 0, sizeof(diag));
	diag.warn = NULL;
	if (pg_jitdump_open_mem(data, size, "fuzz", PG_JITDUMP_ALL_RECORDS,
				&diag, &jd) < 0)
		return;
	sum += touch_header(jd);
	while ((rc = pg_jitdump_next(jd, &rec)) > 0)
		sum += touch_record(&rec);
	pg_jitdump_stats(jd, &st);
	sum += st.records + st.loads + st.lines + st.truncated_bytes +
	       st.inline_infos + st.unloads + st.dropped_inline;
	if (st.dropped_inline > st.inline_infos)
		abort();	/* dropped more INLINE_INFO than read */
	pg_jitdump_close(jd);
	sink += sum + rc;
}

/* Pass 2: LOADs into ELF images. */
/* A name as the code model gives it: no control byte (and for a file
 * name no ':', which perf would split FILE:LINE at); NULL is fine. */
static bool name_ok(const char *s, bool file)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f || (file && *s == ':'))
			return false;
	return true;
}

static void build_images(const uint8_t *data, size_t size)
{
	struct pg_diag diag;
	struct pg_code_event ev;
	struct pg_elfset_opts opts;
	struct pg_elf_place place;
	pg_code_source *src = NULL;
	pg_elfset *set = NULL;
	size_t n;

	if (!fuzz_have_tmpdir)
		return;
	memset(&diag, 0, sizeof(diag));
	diag.warn = NULL;
	if (pg_code_open_mem(data, size, "fuzz", &diag, &src) < 0)
		return;

	memset(&opts, 0, sizeof(opts));
	opts.sz = sizeof(opts);
	opts.dir = fuzz_tmpdir;
	/* Small packs, so that a short input can fill more than one. */
	opts.pack_limit = 0;
	if (size && (data[size - 1] & 1))
		opts.pack_limit = 64;
	opts.per_function = size > 1 && (data[size - 2] & 3) == 3;
	/* the memory layout, with and without carried code */
	opts.memory_layout = size > 1 && (data[size - 2] & 3) == 1;
	opts.carry_live = size > 1 && (data[size - 2] & 4);

	uint64_t seen_addr[64], seen_time[64];
	size_t nseen = 0;

	if (pg_elfset_new(pg_code_process(src), "fuzz", &opts, &diag, &set) < 0) {
		pg_code_close(src);
		return;
	}
	while (pg_code_next(src, &ev) > 0) {
		int rc;

		if (ev.kind != PG_CODE_LOAD) {
			if (opts.memory_layout && pg_elfset_add(set, &ev, &place) < 0)
				break;
			continue;
		}
		/* the model's promise: rows inside the code, by offset; names
		 * without control bytes, file names without a ':' */
		if (!name_ok(ev.name, false))
			abort();
		for (size_t i = 0; i < ev.nlines; i++)
			if (ev.lines[i].off >= ev.size ||
			    (i && ev.lines[i].off < ev.lines[i - 1].off) ||
			    !name_ok(ev.lines[i].file, true))
				abort();
		/* and its inline chains: inside the code, not empty, in order
		 * without overlap, 2.. frames each with a function */
		for (size_t i = 0; i < ev.ninlines; i++) {
			const struct pg_code_inline *c = &ev.inlines[i];

			if (!c->len || c->off + c->len > ev.size || c->nframes < 2 ||
			    (i && c->off < ev.inlines[i - 1].off + ev.inlines[i - 1].len))
				abort();
			for (uint32_t k = 0; k < c->nframes; k++) {
				if (!name_ok(c->frames[k].func, false) ||
				    !name_ok(c->frames[k].file, true))
					abort();
				sink += touch_str(c->frames[k].func) + touch_str(c->frames[k].file) +
					c->frames[k].line;
			}
		}
		if (nseen < 64) {	/* the first LOADs: frames to note */
			seen_addr[nseen] = ev.addr + ev.size / 2;
			seen_time[nseen++] = ev.time;
		}
		/* and since: never after the LOAD */
		if (pg_code_since(src) > ev.time)
			abort();
		memset(&place, 0, sizeof(place));
		rc = pg_elfset_add_since(set, &ev, pg_code_since(src), &place);
		if (rc < 0)
			break;
		if (rc == 0 && place.image == PG_ELF_LATER) {
			if (!opts.memory_layout)
				abort();
		} else if (rc == 0) {
			const struct pg_elf_image *im;

			if (place.image >= pg_elfset_count(set))
				abort();	/* placement names no image */
			im = pg_elfset_image(set, place.image);
			if (!im)
				abort();
			sink += place.pgoff + place.map_len + im->nfuncs;
		}
	}
	/* with carrying, sometimes only noted frames: the middle of the
	 * first LOADs and the input's own words, at times around the LOADs' */
	if (opts.memory_layout && opts.carry_live && (data[size - 2] & 8)) {
		for (size_t i = 0; i < nseen; i++) {
			uint64_t w[2] = { seen_addr[i], 0 };

			if (i * 8 + 8 <= size)
				memcpy(&w[1], data + i * 8, 8);
			if (pg_elfset_note_frames(set, seen_time[i] + (data[i % size] & 15), w, 2) < 0)
				break;
		}
	}
	if (pg_elfset_finish(set) == 0) {
		const struct pg_elf_map *m = pg_elfset_maps(set, &n);

		/* every map names an image, inside the address space */
		for (size_t i = 0; i < n; i++)
			if (m[i].image >= pg_elfset_count(set) || !m[i].len ||
			    m[i].start + m[i].len < m[i].start ||
			    pg_elfset_map_loaded(set, i) < m[i].time ||
			    (m[i].kind != PG_ELF_MAP_LOAD && pg_elfset_map_loaded(set, i) != m[i].time))
				abort();
		(void)pg_elfset_commit(set);
	}

	n = pg_elfset_count(set);
	for (size_t i = 0; i < n; i++) {
		const struct pg_elf_image *im = pg_elfset_image(set, i);

		if (!im)
			abort();
		sink += touch_str(im->name) + im->size + im->nfuncs +
			touch_bytes(im->build_id, sizeof(im->build_id));
		if (im->path)
			(void)unlink(im->path);
	}
	pg_elfset_free(set);
	pg_code_close(src);
	/* files the set wrote but did not list */
	if (fuzz_tmpdir_sweep() && stray_files++ == 0)
		fprintf(stderr, "fuzz_jitdump: note: %s held files not listed by pg_elfset_image()\n",
			fuzz_tmpdir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_tmpdir_make("fuzz_jitdump", "pass 2 disabled");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	walk_all(data, size);
	build_images(data, size);
	return 0;
}
