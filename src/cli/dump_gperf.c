/* SPDX-License-Identifier: MIT */
/* perfgraft dump for gperftools CPU profiles: header, the distinct stacks
 * with their summed counts, and the mapped objects. */
#include <stdlib.h>
#include <string.h>

#include <perfgraft/gperf.h>
#include "cli/cli.h"

static void json_mapping(const struct pg_gperf_mapping *m, bool first)
{
	printf("%s\n{\"start\":\"0x%llx\",\"end\":\"0x%llx\",\"perms\":", first ? "" : ",",
	       (unsigned long long)m->start, (unsigned long long)m->end);
	json_str(stdout, m->perms);
	printf(",\"offset\":\"0x%llx\",\"dev\":\"%02x:%02x\",\"inode\":%llu,\"path\":",
	       (unsigned long long)m->offset, m->maj, m->min, (unsigned long long)m->inode);
	json_str(stdout, m->path);
	printf(",\"deleted\":%s,\"line_offset\":%llu}", m->deleted ? "true" : "false",
	       (unsigned long long)m->line_offset);
}

int dump_gperf(const char *path, bool json, struct cli_warnings *w)
{
	struct pg_diag diag;
	struct pg_gperf_stats st = { .sz = sizeof(st) };
	const struct pg_gperf_header *h;
	pg_gperf *g;
	int ret;

	cli_diag_init(&diag, w);
	ret = pg_gperf_open(path, &diag, &g);
	if (ret < 0) {
		if (json) {
			printf("{\"file\":");
			json_str(stdout, cli_shown_path(path, true));
			printf(",\"format\":\"gperftools-cpu\",");
			json_warnings_error(stdout, w, diag.err);
			printf("}\n");
		}
		cli_error("%s", diag.err);
		return EXIT_BADINPUT;
	}
	h = pg_gperf_header(g);
	pg_gperf_stats(g, &st);
	if (json) {
		printf("{\"file\":");
		json_str(stdout, cli_shown_path(path, true));
		printf(",\"format\":\"gperftools-cpu\",\"word_bits\":%u,\"byte_order\":\"%s\",\"header_slots\":%llu,\"version\":%llu,\"period_us\":%llu,\"total_samples\":%llu,\"records\":%llu,\"trailer\":%s,\"binary_bytes\":%llu,\"truncated_at\":%llu,\"zero_pc_records\":%llu,\"zero_pc_samples\":%llu,\"empty_records\":%llu,\"map_lines\":%llu,\"ignored_lines\":%llu,\n\"stacks\":[",
		       h->word_bits, h->big_endian ? "big" : "little",
		       (unsigned long long)h->header_slots, (unsigned long long)h->version,
		       (unsigned long long)h->period_us, (unsigned long long)st.samples,
		       (unsigned long long)st.records, st.trailer ? "true" : "false",
		       (unsigned long long)st.binary_bytes, (unsigned long long)st.truncated_at,
		       (unsigned long long)st.zero_pc_records,
		       (unsigned long long)st.zero_pc_samples,
		       (unsigned long long)st.empty_records, (unsigned long long)st.map_lines,
		       (unsigned long long)st.ignored_lines);
		for (size_t i = 0; i < pg_gperf_stack_count(g); i++) {
			const struct pg_gperf_stack *s = pg_gperf_stack(g, i);

			printf("%s\n{\"count\":%llu,\"offset\":%llu,\"pcs\":[", i ? "," : "",
			       (unsigned long long)s->count, (unsigned long long)s->offset);
			for (uint32_t k = 0; k < s->depth; k++)
				printf("%s\"0x%llx\"", k ? "," : "", (unsigned long long)s->pcs[k]);
			printf("]}");
		}
		printf("\n],\n\"mappings\":[");
		for (size_t i = 0; i < pg_gperf_mapping_count(g); i++)
			json_mapping(pg_gperf_mapping(g, i), i == 0);
		printf("\n],");
		json_warnings_error(stdout, w, NULL);
		printf("}\n");
	} else {
		printf("gperftools CPU profile: %u-bit %s-endian slots, %llu header words, version %llu, period %llu us\n",
		       h->word_bits, h->big_endian ? "big" : "little",
		       (unsigned long long)h->header_slots, (unsigned long long)h->version,
		       (unsigned long long)h->period_us);
		printf("%llu records, %llu samples, %zu distinct stacks; trailer %s\n",
		       (unsigned long long)st.records, (unsigned long long)st.samples,
		       pg_gperf_stack_count(g), st.trailer ? "present" : "missing");
		for (size_t i = 0; i < pg_gperf_stack_count(g); i++) {
			const struct pg_gperf_stack *s = pg_gperf_stack(g, i);

			printf("%10llu  %8llu  %u PCs:", (unsigned long long)s->offset,
			       (unsigned long long)s->count, s->depth);
			for (uint32_t k = 0; k < s->depth; k++)
				printf(" 0x%llx", (unsigned long long)s->pcs[k]);
			printf("\n");
		}
		printf("%zu mappings:\n", pg_gperf_mapping_count(g));
		for (size_t i = 0; i < pg_gperf_mapping_count(g); i++) {
			const struct pg_gperf_mapping *m = pg_gperf_mapping(g, i);

			printf("%10llu  %016llx-%016llx %s %08llx %02x:%02x %llu ",
			       (unsigned long long)m->line_offset, (unsigned long long)m->start,
			       (unsigned long long)m->end, m->perms, (unsigned long long)m->offset,
			       m->maj, m->min, (unsigned long long)m->inode);
			out_escaped(stdout, m->path);
			printf("%s\n", m->deleted ? " (deleted)" : "");
		}
		printf("summary: %llu records, %llu samples, %zu stacks, %zu mappings, %llu zero-PC records skipped, %llu lines ignored\n",
		       (unsigned long long)st.records, (unsigned long long)st.samples,
		       pg_gperf_stack_count(g), pg_gperf_mapping_count(g),
		       (unsigned long long)st.zero_pc_records, (unsigned long long)st.ignored_lines);
	}
	pg_gperf_close(g);
	return 0;
}
