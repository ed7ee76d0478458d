#!/usr/bin/env python3
"""Generates src/text/unicode_tables.cpp: the Unicode data the tokenizer needs, as compact C++ tables.

The tokenizer must reproduce Hugging Face `tokenizers` 0.23.2 exactly, and that library mixes two Unicode versions:
  - its regex engine (the Split pre-tokenizer's \\p{L}, \\p{N}, \\s) knows Unicode 16.0;
  - its NFC normalizer (the unicode-normalization-alignments crate) knows Unicode 9.0: characters assigned later
    have no decomposition, canonical combining class 0 and never compose.
Both facts were measured code point by code point against the real library (tests/cpu/test_tokenizer.cpp keeps
checking them on the parity corpus). Normalization data of an assigned character never changes between versions
(Unicode's stability policy), so "Unicode 9.0 NFC" is the current data restricted to characters whose Age <= 9.0.

Inputs (both offline-installable):
  pip install unicodedata2==16.0.0      general categories, decompositions, combining classes, NFC (Unicode 16.0)
  apt-get install unicode-data          /usr/share/unicode/{DerivedAge,PropList,DerivedCoreProperties}.txt

Usage: scripts/gen_unicode_tables.py [--ucd /usr/share/unicode] [--out src/text/unicode_tables.cpp]
"""
import argparse
import os
import sys

import unicodedata2 as ud

NFC_MAX_AGE = (9, 0)
REGEX_UNICODE = "16.0.0"
MAX_CP = 0x110000
BLOCK = 128  # code points per second-stage block

# Flag bits; must match src/text/unicode.h.
LETTER, NUMBER, WHITE_SPACE, WORD, NFC_BOUNDARY = 1, 2, 4, 8, 16


