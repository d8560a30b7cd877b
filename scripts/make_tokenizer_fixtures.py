#!/usr/bin/env python3
"""Regenerates tests/data/tokenizer_*.json with the Hugging Face `tokenizers` library (pip install
tokenizers). The C++ tokenizer test checks that CacheLens encodes these strings id for id as the
reference library does. Not needed to build or test: the fixtures are committed."""
import json, pathlib, sys
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers, Regex

root = pathlib.Path(__file__).resolve().parent.parent
out = root / "tests" / "data"

TEXTS = [
    "Hello world! What is 347 + 85?",
    "  leading spaces and\ttabs\nnew lines\n\n",
    "Remember: bak=417, tup=902. What is tup?",
    "Café déjà vu — naïve façade; 日本語のテキスト; emoji 🙂🚀 and ZWJ 👩‍💻",
    "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nReverse the list: 4 9 1<|eot_id|>",
    "In the beginning God created the heaven and the earth.",
    "don't won't they'll I'm we've it's",
    "12345678901234567890",
    "",
    "x",
    "ÅÅ Ångström e\u0301",  # NFC composes the combining accent
]

def corpus():
    base = [t for t in TEXTS if t] * 3
    base += ["the quick brown fox jumps over the lazy dog %d" % i for i in range(200)]
    return base

def hf_style():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    return tok

def main():
    fixtures = {"tokenizer_hf_bpe.json": hf_style()}
    cachelens = root / "tests" / "data" / "tokenizer_cachelens_bpe.json"
    if cachelens.exists():
        fixtures[cachelens.name] = Tokenizer.from_file(str(cachelens))
    golden = {}
    for name, tok in fixtures.items():
        if name != cachelens.name:
            tok.save(str(out / name))
        golden[name] = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in TEXTS]
    (out / "tokenizer_golden.json").write_text(json.dumps(golden, ensure_ascii=False, indent=1))
    print("wrote", ", ".join(fixtures), "and tokenizer_golden.json")

if __name__ == "__main__":
    sys.exit(main())
