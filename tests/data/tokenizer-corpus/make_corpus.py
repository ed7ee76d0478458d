#!/usr/bin/env python3
"""Builds corpus.jsonl, the tokenizer parity corpus: one JSON string per line, about 1.5 MB of UTF-8 in all.

Real text where it can be had offline, generated text for the corners (seeded, so a rebuild on the same machine
gives the same file). Sources, all from Debian or PyPI:
  - manual pages translated to ja, zh_CN, zh_TW, ko, ru, uk, el, de, fr, pl, ... (apt-get install manpages-de
    manpages-ru manpages-ja manpages-zh manpages-fr manpages-uk manpages-el): prose, markup, CJK without spaces;
  - Faker (pip install faker) in ~30 locales: Arabic, Hebrew, Persian, Devanagari, Bengali, Tamil, Thai,
    Georgian, Armenian, Korean, Japanese, Chinese, Greek, Cyrillic, Vietnamese ... sentences, names, addresses;
  - Babel's CLDR data (pip install babel): language and territory names written in every locale's own script;
  - Unicode's NormalizationTest.txt (apt-get install unicode-data): the strings NFC must change;
  - emoji sequences (pip install emoji): ZWJ families, skin tones, flags, keycaps;
  - source code: this repository and Python's standard library;
  - generated: special tokens inside text, chat transcripts, contractions in every case, white-space runs of every
    Unicode space, CRLF mixes, numbers in many scripts, decomposed text, combining-mark soup, random code points.

Usage: python make_corpus.py [--out corpus.jsonl]   (needs faker, babel, emoji, unicodedata2 importable)
"""
import argparse
import bz2
import glob
import gzip
import json
import os
import random
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
rng = random.Random(20250603)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
            "</tool_response>", "<think>", "</think>"]


def chunks(text, size):
    """Cuts text into pieces of about `size` characters at line ends, keeping the line ends."""
    out, current = [], ""
    for line in text.splitlines(keepends=True):
        current += line
        if len(current) >= size:
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


