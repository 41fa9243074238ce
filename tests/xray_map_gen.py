#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Small XRay instrumentation maps of every XRay target, as yaml2obj input.

Each Case is one ELF (relocatable object or shared object) holding a .text
with three FUNC symbols, an xray_instr_map of two sleds per function (enter,
exit), and the relocations that give the sleds' function words their values,
of one kind:

  abs       version-0 sleds, an absolute word relocation (R_X86_64_64,
            R_AARCH64_ABS64, R_ARM_ABS32, R_PPC64_ADDR64, R_MIPS_32/64,
            R_390_64) against the function's symbol (enter sled) or a
            symbol at the start of .text plus the function's offset (exit)
  relative  version-0 sleds of a shared object, the target's RELATIVE
            relocation (MIPS: R_MIPS_REL32 without a symbol)
  pc        version-2 sleds, a PC-relative word relocation (R_X86_64_PC64,
            R_AARCH64_PREL64, R_ARM_REL32, R_PPC64_REL64, R_MIPS_PC32,
            R_390_PC64) against the function's symbol

with SHT_RELA or SHT_REL (the addend then in the section's word), in the
byte orders the target has.  Case.functions is what a reader must find:
{id: address}, link-time addresses (section-relative in a .o, as llvm-xray
gives them).  A decoy relocation section for .text carries relocations at
offsets that coincide with the map's words: only the map's own section (a
.o) or the dynamic one (a shared object) may be used.

Run as a script to list the cases:  python3 tests/xray_map_gen.py
"""

import struct

# name: (machine, 64-bit, byte orders, abs, pc, relative)
ARCHES = {
    "x86_64": ("EM_X86_64", True, ("<",), "R_X86_64_64", "R_X86_64_PC64",
               "R_X86_64_RELATIVE"),
    "aarch64": ("EM_AARCH64", True, ("<", ">"), "R_AARCH64_ABS64",
                "R_AARCH64_PREL64", "R_AARCH64_RELATIVE"),
    "arm": ("EM_ARM", False, ("<", ">"), "R_ARM_ABS32", "R_ARM_REL32",
            "R_ARM_RELATIVE"),
    "ppc64": ("EM_PPC64", True, ("<", ">"), "R_PPC64_ADDR64", "R_PPC64_REL64",
              "R_PPC64_RELATIVE"),
    "mips": ("EM_MIPS", False, ("<", ">"), "R_MIPS_32", "R_MIPS_PC32",
             "R_MIPS_REL32"),
    "mips64": ("EM_MIPS", True, ("<", ">"), "R_MIPS_64", None, "R_MIPS_REL32"),
    # yaml2obj 14 has no names for SystemZ's types: R_390_64, _PC64, _RELATIVE
    "s390x": ("EM_S390", True, (">",), "0x16", "0x17", "0xc"),
}

FUNC_OFFSETS = (0x10, 0x40, 0x80)   # within .text; none at 0 (llvm-xray's
                                    # ID numbering takes function 0 as "none")
FUNC_SIZE = 0x30
TEXT_SIZE = 0xc0
DSO_TEXT = 0x1000
DSO_MAP = 0x2000


class Case:
    def __init__(self, arch, byte_order, etype, sec, kind):
        self.arch, self.byte_order, self.etype, self.sec, self.kind = \
            arch, byte_order, etype, sec, kind
        mach, self.is64, _, self.r_abs, self.r_pc, self.r_rel = ARCHES[arch]
        self.machine = mach
        self.name = "%s-%s-%s-%s-%s" % (arch, "le" if byte_order == "<" else "be",
                                        "o" if etype == "ET_REL" else "so",
                                        sec[4:].lower(), kind)
        base = 0 if etype == "ET_REL" else DSO_TEXT
        self.funcs = [base + o for o in FUNC_OFFSETS]
        self.functions = {i + 1: a for i, a in enumerate(self.funcs)}

    def yaml(self):
        word = 8 if self.is64 else 4
        ent = 32 if self.is64 else 16
        wfmt = self.byte_order + ("Q" if self.is64 else "I")
        dso = self.etype == "ET_DYN"
        map_addr = DSO_MAP if dso else 0
        rela = self.sec == "SHT_RELA"
        version = 2 if self.kind == "pc" else 0
        content = b""
        relocs = []
        for fi, f in enumerate(self.funcs):
            for si, (sled, kind) in enumerate(((f, 0), (f + 0x20, 1))):
                at = map_addr + len(content)     # the entry's address
                fword_at = at + word
                if self.kind == "pc":
                    sym, addend = "f%d" % fi, 0
                    rtype = self.r_pc
                elif self.kind == "relative":
                    sym, addend, rtype = None, f, self.r_rel
                elif si == 0:
                    sym, addend, rtype = "f%d" % fi, 0, self.r_abs
                else:
                    sym, addend, rtype = "text_start", f - self.funcs[0] + \
                        FUNC_OFFSETS[0], self.r_abs
                # the address word holds its value (not what is tested);
                # the function word only what REL's addend needs
                aword = (sled - at) & ((1 << (8 * word)) - 1) if version >= 2 else sled
                fword = 0 if rela else addend
                content += struct.pack(wfmt, aword) + struct.pack(wfmt, fword)
                content += bytes([kind, 1, version]) + bytes(ent - 2 * word - 3)
                relocs.append((fword_at - (0 if dso else map_addr), rtype, sym, addend))
        text_sym = 0 if not dso else DSO_TEXT
        lines = [
            "--- !ELF",
            "FileHeader:",
            "  Class: %s" % ("ELFCLASS64" if self.is64 else "ELFCLASS32"),
            "  Data: %s" % ("ELFDATA2LSB" if self.byte_order == "<" else "ELFDATA2MSB"),
            "  Type: %s" % self.etype,
            "  Machine: %s" % self.machine,
            "Sections:",
            "  - Name: .text",
            "    Type: SHT_PROGBITS",
            "    Flags: [ SHF_ALLOC, SHF_EXECINSTR ]",
            "    Address: 0x%x" % (DSO_TEXT if dso else 0),
            "    AddressAlign: 0x10",
            "    Size: 0x%x" % TEXT_SIZE,
            "  - Name: xray_instr_map",
            "    Type: SHT_PROGBITS",
            "    Flags: [ SHF_ALLOC ]",
            "    Address: 0x%x" % map_addr,
            "    AddressAlign: 0x8",
            "    Content: %s" % content.hex(),
        ]
        symtab = ".dynsym" if dso else ".symtab"
        rname = (".rela" if rela else ".rel") + (".dyn" if dso else "xray_instr_map")
        lines += [
            "  - Name: %s" % rname,
            "    Type: %s" % self.sec,
            "    Flags: [ %s ]" % ("SHF_ALLOC" if dso else "SHF_INFO_LINK"),
            "    Link: %s" % symtab,
        ]
        if not dso:
            lines.append("    Info: xray_instr_map")
        lines.append("    Relocations:")
        for off, rtype, sym, addend in relocs:
            lines.append("      - Offset: 0x%x" % off)
            lines.append("        Type: %s" % rtype)
            if sym:
                lines.append("        Symbol: %s" % sym)
            if rela and addend:
                lines.append("        Addend: %d" % addend)
        # a decoy: .text's relocations at the map's offsets and addresses
        lines += [
            "  - Name: %s" % ((".rela" if rela else ".rel") + ".text"),
            "    Type: %s" % self.sec,
            "    Flags: [ SHF_INFO_LINK ]",
            "    Link: .symtab",
            "    Info: .text",
            "    Relocations:",
        ]
        for off, rtype, _, _ in relocs:
            lines.append("      - Offset: 0x%x" % off)
            lines.append("        Type: %s" % self.r_abs)
            lines.append("        Symbol: text_start")
            if rela:
                lines.append("        Addend: 4")

        def syms(key):
            out = ["%s:" % key,
                   "  - Name: text_start",
                   "    Section: .text",
                   "    Value: 0x%x" % text_sym]
            for i, f in enumerate(self.funcs):
                out += ["  - Name: f%d" % i,
                        "    Type: STT_FUNC",
                        "    Section: .text",
                        "    Binding: STB_GLOBAL",
                        "    Value: 0x%x" % f,
                        "    Size: 0x%x" % FUNC_SIZE]
            return out
        lines += syms("Symbols")
        if dso:
            lines += syms("DynamicSymbols")
        return "\n".join(lines) + "\n"


def cases():
    out = []
    for arch, (_, _, orders, _, pc, _) in ARCHES.items():
        for bo in orders:
            for etype in ("ET_REL", "ET_DYN"):
                for sec in ("SHT_RELA", "SHT_REL"):
                    kinds = ["abs"] + (["pc"] if pc else []) + \
                        (["relative"] if etype == "ET_DYN" else [])
                    for kind in kinds:
                        out.append(Case(arch, bo, etype, sec, kind))
    return out


if __name__ == "__main__":
    for c in cases():
        print(c.name, {k: hex(v) for k, v in c.functions.items()})
