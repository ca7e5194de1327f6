#!/usr/bin/env python3
"""Fixtures for nofall's WordPiece tokenizer (src/text/wordpiece.c): the token
ids that Hugging Face's BertTokenizerFast gives, with e5-small-v2's settings.

TabSTAR (tabstar 1.2.2, transformers>=4.49,<5; the repository pins
transformers 4.49.0 and tokenizers 0.21.0) builds its tokenizer with
AutoTokenizer.from_pretrained('intfloat/e5-small-v2'): a BertTokenizerFast with
do_lower_case=True, strip_accents=None, tokenize_chinese_chars=True,
model_max_length=512, called as tokenizer(texts, padding=True,
truncation=True). Nothing is downloaded from the Hugging Face hub here: the
script writes a synthetic, deterministic vocab.txt with e5's (= BERT uncased)
special ids ([PAD]=0 [UNK]=100 [CLS]=101 [SEP]=102 [MASK]=103, [unused*]
filler) and builds BertTokenizerFast(vocab_file=..., <e5's settings>) from it.
This script IMPORTS transformers/tokenizers and contains no copy of them.

Writes, under --out (default tests/fixtures/tokenizer):
  vocab.txt        the synthetic vocabulary
  cases.jsonl      one JSON object a line: name, max_len, text (or hex: the
                   UTF-8 bytes, for a text with a NUL), ids; the combining_*
                   cases also words (the normalizer + pre-tokenizer's words,
                   each followed by a space)
  codepoints.txt.gz  for every code point c (no surrogates), the words that the
                   normalizer + pre-tokenizer make of "a" c "a" (see the file's
                   header); checks the Unicode handling one character at a time
  versions.json    transformers / tokenizers / python versions and the
                   tokenizer's JSON settings (normalizer, pre-tokenizer, model)

With `compat`, writes src/text/hf-unicode-compat.h instead: the code points
where Hugging Face's (older) Unicode tables give another word split than
utf8proc's categories do (see compat_table).

usage: .venv-ref/bin/pip install transformers==4.49.0 tokenizers==0.21.0
       .venv-ref/bin/python reference/tokenizer_fixtures.py make [--out DIR]
       .venv-ref/bin/python reference/tokenizer_fixtures.py compat [--utf8proc libutf8proc.so.2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import random
import sys
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SPECIAL = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}

WORDS = """predictive feature value target numerical quantile to lower higher than unknown age genre drama not
title tall men rating revenue millions year metascore zurich alesund naive city country income class yes no
true false hello world the a of and in is for on with as by at from this that it be are was were an or
un ##able ##s ##ing ##ed ##er ##est ##ly ##ive ##ure ##ich ##und ##ve ##ate ##ion ##tion ##al ##ic ##y
##e ##a ##i ##o ##u ##n ##t ##r ##l ##d ##c ##m ##h ##g ##k ##p ##b ##f ##w ##v ##z ##x ##j ##q
pre ##dict ##ict ##ictive feat ##ur value ##s targ ##et num ##er ##ical quan ##tile ##til
rev ##en ##ue mill ##ions zur ##ic ##h ales ##un ##d na ##iv cafe ##fe resume naïve
10 20 30 35 40 50 60 70 80 90 100 1000 2016 2020 ##0 ##5 ##9 ##00 ##16 1 2 3 4 5 6 7 8 9 0
quantile 0 % unknown value lower than higher than
""".split()

# single characters (and their ## forms) that survive BERT's normalizer
CHARS = (
    [chr(c) for c in range(0x21, 0x7F) if not ("A" <= chr(c) <= "Z")]
    + list("ßæøłđþðıœ")
    + [chr(c) for c in range(0x3B1, 0x3CA)]  # Greek lower case
    + [chr(c) for c in range(0x430, 0x450)]  # Cyrillic lower case
    + list("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年中文字北京東京")
    + [chr(c) for c in range(0x1100, 0x1113)]  # Hangul leading jamo
    + [chr(c) for c in range(0x1161, 0x1176)]  # vowels
    + [chr(c) for c in range(0x11A8, 0x11C3)]  # trailing consonants
    + list("あいうえおかきくけこアイウエオカキクケコ")
    + list("ابتثجحخدذرزسشصضطظعغفقكلمنهوي")
    + list("कखगघचछजझटठडढतथदधनपफबभमयरलवशसह")
    + list("€£¥¢°±×÷§¶©®™«»¿¡“”‘’–—…•")
    + ["😀", "👍", "🎉", "❤", "☃", "👨", "👩", "👧", "🏽", "\U0001F9D1", "\U00010348", "\U0001D400"]
)


def make_vocab() -> list[str]:
    v = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    v += [f"[unused{i}]" for i in range(99, 200)]
    seen = set(v)

    def add(t: str) -> None:
        if t not in seen:
            seen.add(t)
            v.append(t)

    for c in CHARS:
        add(c)
    for c in CHARS:
        add("##" + c)
    for c in ["\U0001D165", "\U0001D16D", "\u0903", "\u1734", "\U00011938", "\u0f71", "\u0f72"]:
        add(c)
        add("##" + c)
    for w in WORDS:
        add(w)
    for a in "abcdefghijklmnopqrstuvwxyz":  # two-letter words and pieces
        for b in "aeiou":
            add(a + b)
            add("##" + a + b)
    add("a" * 100)  # a 100-character word that is in the vocabulary
    add("a" * 101)  # never reached: 101 characters is [UNK]
    for k, i in SPECIAL.items():
        assert v[i] == k, (k, i)
    return v


def hostile_cases() -> list[tuple[str, str, int]]:
    c: list[tuple[str, str]] = [
        ("verbal_numeric", "Predictive Feature: Age\nFeature Value: 30 to 35 (Quantile 40 - 50%)"),
        ("verbal_rating", "Predictive Feature: Rating\nFeature Value: 1.9 to 5.59 (Quantile 0 - 10%)"),
        ("verbal_lower", "Predictive Feature: Year\nFeature Value: Lower than 10 (Quantile 0%)"),
        ("verbal_higher", "Predictive Feature: Year\nFeature Value: Higher than 2016 (Quantile 100%)"),
        ("verbal_unknown", "Predictive Feature: Revenue (Millions)\nFeature Value: Unknown Value"),
        ("target_class", "Target Feature: Genre\nFeature Value: Drama"),
        ("target_class_not", "Target Feature: Genre\nFeature Value: Not Drama"),
        ("target_regression", "Numerical Target Feature: Revenue (Millions)"),
        ("verbal_text", "Predictive Feature: Title\nFeature Value: Tall Men"),
        ("verbal_negative", "Predictive Feature: x\nFeature Value: -0.0001 to 1e20 (Quantile 90 - 100%)"),
        ("accents", "Zürich Ålesund naïve Ǆ Ǳ ǅ café résumé Crème Brûlée"),
        ("accents_nfd_input", "Zu\u0308rich A\u030alesund nai\u0308ve"),
        ("dotted_capital_i", "İstanbul İ ı I i"),
        ("german", "STRASSE Straße ẞ"),
        ("greek_sigma", "ΟΔΥΣΣΕΥΣ ὈΔΥΣΣΕΎΣ ς σ Σ"),
        ("cyrillic", "Москва Ёлка ЙОД"),
        ("cjk", "中文字 北京是中国的首都 東京"),
        ("cjk_mixed", "abc中def 中a中 ㊀ 〇 〆"),
        ("cjk_ext", "\U00020000\U0002A6DF\U0002A700\U0002B81F\U0002B820\U0002B91F\U0002B920\U0002CEAF\U0002CEB0\U0002F800\U00030000"),
        ("cjk_compat", "\uF900\uFA6E\uFAFF\u2F00\u3400\u4DBF\u9FFF\uA000"),
        ("hangul", "한국어 안녕하세요 가나다"),
        ("kana", "ひらがな カタカナ ｶﾀｶﾅ ガギグ"),
        ("arabic", "مرحبا بالعالم إ أ آ"),
        ("devanagari", "नमस्ते हिन्दी क़"),
        ("thai", "ภาษาไทย"),
        ("emoji", "I ❤ NY 😀👍 🎉!"),
        ("emoji_zwj", "👨\u200d👩\u200d👧 family 🧑🏽\u200d💻"),
        ("emoji_vs16", "☃\ufe0f ❤\ufe0e"),
        ("combining_alone", "\u0301 \u0308\u0308 a \u0301b \u20dd \u0488"),
        ("combining_order", "a\u0315\u0300\u05ae\u0300b \U0001D165\u0301 a\U0001D165\u0301\U0001D16D"),
        ("control_chars", "a\x01b\x02c\x7fd\x80e\x9ff"),
        ("tabs_newlines", "a\tb\nc\rd\r\ne\x0bf\x0cg\x1ch\x1di\x1ej\x1fk\x85l"),
        ("unicode_spaces", "a\u00a0b\u1680c\u2000d\u2001e\u2002f\u2009g\u200ah\u202fi\u205fj\u3000k\u2028l\u2029m"),
        ("zero_width", "a\u200bb\u200cc\u200dd\u2060e\ufeffg\u180eh\u00adi"),
        ("bidi_format", "a\u200eb\u200fc\u202ad\u202ee\u2066f\u2069g"),
        ("unassigned_0378", "\u0378"),
        ("unassigned_in_word", "x\u0378y abc\u0378 \u0378def"),
        ("unassigned_various", "\u0ee0 \U0002FFFF \U000E0080 \U0001FAFF \uFFFF \uFDD0"),
        ("private_use", "\ue000 a\ue000b \uf8ff \U000F0000 \U0010FFFD c"),
        ("replacement_char", "a\ufffdb \ufffd"),
        ("nul", "a\x00b\x00 \x00"),
        ("astral", "\U00010348 \U0001D400 \U0001F600 \U0001F9D1 \U00010000 \U0010FFFF"),
        ("math_alnum", "\U0001D400\U0001D41A \U0001D7CE"),
        ("fullwidth", "ＡＢＣ ａｂｃ １２３ ！？"),
        ("ligatures", "ﬁ ﬂ ﬀ Ⅻ ⅻ ① ²"),
        ("punct_ascii", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
        ("punct_unicode", "¡¿«»“”‘’–—…•·‐‑‒―‖†‡‰′″‹›※‼‽⁂、。〈〉《》「」『』【】〔〕〖〗〘〙〚〛・"),
        ("symbols_not_punct", "€£¥¢°±×÷§¶©®™ ^ ` $ + < = > | ~"),
        ("digits", "0123456789 ٠١٢٣ ०१२ 12.5 1,000 3/4 1e-5"),
        ("mixed_case", "HeLLo WoRLD HELLO hello Hello"),
        ("empty", ""),
        ("spaces_only", "   "),
        ("whitespace_only", " \t\n\r\u00a0\u3000 "),
        ("controls_only", "\x00\x01\x7f\u200b"),
        ("word_100", "a" * 100),
        ("word_101", "a" * 101),
        ("word_100_mixed", "b" * 100),
        ("word_101_then", "a" * 101 + " hello"),
        ("word_100_accents", "á" * 100),
        ("word_101_accents", "á" * 101),
        ("word_99_accents_marks", "a\u0301" * 99 + "a"),
        ("word_long_cjk_split", "中" * 150),
        ("special_alone_cls", "[CLS]"),
        ("special_all", "[PAD] [UNK] [CLS] [SEP] [MASK]"),
        ("special_glued", "a[CLS]b hello[SEP]world [MASK]value"),
        ("special_adjacent", "[CLS][SEP][MASK][PAD][UNK]"),
        ("special_lowercase", "[cls] [sep] [Mask] [MASK ] [ MASK] [MASK"),
        ("special_in_word_pieces", "hel[MASK]lo pre[SEP]dictive"),
        ("special_unused", "[unused0] [unused99]"),
        ("special_brackets", "[[CLS]] [[SEP] [SEP]]"),
        ("special_with_accents", "Zü[SEP]rich [SEP]\u0301 \u0301[SEP]"),
        ("special_with_spaces", "  [CLS]  \t[SEP]\n"),
        ("special_nul_neighbour", "\x00[SEP]\x00"),
        ("special_fullwidth", "［CLS］"),
        ("special_broken_by_dropped", "[CL\x00S] [SE\u200bP] [MA\ue000SK] [CL\u0301S]"),
        ("special_nfd_neighbours", "e\u0301[SEP]\u0301e [CLS]\u0327"),
        ("special_cjk_neighbours", "中[SEP]文[MASK]"),
    ]
    out = [(n, t, 512) for n, t in c]
    long_text = " ".join(["predictive feature value"] * 200)  # 600 words
    out.append(("truncate_600_words", long_text, 512))
    out.append(("truncate_exact_510", " ".join(["value"] * 510), 512))
    out.append(("truncate_exact_511", " ".join(["value"] * 511), 512))
    out.append(("truncate_mid_word", "x " * 509 + "predictive", 512))
    out.append(("truncate_special", "[SEP] " * 600, 512))
    out.append(("truncate_punct", "!" * 1000, 512))
    out.append(("max_len_2", "hello world", 2))
    out.append(("max_len_3", "hello world", 3))
    out.append(("max_len_5_pieces", "predictive feature", 5))
    out.append(("max_len_8_unk", "aaaa" * 30 + " hello", 8))
    return out


def random_cases(vocab: list[str], n: int, seed: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    pool = (
        [c for c in CHARS]
        + list("ABCDEFGHIJKLMNOPQRSTUVWXYZÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝ")
        + ["\u0301", "\u0308", "\u0327", "\u200d", "\u00a0", "\t", "\n", " ", " ", " ", "\x00", "\x07", "\ufffd"]
        + ["\u0378", "\ue000", "\U000F0001", "[CLS]", "[SEP]", "[MASK]", "[cls]", "\u3000", "\u2028"]
    )
    words = [w for w in vocab[204:] if not w.startswith("##")]
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            if r < 0.45:
                w = rng.choice(words)
                parts.append(w.upper() if rng.random() < 0.2 else w)
            elif r < 0.75:
                parts.append(rng.choice(pool))
            elif r < 0.85:
                parts.append(chr(rng.randint(0x20, 0x2FFF)))
            else:
                cp = rng.randint(0, 0x10FFFF)
                parts.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "x")
            if rng.random() < 0.5:
                parts.append(" ")
        out.append((f"random_{i:03d}", "".join(parts), 512 if rng.random() < 0.9 else rng.randint(2, 20)))
    return out


# marks of many combining classes (incl. spacing marks with a class: U+1D165, U+1D16D),
# characters that decompose into several, and ones Hugging Face's older tables see otherwise
MARKS = ("\u0300 \u0315 \u0316 \u031b \u0327 \u0334 \u0345 \u05ae \U0001D165 \U0001D16D \U0001D16E \u0f39 \u093c "
         "\u3099 \u0e38 \u0344 \u0f73 \u0f75 \u0f81 \u1ABF \u0898 \u1734 \U000111C9 \u166D \U00011938 \u20dd "
         "\u0488 \u0903 \u302a \u302e").split()
BASES = list("aeiouAEIOUnNcCzZ") + ["é", "ǖ", "ḗ", "Ǻ", "ṩ", "ᾇ", "ΐ", "ờ", "가", "각", "힣", "\u1E9B", "\u0F40", "\U00011935",
                                     "\u0B47", "\u0DD9", "\uFB2C", "\u2126", "\u212B", "\U0001D15E", "\U0001D160"]


def combining_cases(n: int, seed: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(BASES) + "".join(rng.choice(MARKS) for _ in range(rng.randint(0, 5))))
            parts.append(rng.choice(["", "", " ", "-", "\u00a0"]))
        out.append((f"combining_{i:03d}", "".join(parts), 512))
    return out


def sweep(tok, per_cp: dict | None = None) -> list[str]:
    """For each code point c, the words of 'a' c 'a' (normalizer + pre-tokenizer), as
    templates where X stands for c: T = 'aXa' unchanged, D = 'aa' (c dropped),
    S = 'a a' (a space), P = 'a X a' (c isolated: punctuation or CJK); anything
    else is written out. Runs of one template are ranges."""
    N, P = tok.backend_tokenizer.normalizer, tok.backend_tokenizer.pre_tokenizer
    lines = []
    run = None  # [lo, hi, kind]
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        s = "a" + c + "a"
        words = [w for w, _ in P.pre_tokenize_str(N.normalize_str(s))]
        r = "".join(w + " " for w in words)
        kind = {"a" + c + "a ": "T", "aa ": "D", "a a ": "S", "a " + c + " a ": "P"}.get(r)
        if per_cp is not None:
            per_cp[cp] = kind or "X"
        if kind and run and run[2] == kind and run[1] == cp - 1 and not (cp == 0xE000 and run[1] == 0xD7FF):
            run[1] = cp
            continue
        if run:
            lines.append(f"{run[0]:X} {run[1]:X} {run[2]}")
            run = None
        if kind:
            run = [cp, cp, kind]
        else:
            lines.append(f"{cp:X} X {r.encode('utf-8').hex()}")
    if run:
        lines.append(f"{run[0]:X} {run[1]:X} {run[2]}")
    return lines


# utf8proc's general categories (utf8proc.h: utf8proc_category_t)
U8P_CATS = "CN LU LL LT LM LO MN MC ME ND NL NO PC PD PS PE PI PF PO SM SC SK SO ZS ZL ZP CC CF CS CO".split()


def compat_table(per_cp: dict, libpath: str) -> tuple[list[tuple[int, int, str]], str]:
    """The code points where BertTokenizerFast's Unicode data (the unicode_categories
    crate's category tables and the NFD tables of tokenizers 0.21, older than utf8proc's)
    lead to another result than utf8proc's categories, with the category that
    reproduces Hugging Face's: CN = treat as unassigned (kept as it is, no
    decomposition, not punctuation), MN = dropped, PO = punctuation."""
    import ctypes

    lib = ctypes.CDLL(libpath)
    lib.utf8proc_category.restype = ctypes.c_int
    lib.utf8proc_tolower.restype = ctypes.c_int32
    lib.utf8proc_unicode_version.restype = ctypes.c_char_p
    lib.utf8proc_decompose_char.restype = ctypes.c_ssize_t
    buf = (ctypes.c_int32 * 32)()
    lbc = ctypes.c_int(0)

    def cjk(c):
        return any(lo <= c <= hi for lo, hi in ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                   (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))

    def ascii_punct(c):
        return 33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126

    over = []
    for cp, hf in per_cp.items():
        cat = U8P_CATS[lib.utf8proc_category(cp)]
        if cp in (9, 10, 13) or cat in ("ZS", "ZL", "ZP") or cp < 0x80 or cjk(cp):
            continue  # spaces, ASCII and CJK: no Unicode-version question
        dropped = cat in ("CC", "CF", "CO", "MN") or cp == 0xFFFD
        punct = cat.startswith("P")
        k = lib.utf8proc_decompose_char(cp, buf, 32, 1 << 4, ctypes.byref(lbc))  # UTF8PROC_DECOMPOSE
        decomposes = not (k == 1 and buf[0] == cp)
        lowers = lib.utf8proc_tolower(cp) != cp
        want = None
        if hf == "T" and (dropped or punct or decomposes):
            if lowers:
                raise SystemExit(f"U+{cp:04X}: kept by HF, but utf8proc lower-cases it")
            want = "CN"
        elif hf == "D" and not dropped:
            want = "MN"
        elif hf == "P" and not punct:
            want = "PO"
        if want:
            over.append((cp, want))
    ranges = []
    for cp, w in sorted(over):
        if ranges and ranges[-1][2] == w and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, w])
    return [tuple(r) for r in ranges], lib.utf8proc_unicode_version().decode()


def write_compat(path: Path, ranges, uver: str, versions: str) -> None:
    lines = [
        "/* hf-unicode-compat.h -- GENERATED by reference/tokenizer_fixtures.py compat; do not edit.",
        " *",
        f" * Hugging Face's BertTokenizerFast ({versions}) takes general",
        " * categories from the unicode_categories crate (Unicode 8-era tables) and NFD from",
        " * its own older tables. These are the code points where that differs from",
        f" * utf8proc's Unicode {uver}, found by running the tokenizer on every code point, with the",
        " * category that gives Hugging Face's result: CN = as if unassigned (kept, not",
        " * decomposed, not punctuation), MN = dropped, PO = punctuation. Sorted, disjoint. */",
        f'#define NF_HF_COMPAT_UNICODE "{uver}"',
        "/* clang-format off */",
        "static const struct nf__hf_compat_range {",
        "    int32_t lo, hi;",
        "    utf8proc_category_t cat;",
        "} nf__hf_compat[] = {",
    ]
    for lo, hi, w in ranges:
        lines.append(f"    {{0x{lo:04X}, 0x{hi:04X}, UTF8PROC_CATEGORY_{w}}},")
    lines.append("};")
    lines.append("/* clang-format on */")
    path.write_text("\n".join(lines) + "\n")


def _tmp_vocab() -> str:
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8")
    f.write("".join(t + "\n" for t in make_vocab()))
    f.close()
    return f.name


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["make", "compat"])
    ap.add_argument("--utf8proc", default="libutf8proc.so.2", help="compat: the utf8proc library to compare with")
    ap.add_argument("--header", default=str(REPO / "src/text/hf-unicode-compat.h"))
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/tokenizer"))
    ap.add_argument("--random", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20260)
    a = ap.parse_args()

    import tokenizers
    import transformers
    from transformers import BertTokenizerFast

    if a.mode == "compat":
        tok = BertTokenizerFast(vocab_file=_tmp_vocab(), do_lower_case=True, model_max_length=512)
        per_cp: dict = {}
        sweep(tok, per_cp)
        ranges, uver = compat_table(per_cp, a.utf8proc)
        write_compat(Path(a.header), ranges, uver,
                     f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}")
        n = sum(hi - lo + 1 for lo, hi, _ in ranges)
        print(f"compat: {len(ranges)} ranges, {n} code points (utf8proc Unicode {uver}) -> {a.header}")
        return 0

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    vocab = make_vocab()
    (out / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    tok = BertTokenizerFast(
        vocab_file=str(out / "vocab.txt"),
        do_lower_case=True,
        strip_accents=None,
        tokenize_chinese_chars=True,
        model_max_length=512,
    )
    assert type(tok).__name__ == "BertTokenizerFast"
    settings = json.loads(tok.backend_tokenizer.to_str())
    settings["model"].pop("vocab", None)

    cases = hostile_cases() + random_cases(vocab, a.random, a.seed) + combining_cases(100, a.seed + 1)
    bt = tok.backend_tokenizer
    names = set()
    with open(out / "cases.jsonl", "w", encoding="utf-8") as f:
        for name, text, max_len in cases:
            assert name not in names, name
            names.add(name)
            ids = tok(text, truncation=True, max_length=max_len)["input_ids"]
            rec = {"name": name, "max_len": max_len}
            if "\x00" in text:  # strict JSON readers refuse \u0000
                rec["hex"] = text.encode("utf-8").hex()
            else:
                rec["text"] = text
            rec["ids"] = ids
            if name.startswith("combining_"):  # the word split itself (normalizer + pre-tokenizer)
                words = bt.pre_tokenizer.pre_tokenize_str(bt.normalizer.normalize_str(text))
                rec["words"] = "".join(w + " " for w, _ in words)
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    lines = sweep(tok)
    body = (
            "# For every code point c (surrogates excepted): the words that BertTokenizerFast's normalizer and\n"
            "# pre-tokenizer make of the text 'a' c 'a', each word followed by one space. Lines:\n"
            "#   LO HI K  for c in [LO, HI] (hex): K = T 'aca ' (unchanged), D 'aa ' (c dropped),\n"
            "#            S 'a a ' (c is a space), P 'a c a ' (c split off: punctuation or CJK)\n"
            "#   C X HEX  for c: the words' UTF-8 bytes in hex\n"
            f"# made by reference/tokenizer_fixtures.py with transformers {transformers.__version__}, "
            f"tokenizers {tokenizers.__version__}\n"
    ) + "".join(ln + "\n" for ln in lines)
    with open(out / "codepoints.txt.gz", "wb") as f:  # gzip, no timestamp: the same bytes every run
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9, mtime=0) as g:
            g.write(body.encode("ascii"))

    versions = {
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "python": platform.python_version(),
        "python_unicodedata": unicodedata.unidata_version,
        "tokenizer_class": type(tok).__name__,
        "call": "tok(text, truncation=True, max_length=max_len)['input_ids']",
        "vocab_size": len(vocab),
        "n_cases": len(cases),
        "random_seed": a.seed,
        "settings": {k: settings[k] for k in ("normalizer", "pre_tokenizer", "post_processor", "model", "added_tokens")},
    }
    (out / "versions.json").write_text(json.dumps(versions, indent=1, ensure_ascii=True) + "\n")
    print(f"tokenizer fixtures: {len(vocab)} tokens, {len(cases)} cases, {len(lines)} code point lines -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
