/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the XRay instrumentation-map reader: an ELF file
 * (libelf parses the container; this exercises our reading of
 * xray_instr_map, the sled address arithmetic, REL/RELA relocations of
 * every XRay target, .symtab lookups, demangling and the libdw line
 * lookups) or an llvm-xray YAML map, then every function it reports is
 * read back in full. */
#include <stdint.h>

#include <perfgraft/xray.h>
#include "fuzz_touch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pg_diag diag = { 0 };
	pg_xray_map *m;

	if (pg_xray_map_open_mem(data, size, "fuzz", &diag, &m) < 0)
		return 0;
	/* a YAML map's IDs may be sparse up to 2^28: its first IDs suffice */
	size_t last = pg_xray_map_count(m) + 1;

	for (size_t i = 0; i <= last && i <= 65536; i++) {
		const struct pg_xray_func *f = pg_xray_map_func(m, (uint32_t)i);

		if (!f)
			continue;
		sink += f->addr + f->size + touch_str(f->name) + f->line + f->column +
			touch_str(f->file) + touch_str(f->linkage_name);
	}
	if (pg_xray_map_binary(m))	/* NULL for a YAML map */
		sink += pg_xray_map_binary(m)->text_size;
	pg_xray_map_close(m);
	return 0;
}
