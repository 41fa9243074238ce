/* SPDX-License-Identifier: MIT */
/* dlopen: dlopen(argv[1]) (libplug.so), run plug_spin() in it, dlclose()
 * it, then spin in after_close().  The profile's maps are captured at
 * exit, so the plugin's mapping is absent and its samples (leaf and the
 * plug_spin -> plug_leaf frames) cannot be symbolized by anyone. */
#include <dlfcn.h>
#include <stdio.h>

#include "spin.h"

__attribute__((noinline)) void before_open(void) { SPIN_BODY(150000000UL); }
__attribute__((noinline)) void after_close(void) { SPIN_BODY(450000000UL); }

__attribute__((noinline)) static int run_plugin(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	void (*fn)(unsigned long);

	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	fn = (void (*)(unsigned long))dlsym(h, "plug_spin");
	if (!fn) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	fn(1000000);
	if (dlclose(h)) {
		fprintf(stderr, "dlclose: %s\n", dlerror());
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dlopen PLUGIN.so\n");
		return 2;
	}
	before_open();
	if (run_plugin(argv[1]))
		return 1;
	after_close();
	return 0;
}
