/* SPDX-License-Identifier: MIT */
/* inject's images in perf's build-id cache (bidcache.h has the layout).
 * A recording that moves (mv OUTPUT OUTPUT.d elsewhere/) or travels
 * (perf archive, unpacked into another machine's cache) names its images
 * by paths that are gone; perf then finds them by build-id here, as it
 * finds perf inject --jit's.  The entry is a hard link to the image (no
 * bytes written; images are never rewritten in place, so the two names
 * stay the same file), a sparse copy where a link cannot be made (another
 * file system); never a symlink to OUTPUT.d, which would break with the
 * move it is there for and which perf archive would pack as a link. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "inject/bidcache.h"
#include "util/util.h"

/* ---- where the cache is ---- */

/* buildid.dir in one perf config file (git's ini syntax, as perf reads
 * it: [section], "name = value", # and ; comments, quoted values);
 * replaces *out when the file sets it. */
static void config_dir(const char *file, char **out)
{
	FILE *f = fopen(file, "re");
	char line[4096];
	bool in_buildid = false;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *e, *v;

		while (isspace((unsigned char)*p))
			p++;
		if (*p == '[') {
			e = strchr(p, ']');
			if (!e)
				continue;
			*e = '\0';
			p++;
			while (isspace((unsigned char)*p))
				p++;
			in_buildid = !strncasecmp(p, "buildid", 7) &&
				     (p[7] == '\0' || isspace((unsigned char)p[7]));
			continue;
		}
		if (!in_buildid || strncasecmp(p, "dir", 3))
			continue;
		p += 3;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '=')
			continue;
		p++;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '"') {
			v = ++p;
			e = strchr(p, '"');
			if (!e)
				continue;
		} else {
			v = p;
			e = p + strcspn(p, "#;\r\n");
			while (e > v && isspace((unsigned char)e[-1]))
				e--;
		}
		*e = '\0';
		if (*v) {
			char *s = strdup(v);

			if (s) {
				free(*out);
				*out = s;
			}
		}
	}
	fclose(f);
}

char *pg_bidcache_default_dir(void)
{
	const char *env = getenv("PERF_BUILDID_DIR");
	const char *home = getenv("HOME");
	char *dir = NULL, *user;

	if (env && *env)
		return strdup(env);
	if (!getenv("PERF_CONFIG_NOSYSTEM"))
		config_dir("/etc/perfconfig", &dir);
	if (home && *home && !getenv("PERF_CONFIG_NOGLOBAL") &&
	    asprintf(&user, "%s/.perfconfig", home) >= 0) {
		config_dir(user, &dir);
		free(user);
	}
	if (!dir && home && *home && asprintf(&dir, "%s/.debug", home) < 0)
		dir = NULL;
	return dir;
}

/* ---- one entry ---- */

/* mkdir -p of the cache directory itself: the user's choice, so links
 * on its way (a ~/.debug that is a link to a bigger disk) are followed. */
static int make_top(const char *dir, struct pg_bidcache_count *c)
{
	char *p = strdup(dir);
	int ret = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		bool last = *s == '\0';

		if (*s != '/' && !last)
			continue;
		*s = '\0';
		if (mkdir(p, 0755) == 0)
			c->dirs++;
		else if (errno != EEXIST) {
			ret = -errno;
			break;
		}
		if (last)
			break;
		*s = '/';
	}
	free(p);
	return ret;
}

/* The subdirectory name of fd, made when missing; never through a link
 * (the cache is shared: a planted link must not send an entry elsewhere). */
static int subdir(int fd, const char *name, struct pg_bidcache_count *c)
{
	int sub;

	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	if (mkdirat(fd, name, 0755) == 0)
		c->dirs++;
	else if (errno != EEXIST)
		return -errno;
	sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return sub < 0 ? -errno : sub;
}

/* path (relative to dirfd, or absolute) is a regular file with build-id bid. */
static bool holds(int dirfd, const char *path, const uint8_t bid[20])
{
	uint8_t id[20];
	char proc[64];
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	bool ok;

	if (fd < 0)
		return false;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	     pg_file_build_id(proc, id) == 20 && !memcmp(id, bid, 20);
	close(fd);
	return ok;
}

/* A copy of in as name in dirfd, holes kept (memory-layout images are
 * sparse), through a temporary renamed into place. */
static int copy_file(int in, int dirfd, const char *name, struct pg_bidcache_count *c,
		     struct pg_diag *d)
{
	struct pg_outfile of;
	static char buf[1 << 16];
	off_t end = lseek(in, 0, SEEK_END), pos = 0;
	int ret;

	if (end < 0)
		return pg_err(d, -errno, "%s", strerror(errno));
	ret = pg_outfile_open(&of, dirfd, name, d);
	if (ret)
		return ret;
	while (!ret && pos < end) {
		off_t data = lseek(in, pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0)
			data = pos;	/* no SEEK_DATA here: copy it all */
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0 || hole > end)
			hole = end;
		for (off_t o = data; !ret && o < hole;) {
			size_t n = (size_t)(hole - o) < sizeof(buf) ? (size_t)(hole - o) : sizeof(buf);
			ssize_t r = pread(in, buf, n, o);

			if (r <= 0) {
				ret = pg_err(d, r < 0 ? -errno : -EIO, "reading the image: %s",
					     r < 0 ? strerror(errno) : "short read");
			} else if (pg_pwrite_all(of.fd, buf, (size_t)r, (uint64_t)o) < 0) {
				ret = pg_err(d, -errno, "%s", strerror(errno));
			} else {
				o += r;
				c->copy_bytes += (uint64_t)r;
			}
		}
		pos = hole;
	}
	if (!ret && ftruncate(of.fd, end) < 0)
		ret = pg_err(d, -errno, "%s", strerror(errno));
	if (!ret)
		ret = pg_outfile_commit(&of, d);
	else
		pg_outfile_abort(&of);
	return ret;
}

