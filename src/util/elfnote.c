/* SPDX-License-Identifier: MIT */
/* The GNU build-id note of an ELF file. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <gelf.h>

#include "util/util.h"

unsigned pg_elf_build_id(Elf *elf, uint8_t id[20])
{
	Elf_Scn *scn = NULL;
	unsigned n = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t off = 0, noff, doff;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !(d = elf_getdata(scn, NULL)))
			continue;
		while ((noff = gelf_getnote(d, off, &nh, &off, &doff)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)d->d_buf + off, "GNU", 4) && nh.n_descsz <= 20 &&
			    nh.n_descsz > 0) {
				memcpy(id, (char *)d->d_buf + doff, nh.n_descsz);
				n = nh.n_descsz;
			}
			off = noff;
		}
	}
	return n;
}

unsigned pg_file_build_id(const char *path, uint8_t id[20])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	unsigned n = 0;
	struct stat sb;
	Elf *elf;

	if (fd < 0)
		return 0;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {	/* a device could read for ever */
		close(fd);
		return 0;
	}
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF)
		n = pg_elf_build_id(elf, id);
	elf_end(elf);
	close(fd);
	return n;
}
