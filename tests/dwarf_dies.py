"""The DIEs of `eu-readelf --debug-dump=info` output, for the tests that
check perfgraft's DWARF (test_inline_dwarf.py, test_extension_records.py)."""
import re


def parse(text):
    """[{"off": offset, "tag": tag, ATTR: value text, ...}] in file order."""
    dies, cur = [], None
    for ln in text.splitlines():
        m = re.match(r"^\s*\[\s*([0-9a-f]+)\]\s+(\w+)", ln)
        if m:
            cur = {"off": int(m.group(1), 16), "tag": m.group(2)}
            dies.append(cur)
            continue
        m = re.match(r"^\s+(\w+)\s+\((\w+)\)\s+(.*)$", ln)
        if m and cur is not None:
            cur[m.group(1)] = m.group(3)
    return dies


def origin(die):
    """The offset DW_AT_abstract_origin names."""
    return int(re.search(r"\[\s*([0-9a-f]+)\]", die["abstract_origin"]).group(1), 16)