/* hexdir/elf: a hard link to the image, else a copy. */
static int put_elf(int hexfd, const char *path, const uint8_t bid[20],
		   struct pg_bidcache_count *c, struct pg_diag *d)
{
	int in, ret;

	if (holds(hexfd, "elf", bid))
		return 0;
	unlinkat(hexfd, "elf", 0);	/* something else had the name */
	if (linkat(AT_FDCWD, path, hexfd, "elf", 0) == 0) {
		c->files++;
		return 0;
	}
	if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP &&
	    errno != EOPNOTSUPP)
		return pg_err(d, -errno, "linking %s: %s", path, strerror(errno));
	in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return pg_err(d, -errno, "%s: %s", path, strerror(errno));
	ret = copy_file(in, hexfd, "elf", c, d);
	close(in);
	if (!ret) {
		c->files++;
		c->copies++;
	}
	return ret;
}

/* .build-id/xx/yyyy -> target, replacing a link that points elsewhere. */
static int put_link(int xxfd, const char *name, const char *target,
		    struct pg_bidcache_count *c, struct pg_diag *d)
{
	char tmp[256], old[4096];
	ssize_t n;

	if (symlinkat(target, xxfd, name) == 0) {
		c->files++;
		return 0;
	}
	if (errno != EEXIST)
		return pg_err(d, -errno, "%s: %s", name, strerror(errno));
	n = readlinkat(xxfd, name, old, sizeof(old));
	if (n >= 0 && (size_t)n == strlen(target) && !memcmp(old, target, (size_t)n))
		return 0;
	if (pg_tmpname(tmp, sizeof(tmp), name, (unsigned)rand()) < 0)
		return pg_err(d, -ENAMETOOLONG, "%s: name too long", name);
	if (symlinkat(target, xxfd, tmp) < 0)
		return pg_err(d, -errno, "%s: %s", name, strerror(errno));
	if (renameat(xxfd, tmp, xxfd, name) < 0) {
		int e = errno;

		unlinkat(xxfd, tmp, 0);
		return pg_err(d, -e, "%s: %s", name, strerror(e));
	}
	c->files++;
	return 0;
}

int pg_bidcache_add(const char *dir, const char *path, const uint8_t bid[20],
		    struct pg_bidcache_count *c, struct pg_diag *d)
{
	char hex[41], link[64], *target = NULL, *comp = NULL;
	int top = -1, fd = -1, ret;

	for (int i = 0; i < 20; i++)
		snprintf(hex + 2 * i, 3, "%02x", bid[i]);
	if (path[0] != '/')
		return pg_err(d, -EINVAL, "%s: not an absolute path", path);
	ret = make_top(dir, c);
	if (ret)
		return pg_err(d, ret, "%s: %s", dir, strerror(-ret));
	top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0)
		return pg_err(d, -errno, "%s: %s", dir, strerror(errno));
	/* an entry for this build-id that holds it (one perf or an earlier
	 * run made, perhaps for the image at another path) is kept */
	snprintf(link, sizeof(link), ".build-id/%.2s/%s/elf", hex, hex + 2);
	if (holds(top, link, bid)) {
		c->present++;
		close(top);
		return 0;
	}
	link[strlen(link) - 4] = '\0';
	if (holds(top, link, bid)) {	/* the older layout: a file there */
		c->present++;
		close(top);
		return 0;
	}
	/* DIR/<path>/<hex>/elf, one directory at a time */
	comp = strdup(path + 1);
	if (!comp || asprintf(&target, "../../%s/%s", path + 1, hex) < 0) {
		target = NULL;
		ret = pg_err(d, -ENOMEM, "out of memory");
		goto out;
	}
	fd = dup(top);
	for (char *save = NULL, *s = strtok_r(comp, "/", &save); fd >= 0 && s;
	     s = strtok_r(NULL, "/", &save)) {
		int sub = subdir(fd, s, c);

		close(fd);
		fd = sub;
	}
	if (fd >= 0) {
		int sub = subdir(fd, hex, c);

		close(fd);
		fd = sub;
	}
	if (fd < 0) {
		ret = pg_err(d, fd, "%s/%s/%s: %s", dir, path + 1, hex, strerror(-fd));
		goto out;
	}
	ret = put_elf(fd, path, bid, c, d);
	close(fd);
	fd = -1;
	if (ret)
		goto out;
	/* DIR/.build-id/xx/yyyy -> ../../<path>/<hex> */
	fd = subdir(top, ".build-id", c);
	if (fd >= 0) {
		char xx[3] = { hex[0], hex[1], 0 };
		int sub = subdir(fd, xx, c);

		close(fd);
		fd = sub;
	}
	if (fd < 0) {
		ret = pg_err(d, fd, "%s/.build-id/%.2s: %s", dir, hex, strerror(-fd));
		goto out;
	}
	ret = put_link(fd, hex + 2, target, c, d);
	if (!ret)
		c->added++;
out:
	if (fd >= 0)
		close(fd);
	close(top);
	free(comp);
	free(target);
	return ret;
}
