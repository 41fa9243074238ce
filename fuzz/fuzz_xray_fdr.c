/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the XRay FDR reader and the conversion of what
 * it reads (see fuzz_xray_walk.h).  The header is forced to a FDR type
 * and a supported version (either byte order, picked by the input's first
 * byte), so that every input reaches the record decoder. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_xray_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf;

	if (size < 4)
		return xray_fuzz_one(data, size);
	buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	{
		unsigned v = 1 + buf[0] % 5;
		int be = (buf[1] & 0x80) != 0;

		buf[be ? 1 : 0] = (uint8_t)v;
		buf[be ? 0 : 1] = 0;
		buf[be ? 3 : 2] = 1;
		buf[be ? 2 : 3] = 0;
	}
	xray_fuzz_one(buf, size);
	free(buf);
	return 0;
}
