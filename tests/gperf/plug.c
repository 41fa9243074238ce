/* SPDX-License-Identifier: MIT */
/* libplug.so for the dlopen scenario: plug_spin -> plug_leaf.  Only
 * dlopen'ed (never linked), so it must be unloadable by dlclose. */
#include "spin.h"

__attribute__((noinline)) static void plug_leaf(unsigned long unit)
{
	SPIN_BODY(400 * unit);
}

__attribute__((noinline)) void plug_spin(unsigned long unit)
{
	SPIN_BODY(100 * unit);
	plug_leaf(unit);
}
