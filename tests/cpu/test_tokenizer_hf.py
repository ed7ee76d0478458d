#!/usr/bin/env python3
"""Expected results from Hugging Face `tokenizers` for tests/cpu/test_tokenizer.cpp (run live in build/pyenv).

Usage: test_tokenizer_hf.py TOKENIZER_JSON CORPUS_JSONL OUT_DIR
       test_tokenizer_hf.py --unicode TOKENIZER_JSON OURS_FILE   (see check_every_code_point)
Writes OUT_DIR/expected.json:
  corpus:   ids, decode (skip_special_tokens False and True) of every corpus string;
  random:   decode of random id sequences (byte tokens that split characters, special tokens);
  variants: tokenizer.json files written to OUT_DIR with extra added tokens (lstrip, rstrip, single_word,
            normalized, a content already in the vocabulary), the \\p{N}{1,3} pattern, ignore_merges, no
            normalizer, or merges out of creation order, and their ids on probes and every 25th corpus string.
"""
import json
import os
import random
import sys

import tokenizers
from tokenizers import Tokenizer

EXPECTED_VERSION = "0.23.2"


# The contexts in which every code point X is normalized: alone, after and before combining marks of classes
# 230 and 1 (canonical reordering), and as the starter of a composition.
NFC_CONTEXTS = ["{}", "q\u0301{}", "q{}\u0334", "{}\u0301", "{}\u0334"]


def check_every_code_point(tokenizer_path, ours_path):
    """Compares, for every code point, the character classes the pre-tokenizer sees (\\p{L}, \\p{N}, \\s, probed
    through how HF splits a few two-character strings) and NFC in NFC_CONTEXTS with what the C++ test wrote:
    per code point (surrogates skipped) one byte of class bits (1 L, 2 N, 4 space), then each NFC result as a
    4-byte little-endian length and its UTF-8."""
    tok = Tokenizer.from_file(tokenizer_path)
    pre = tok.pre_tokenizer.pre_tokenize_str
    norm = tok.normalizer.normalize_str
    data = open(ours_path, "rb").read()
    position, mismatches, examples = 0, 0, []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        x = chr(cp)
        is_letter = len(pre("a" + x)) == 1
        is_number = not is_letter and len(pre(x + x)) == 2
        is_space = not is_letter and not is_number and (x in "\r\n" or len(pre("!" + x)) == 2)
        want_classes = is_letter | is_number << 1 | is_space << 2
        got_classes = data[position]
        position += 1
        want_nfc, got_nfc = [norm(c.format(x)) for c in NFC_CONTEXTS], []
        for _ in NFC_CONTEXTS:
            length = int.from_bytes(data[position:position + 4], "little")
            got_nfc.append(data[position + 4:position + 4 + length].decode("utf-8"))
            position += 4 + length
        if want_classes != got_classes or want_nfc != got_nfc:
            mismatches += 1
            if len(examples) < 10:
                examples.append(f"U+{cp:04X}: classes {got_classes} (HF {want_classes}), NFC {got_nfc!r} (HF {want_nfc!r})")
    print(f"unicode mismatches: {mismatches}")
    for example in examples:
        print(example)