def read_ranges(path, wanted=None):
    """Yields (first, last, value) from a UCD file of 'XXXX..YYYY ; value # comment' lines."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [s.strip() for s in line.split(";")]
            value = fields[1]
            if wanted is not None and value not in wanted:
                continue
            first, _, last = fields[0].partition("..")
            yield int(first, 16), int(last or first, 16), value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ucd", default="/usr/share/unicode")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "src/text/unicode_tables.cpp"))
    args = parser.parse_args()
    if ud.unidata_version != REGEX_UNICODE:
        sys.exit(f"need unicodedata2 with Unicode {REGEX_UNICODE}, have {ud.unidata_version}")

    age = {}
    for first, last, value in read_ranges(os.path.join(args.ucd, "DerivedAge.txt")):
        version = tuple(int(x) for x in value.split("."))
        for cp in range(first, last + 1):
            age[cp] = version
    white_space = set()
    join_control = set()
    for first, last, value in read_ranges(os.path.join(args.ucd, "PropList.txt"), {"White_Space", "Join_Control"}):
        target = white_space if value == "White_Space" else join_control
        target.update(range(first, last + 1))
    alphabetic = set()
    for first, last, _ in read_ranges(os.path.join(args.ucd, "DerivedCoreProperties.txt"), {"Alphabetic"}):
        alphabetic.update(range(first, last + 1))

    def in_nfc_version(cp):
        return age.get(cp, (99, 0)) <= NFC_MAX_AGE

    def is_hangul_syllable(cp):
        return 0xAC00 <= cp <= 0xD7A3

    def canonical_mapping(cp):
        """The one-level canonical decomposition of cp in Unicode 9.0, or None."""
        if not in_nfc_version(cp) or is_hangul_syllable(cp):
            return None
        d = ud.decomposition(chr(cp))
        if not d or d.startswith("<"):
            return None
        return [int(x, 16) for x in d.split()]

    def full_decomposition(cp):
        mapping = canonical_mapping(cp)
        if mapping is None:
            return [cp]
        out = []
        for part in mapping:
            out.extend(full_decomposition(part))
        return out

    def ccc(cp):
        return ud.combining(chr(cp)) if in_nfc_version(cp) else 0

    # Primary composites: canonical pairs that NFC recomposes (not excluded, not singletons, not non-starter).
    compositions = {}
    for cp in range(MAX_CP):
        mapping = canonical_mapping(cp)
        if mapping is None or len(mapping) != 2:
            continue
        if ud.normalize("NFC", chr(mapping[0]) + chr(mapping[1])) == chr(cp) and ccc(mapping[0]) == 0:
            compositions[(mapping[0], mapping[1])] = cp
    composition_second = {second for (_, second) in compositions}
    composition_second.update(range(0x1161, 0x1176))  # Hangul V jamo compose with L (algorithmic)
    composition_second.update(range(0x11A8, 0x11C3))  # Hangul T jamo compose with LV (algorithmic)

    decomposition_data = []
    records = {}  # (flags, ccc, offset, length) -> index
    record_of_cp = []
    for cp in range(MAX_CP):
        if 0xD800 <= cp <= 0xDFFF:
            record_of_cp.append(0)
            continue
        category = ud.category(chr(cp))
        flags = 0
        if category[0] == "L":
            flags |= LETTER
        if category[0] == "N":
            flags |= NUMBER
        if cp in white_space:
            flags |= WHITE_SPACE
        if cp in alphabetic or category[0] == "M" or category in ("Nd", "Pc") or cp in join_control:
            flags |= WORD
        combining_class = ccc(cp)
        decomposition = full_decomposition(cp)
        stable = decomposition == [cp] or ud.normalize("NFC", chr(cp)) == chr(cp)
        if combining_class == 0 and stable and cp not in composition_second:
            flags |= NFC_BOUNDARY
        offset, length = 0, 0
        if decomposition != [cp]:
            offset, length = len(decomposition_data), len(decomposition)
            decomposition_data.extend(decomposition)
        key = (flags, combining_class, offset, length)
        if key not in records:
            records[key] = len(records)
        record_of_cp.append(records[key])
    if len(records) >= 65536 or len(decomposition_data) >= 65536:
        sys.exit("tables outgrew their 16-bit indices")

    blocks = {}
    stage1 = []
    stage2 = []
    for start in range(0, MAX_CP, BLOCK):
        block = tuple(record_of_cp[start:start + BLOCK])
        if block not in blocks:
            blocks[block] = len(blocks)
            stage2.extend(block)
        stage1.append(blocks[block])

    def array(name, ctype, values, per_line=16):
        lines = [f"const {ctype} {name}[{len(values)}] = {{"]
        for i in range(0, len(values), per_line):
            lines.append("    " + ", ".join(str(v) for v in values[i:i + per_line]) + ",")
        lines.append("};")
        return "\n".join(lines)

    record_lines = ["const CodePointRecord kRecords[%d] = {" % len(records)]
    for (flags, combining_class, offset, length), _ in sorted(records.items(), key=lambda kv: kv[1]):
        record_lines.append(f"    {{{flags}, {combining_class}, {length}, {offset}}},")
    record_lines.append("};")
    pairs = sorted(((first << 21) | second, composite) for (first, second), composite in compositions.items())

    out = [
        "// GENERATED by scripts/gen_unicode_tables.py: do not edit. Regenerate with that script.",
        f"// Categories and White_Space: Unicode {REGEX_UNICODE} (HF tokenizers' regex engine); normalization: Unicode "
        f"{NFC_MAX_AGE[0]}.{NFC_MAX_AGE[1]} (its NFC).",
        '#include "text/unicode.h"',
        "",
        "namespace qwen3::unicode::detail {",
        "",
        f"// {len(stage1)} blocks of {BLOCK} code points -> {len(blocks)} distinct blocks of record indices.",
        array("kStage1", "uint16_t", stage1),
        array("kStage2", "uint16_t", stage2),
        "\n".join(record_lines),
        "// Full canonical decompositions, concatenated; records point into this.",
        array("kDecompositions", "uint32_t", decomposition_data, 12),
        "// (first << 21 | second) -> composite, sorted by key, for binary search.",
        "const CompositionPair kCompositions[%d] = {" % len(pairs),
        *[f"    {{{key}ull, {composite}}}," for key, composite in pairs],
        "};",
        f"const size_t kCompositionCount = {len(pairs)};",
        "",
        "}  // namespace qwen3::unicode::detail",
        "",
    ]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print(f"wrote {args.out}: {len(blocks)} blocks, {len(records)} records, {len(decomposition_data)} decomposition "
          f"code points, {len(pairs)} compositions")


if __name__ == "__main__":
    main()