def manpages(budget_per_language):
    out = []
    for lang in ["ja", "zh_CN", "zh_TW", "ko", "ru", "uk", "el", "de", "fr", "pl", "es", "it", "cs", "hu", "pt_BR",
                 "sv", "nl", "ro", "vi", "fi", "da", "id", "sr"]:
        files = sorted(glob.glob(f"/usr/share/man/{lang}/man*/*.gz"))
        rng.shuffle(files)
        used = 0
        for path in files:
            try:
                text = gzip.open(path).read().decode("utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for piece in chunks(text, rng.randint(300, 2500))[:3]:
                out.append(piece)
                used += len(piece.encode())
            if used >= budget_per_language:
                break
    return out


def faker_text():
    from faker import Faker
    out = []
    locales = ["ar_AA", "ar_SA", "he_IL", "fa_IR", "hi_IN", "bn_BD", "ta_IN", "ne_NP", "th_TH", "ka_GE", "hy_AM",
               "ko_KR", "ja_JP", "zh_CN", "zh_TW", "el_GR", "ru_RU", "uk_UA", "bg_BG", "vi_VN", "tr_TR", "pl_PL",
               "cs_CZ", "fr_FR", "de_DE", "es_ES", "pt_BR", "az_AZ", "la", "en_US", "ga_IE", "lv_LV", "lt_LT"]
    for locale in locales:
        try:
            fake = Faker(locale)
        except AttributeError:
            continue
        fake.seed_instance(hash(locale) & 0xFFFF)
        for _ in range(8):
            parts = [fake.text(max_nb_chars=rng.choice([200, 600, 1200]))]
            parts.append(fake.name() + ", " + fake.address())
            parts.append(fake.sentence() + " " + fake.phone_number() + " " + fake.email())
            out.append(rng.choice(["\n", " ", "\r\n", "\n\n"]).join(parts))
    return out


def babel_names():
    from babel import Locale, localedata
    out = []
    identifiers = sorted(localedata.locale_identifiers())
    rng.shuffle(identifiers)
    for identifier in identifiers[:150]:
        try:
            locale = Locale.parse(identifier)
        except Exception:
            continue
        names = list(locale.languages.values())[:40] + list(locale.territories.values())[:30]
        months = list(locale.months["format"]["wide"].values())
        days = list(locale.days["format"]["wide"].values())
        out.append(f"{locale.display_name}: " + ", ".join(names) + ". " + " ".join(months) + " — " + " ".join(days))
    return out


def normalization_test():
    out = []
    lines = bz2.open("/usr/share/unicode/NormalizationTest.txt.bz2").read().decode().splitlines()
    batch = []
    for line in lines:
        if not line or line.startswith(("#", "@")):
            continue
        columns = line.split(";")[:5]
        for column in columns[:1] + columns[2:3]:  # the source and its NFD: NFC must rebuild the composed form
            batch.append("".join(chr(int(x, 16)) for x in column.split()))
        if len(batch) >= rng.randint(40, 120):
            out.append(rng.choice([" ", "", "\n", "a", "."]).join(batch))
            batch = []
    rng.shuffle(out)
    return out[:350]


def emoji_sequences():
    import emoji
    sequences = sorted(emoji.EMOJI_DATA.keys())
    zwj = [s for s in sequences if "\u200d" in s]
    tones = [s for s in sequences if any(0x1F3FB <= ord(c) <= 0x1F3FF for c in s)]
    out = []
    for _ in range(120):
        pool = rng.choice([sequences, zwj, tones])
        words = []
        for _ in range(rng.randint(3, 40)):
            words.append(rng.choice(pool) * rng.choice([1, 1, 1, 2, 3]))
            if rng.random() < 0.4:
                words.append(rng.choice([" ", "", "!", " ok ", "\n", "e\u0301", "日本"]))
        out.append("".join(words))
    return out


def source_code(budget):
    files = sorted(glob.glob(os.path.join(REPO, "src", "**", "*.[ch]*"), recursive=True))
    files = [f for f in files if "unicode_tables" not in f]
    stdlib = os.path.dirname(os.__file__)
    files += sorted(glob.glob(os.path.join(stdlib, "*.py")))
    rng.shuffle(files)
    out, used = [], 0
    for path in files:
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for piece in chunks(text, rng.randint(500, 3000))[:2]:
            if rng.random() < 0.3:
                piece = piece.replace("\n", "\r\n")
            out.append(piece)
            used += len(piece.encode())
        if used >= budget:
            break
    return out


def random_code_point():
    while True:
        plane = rng.choice([0, 0, 0, 1, 2, 3, 14, 15, 16])
        cp = rng.randrange(0x10000) + plane * 0x10000 if plane else rng.randrange(0x80, 0x10000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def generated():
    import unicodedata2
    out = []
    spaces = [" ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2007", "\u200a",
              "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\x1c", "\x1f", "\u200b", "\u180e", "\ufeff"]
    words = ["hello", "World", "naïve", "Ελληνικά", "русский", "日本語", "한국어", "עברית", "العربية", "हिन्दी",
             "ไทย", "x", "I", "don", "it", "you", "we", "they", "ſ", "12", "3.14", "¿Qué?", "!!", "...", "@#$",
             "e\u0301", "\u1100\u1161\u11a8", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "1️⃣", "ＡＢＣ", "١٢٣", "१२३", "½", "Ⅻ", "K", "Å"]
    contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE", "'VE", "'M", "'LL",
                    "'Ll", "'lL", "'D", "'ſ", "'K", "'x", "''s", "'", "’s", "'sa", "'lla", "'dd"]
    # Special tokens in and around text, partial ones, repeated ones.
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(2, 25)):
            r = rng.random()
            if r < 0.3:
                parts.append(rng.choice(SPECIALS))
            elif r < 0.4:
                s = rng.choice(SPECIALS)
                parts.append(s[: rng.randint(1, len(s) - 1)])
            elif r < 0.6:
                parts.append(rng.choice(words))
            elif r < 0.8:
                parts.append(rng.choice(spaces) * rng.randint(1, 4))
            elif r < 0.9:
                parts.append(rng.choice(contractions))
            else:
                parts.append(rng.choice(["\u0301", "\u0323", "\u0308", "\u093c", "\u05b0", "\u0670", "\u1161"]))
        out.append("".join(parts))
    # Chat transcripts as the template renders them.
    for i in range(60):
        turns = []
        for _ in range(rng.randint(1, 4)):
            turns.append(f"<|im_start|>user\n{rng.choice(words)} {rng.choice(words)}?<|im_end|>\n")
            think = f"<think>\nLet me think about {rng.choice(words)}.\n</think>\n\n" if rng.random() < 0.6 else ""
            call = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "' + rng.choice(words) +
                    '"}}\n</tool_call>' if rng.random() < 0.3 else "")
            turns.append(f"<|im_start|>assistant\n{think}Answer {i}: {rng.choice(words)}.{call}<|im_end|>\n")
        out.append("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" + "".join(turns))
    # Contractions and white space in every combination the pattern distinguishes.
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(5, 40)):
            parts.append(rng.choice(words) + rng.choice(contractions + [""] * 5))
            parts.append("".join(rng.choice(spaces) for _ in range(rng.choice([1, 1, 2, 3, 7]))))
        out.append("".join(parts))
    # Numbers: long digit runs, decimal points, digits of many scripts, numerals that are \p{N} but not digits.
    digit_zeros = [0x30, 0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0xFF10, 0x1D7CE, 0x104A0]
    for _ in range(150):
        parts = []
        for _ in range(rng.randint(3, 30)):
            zero = rng.choice(digit_zeros)
            parts.append("".join(chr(zero + rng.randrange(10)) for _ in range(rng.randint(1, 14))))
            parts.append(rng.choice([" ", ",", ".", "-", "+", "e", "%", " $", "\n", "½", "²", "Ⅻ", "①", ""]))
        out.append("".join(parts))
    # Decomposed (NFD) and compatibility text that NFC recomposes, Hangul built from jamo.
    sentences = ["Ça a été une journée très agréable à Québec.", "Tiếng Việt có nhiều dấu thanh điệu.",
                 "Ångström, Øresund, Ñandú, Łódź, Dvořák, Škoda", "한국어 문장을 자모로 나눕니다", "ﬁ ﬂ ² ½ Ⅻ ｶﾀｶﾅ",
                 "Ελληνικά: άλφα, ΐ, ΰ", "עִבְרִית מְנֻקֶּדֶת", "العَرَبِيَّة", "हिन्दी क़ ख़ ग़", "ṩ ḍ̇ q̣̇ ệ"]
    for _ in range(100):
        s = " ".join(rng.choice(sentences) for _ in range(rng.randint(2, 12)))
        out.append(unicodedata.normalize(rng.choice(["NFD", "NFD", "NFKD", "NFC"]), s))
    # Combining-mark soup: random marks in random order on random bases (canonical reordering, blocking).
    marks = [chr(c) for c in range(0x300, 0x370)] + [chr(c) for c in [0x591, 0x5B0, 0x5C2, 0x64B, 0x651, 0x670,
                                                                      0x93C, 0x94D, 0x1AB0, 0x1DC0, 0x20D0, 0x302A,
                                                                      0x3099, 0x309A, 0x1D165, 0x1D16D, 0x11100,
                                                                      0x7FD, 0x898, 0x1E4EC, 0x10EFD]]
    bases = ["a", "e", "o", "u", "A", "n", "s", "\u0391", "\u0430", "\u05d0", "\u0627", "\u0915", "\u304b",
             "\u1100", "\u1161", "\uac00", "\u0f40", "1", " ", "\u0300", "<|im_end|>"]
    for _ in range(300):
        out.append("".join(rng.choice(bases) + "".join(rng.choice(marks) for _ in range(rng.choice([0, 1, 2, 3, 5])))
                           for _ in range(rng.randint(5, 60))))
    # Random code points from every plane (unassigned, private use and noncharacters included), in ASCII context.
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(5, 80)):
            parts.append(random_code_point() if rng.random() < 0.6 else rng.choice(words + spaces + ["a", " b"]))
        out.append("".join(parts))
    # Long runs: one very long CJK piece, long space runs, long punctuation runs, long single words.
    out.append("中华人民共和国" * 300)
    out.append("a" * 3000 + " " * 2000 + "b")
    out.append("!?" * 1500 + "\n" * 10)
    out.append(" ".join(["pneumonoultramicroscopicsilicovolcanoconiosis"] * 100))
    out.append("\u3000\u3000" * 200 + "x" + "\r\n" * 300)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(HERE, "corpus.jsonl"))
    args = parser.parse_args()
    sections = [("manpages", manpages(18000)), ("faker", faker_text()), ("babel", babel_names()),
                ("normalization", normalization_test()), ("emoji", emoji_sequences()),
                ("code", source_code(220000)), ("generated", generated())]
    strings = []
    for name, items in sections:
        size = sum(len(s.encode()) for s in items)
        print(f"{name}: {len(items)} strings, {size} bytes", file=sys.stderr)
        strings.extend(items)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for s in strings:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    total = sum(len(s.encode()) for s in strings)
    print(f"{len(strings)} strings, {total} bytes -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
