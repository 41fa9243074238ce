/* SPDX-License-Identifier: MIT */
/* Structs that can grow: the caller says how large its copy is (a leading
 * size_t, the libbpf OPTS idiom), so fields can be added without breaking
 * programs built against an older header. */
#include <errno.h>
#include <string.h>
#include "util/util.h"

/* The leading size_t of a sized struct. */
static size_t size_of(const void *p)
{
	size_t sz;

	memcpy(&sz, p, sizeof(sz));
	return sz;
}

int pg_sized_in(void *dst, size_t dst_size, const void *src)
{
	size_t src_size;

	memset(dst, 0, dst_size);
	if (!src)
		return 0;
	src_size = size_of(src);
	if (src_size < sizeof(size_t))
		return -EINVAL;
	for (size_t i = dst_size; i < src_size; i++)
		if (((const unsigned char *)src)[i])
			return -EINVAL;
	memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
	return 0;
}

int pg_sized_opts(void *dst, size_t dst_size, const void *src, bool required,
		  const char *what, struct pg_diag *diag)
{
	if (!src && required) {
		memset(dst, 0, dst_size);
		return pg_err(diag, -EINVAL, "%s: no options", what);
	}
	if (pg_sized_in(dst, dst_size, src) < 0)
		return pg_err(diag, -EINVAL, "%s: options this library does not know (sz %zu)",
			      what, size_of(src));
	return 0;
}

void pg_sized_out(void *dst, const void *src, size_t src_size)
{
	size_t n = size_of(dst);

	if (n > src_size)
		n = src_size;
	/* everything but the size, which stays the caller's */
	if (n > sizeof(size_t))
		memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
		       n - sizeof(size_t));
}
