/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the XRay trace readers and the conversion of what
 * they read (see fuzz_xray_walk.h), built twice: fuzz_xray_fdr with
 * XRAY_TYPE 1 and fuzz_xray_basic with XRAY_TYPE 0.  The header is forced
 * to that type and a supported version (either byte order, picked by the
 * input's second byte), so that every input reaches the record decoder. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_xray_walk.h"

#if XRAY_TYPE == 1
#define XRAY_VERSIONS 5		/* FDR 1-5 */
#else
#define XRAY_VERSIONS 3		/* basic 1-3 */
#endif

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
		unsigned v = 1 + buf[0] % XRAY_VERSIONS;
		int be = (buf[1] & 0x80) != 0;

		buf[be ? 1 : 0] = (uint8_t)v;
		buf[be ? 0 : 1] = 0;
		buf[be ? 3 : 2] = XRAY_TYPE;
		buf[be ? 2 : 3] = 0;
	}
	xray_fuzz_one(buf, size);
	free(buf);
	return 0;
}