def main():
    if sys.argv[1] == "--unicode":
        check_every_code_point(sys.argv[2], sys.argv[3])
        return
    tokenizer_path, corpus_path, out_dir = sys.argv[1:4]
    if tokenizers.__version__ != EXPECTED_VERSION:
        sys.exit(f"tokenizers {tokenizers.__version__} found, the parity test is pinned to {EXPECTED_VERSION}")
    tok = Tokenizer.from_file(tokenizer_path)
    strings = [json.loads(line) for line in open(corpus_path, encoding="utf-8")]
    encodings = tok.encode_batch(strings)
    ids = [e.ids for e in encodings]
    corpus = {
        "ids": ids,
        "decode": tok.decode_batch(ids, skip_special_tokens=False),
        "decode_skip_special": tok.decode_batch(ids, skip_special_tokens=True),
    }

    rng = random.Random(7)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    random_cases = []
    for _ in range(400):
        n = rng.randint(1, 30)
        sequence = []
        for _ in range(n):
            r = rng.random()
            if r < 0.5:
                sequence.append(rng.randrange(256))  # single-byte tokens split multi-byte characters
            elif r < 0.6:
                sequence.append(rng.randrange(151643, vocab_size))
            else:
                sequence.append(rng.randrange(151643))
        random_cases.append({
            "ids": sequence,
            "decode": tok.decode(sequence, skip_special_tokens=False),
            "decode_skip_special": tok.decode(sequence, skip_special_tokens=True),
        })

    base = json.load(open(tokenizer_path, encoding="utf-8"))
    vocab = base["model"]["vocab"]
    probes = ["Hi <mask> there\t<mask>\t<mask>\u2000end", "<mask>, <mask>- \u25cc\u0330<mask>", "a<mask>b <mask>",
              "x  <mask>  y", "<mask><mask>", "Ångström and A\u030angstro\u0308m and \u212bngstr\u00f6m",
              "hello world helloworld ahello hello_ hello.", " <sp> <sp><sp>x<sp>", "say hello", "12345678 9",
              "<|im_start|>user\n<mask> hello<|im_end|>", "\u00e9<mask>\u0301", "", "   ", "<mas<mask>k>",
              # line ends (encode caches whole lines): only a newline before non-space ends one
              "a\n b\nc", "x.\n\ny", "  \n\t\nz", "\n\n\n", "a\r\nb\r\n", "e\n\u0301x", "\n\u3000x\n\u00a0y",
              "'s\n's\n'S", "1\n2\n 3\n", "end  \n", "  \n  \n" * 3 + "x",
              # long pieces (merged through a priority queue)
              "中华人民共和国" * 40, "pneumonoultramicroscopicsilicovolcanoconiosis" * 8, "=-" * 300,
              "ab" * 500 + " " + "aaaa" * 200]
    additions = [
        {"content": "<mask>", "lstrip": True, "rstrip": True, "single_word": True, "normalized": True,
         "special": True},
        {"content": "Ångström", "lstrip": False, "rstrip": False, "single_word": False, "normalized": True,
         "special": False},
        {"content": "hello", "lstrip": False, "rstrip": False, "single_word": True, "normalized": False,
         "special": False},
        {"content": " <sp>", "lstrip": False, "rstrip": True, "single_word": False, "normalized": False,
         "special": True},
    ]
    variants = []
    for name in ["flags", "digits", "ignore_merges", "no_normalizer", "reordered_merges"]:
        config = json.loads(json.dumps(base))
        if name == "reordered_merges":  # later merges first: merges then use tokens that later ones create
            merges = config["model"]["merges"]
            config["model"]["merges"] = merges[-3000:] + merges[:-3000]
        elif name == "ignore_merges":
            config["model"]["ignore_merges"] = True
        elif name == "no_normalizer":
            config["normalizer"] = None
        elif name == "flags":
            next_id = vocab_size
            for addition in additions:
                entry = dict(addition)
                if addition["content"] in vocab:
                    entry["id"] = vocab[addition["content"]]
                else:
                    entry["id"] = next_id
                    next_id += 1
                config["added_tokens"].append(entry)
        elif name == "digits":
            split = config["pre_tokenizer"]["pretokenizers"][0]
            split["pattern"]["Regex"] = split["pattern"]["Regex"].replace("\\p{N}|", "\\p{N}{1,3}|")
        path = os.path.join(out_dir, f"variant_{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False)
        variant = Tokenizer.from_file(path)
        variant_strings = probes + strings[::25]
        variants.append({
            "tokenizer": path,
            "strings": variant_strings,
            "ids": [e.ids for e in variant.encode_batch(variant_strings)],
        })

    with open(os.path.join(out_dir, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizers_version": tokenizers.__version__, "corpus": corpus, "random": random_cases,
                   "variants": variants}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
