/* SPDX-License-Identifier: MIT */
/* The YAML instrumentation maps `llvm-xray extract` writes (internal to
 * xray/: instrmap.c reads them where it would read a binary's map). */
#ifndef PG_XRAY_MAPYAML_H
#define PG_XRAY_MAPYAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pg_diag;

struct pg_yaml_sled {
	uint32_t id;
	uint64_t address, function;
	uint8_t kind;			/* 0-5 as in the binary's map */
	bool always_instrument;
	uint8_t version;
	char *function_name;		/* NULL when absent or empty */
	unsigned line;			/* where the entry starts (1-based) */
};

/* Does the buffer look like a YAML document rather than a binary: its first
 * line that is not blank or a comment starts with "---" or "- "? */
bool pg_yaml_map_probe(const char *buf, size_t len);

/* Parses the sled list; strict: an unknown or repeated key, a missing
 * required one (id, address, function, kind, always-instrument), a value
 * out of range, anything past the subset llvm-xray writes, is an error
 * "NAME: line N: ...".  0 with *out (free with pg_yaml_sleds_free), or
 * -EINVAL, -ENOMEM. */
int pg_yaml_map_parse(const char *buf, size_t len, const char *name, struct pg_diag *diag,
		      struct pg_yaml_sled **out, size_t *n);
void pg_yaml_sleds_free(struct pg_yaml_sled *v, size_t n);

#endif
