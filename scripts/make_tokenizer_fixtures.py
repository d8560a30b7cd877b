#!/usr/bin/env python3
"""Regenerates tests/data/tokenizer_*.json with the Hugging Face `tokenizers` library (pip install
tokenizers; fixtures recorded with 0.20.0). The C++ tokenizer test checks that CacheLens encodes
these strings id for id and decodes them to the same text as the reference library does: a
LLaDA-like byte-level BPE, Dream's (Qwen2's) pre-tokenizer, SentencePiece-style BPEs with
byte fallback as in LLaMA-2-family checkpoints, SentencePiece unigram models and BERT's WordPiece,
with their post-processors (the ids with and without special tokens). Not needed to build or test: the fixtures are
committed."""
import json, pathlib, sys
from tokenizers import (Tokenizer, models, normalizers, pre_tokenizers, decoders, processors, trainers,
                        Regex)

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

# Strings checked but not trained on (so that adding one leaves the trained fixtures unchanged).
EXTRA_TEXTS = [
    "Bell\u0007 and\u00a0no-break space, (brackets) [x] {y} a_b #hash ##sub",
    "ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ ﬁ ligature ² ½",
    "unseen: ÆØÅ Ωμέγα Привет مرحبا",
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
    # Llama-3-style: ByteLevel offsets, then the BOS template
    bos = tok.token_to_id("<|startoftext|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|startoftext|> $A", special_tokens=[("<|startoftext|>", bos)])])
    return tok

# Qwen2's pre-tokenizer (Dream's tokenizer): its split regex, then byte-level without a regex,
# NFC, ChatML's special tokens.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

def qwen2_style():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=450, special_tokens=["<|endoftext|>", "<|im_start|>",
                                                                   "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok

# LLaMA's vocabulary layout for a trained BPE (tokenizer.json as a dict): <unk>, <s>, </s>, the 256
# byte tokens <0x00>..<0xFF>, then the learned pieces; byte fallback on.
def with_byte_tokens(trained):
    model = trained["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for piece, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(piece, len(vocab))
    model.update({"vocab": vocab, "byte_fallback": True, "unk_token": "<unk>", "fuse_unk": True})
    for t in trained["added_tokens"]:
        t["id"] = vocab[t["content"]]
    return trained

# A SentencePiece-style BPE as in LLaMA-2-family checkpoints: "\u2581" for spaces (Prepend +
# Replace normalisers, no pre-tokenizer), <0x00>..<0xFF> byte tokens for what the vocabulary
# lacks (byte_fallback), and the decoder Replace + ByteFallback + Fuse + Strip.
def sentencepiece_style():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=60)
    tok.train_from_iterator(corpus(), trainer)
    trained = with_byte_tokens(json.loads(tok.to_str()))
    trained["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return Tokenizer.from_str(json.dumps(trained))

# The newer SentencePiece conversion (Metaspace pre-tokenizer with prepend_scheme "first", its
# decoder), with chat tokens so that segments after an added token are not prepended.
def metaspace_style():
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                 split=True)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="\u2581",
                                                        prepend_scheme="first", split=True),
                                     decoders.ByteFallback(), decoders.Fuse()])
    specials = ["<unk>", "<s>", "</s>", "<|startoftext|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=330, special_tokens=specials, limit_alphabet=60)
    tok.train_from_iterator(corpus(), trainer)
    return Tokenizer.from_str(json.dumps(with_byte_tokens(json.loads(tok.to_str()))))

# A SentencePiece unigram model as T5/ALBERT-family checkpoints convert it (without their
# precompiled character map): NFKC, Metaspace, "<s> $A </s>".
def unigram_style():
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=260, special_tokens=["<unk>", "<s>", "</s>"],
                                      unk_token="<unk>", shrinking_factor=0.75)
    tok.train_from_iterator(corpus(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")),
                                              ("</s>", tok.token_to_id("</s>"))])
    return tok

# The same with byte fallback: <0x00>..<0xFF> after the specials, unknown characters become bytes.
def unigram_byte_fallback():
    trained = json.loads(unigram_style().to_str())
    model = trained["model"]
    specials, rest = model["vocab"][:3], model["vocab"][3:]
    model["vocab"] = specials + [["<0x%02X>" % b, 0.0] for b in range(256)] + rest
    model["byte_fallback"] = True
    ids = {piece: i for i, (piece, _) in enumerate(model["vocab"])}
    for t in trained["added_tokens"]:
        t["id"] = ids[t["content"]]
    for name, spec in trained["post_processor"]["special_tokens"].items():
        spec["ids"] = [ids[name]]
    trained["decoder"] = {"type": "Sequence", "decoders": [
        trained["decoder"], {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return Tokenizer.from_str(json.dumps(trained))

# BERT: its normaliser and pre-tokeniser, WordPiece with "##", "[CLS] $A [SEP]".
def wordpiece_style():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]",
                                                                         "[SEP]", "[MASK]"])
    tok.train_from_iterator(corpus(), trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok

# WordPiece behind the Whitespace pre-tokeniser, cased, with NFD + strip accents.
def wordpiece_whitespace():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(cleanup=False)
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"])
    tok.train_from_iterator(corpus(), trainer)
    return tok

def main():
    fixtures = {"tokenizer_hf_bpe.json": hf_style(), "tokenizer_qwen2_style.json": qwen2_style(),
                "tokenizer_sentencepiece_bpe.json": sentencepiece_style(),
                "tokenizer_metaspace_bpe.json": metaspace_style(),
                "tokenizer_unigram.json": unigram_style(),
                "tokenizer_unigram_bytes.json": unigram_byte_fallback(),
                "tokenizer_wordpiece.json": wordpiece_style(),
                "tokenizer_wordpiece_whitespace.json": wordpiece_whitespace()}
    cachelens = root / "tests" / "data" / "tokenizer_cachelens_bpe.json"
    if cachelens.exists():
        fixtures[cachelens.name] = Tokenizer.from_file(str(cachelens))
    golden = {}
    for name, tok in fixtures.items():
        if name != cachelens.name:
            tok.save(str(out / name))
        golden[name] = []
        for t in TEXTS + EXTRA_TEXTS:
            ids = tok.encode(t, add_special_tokens=False).ids
            golden[name].append({"text": t, "ids": ids,
                                 "ids_with_special_tokens": tok.encode(t).ids,
                                 "decoded": tok.decode(ids, skip_special_tokens=False)})
    (out / "tokenizer_golden.json").write_text(json.dumps(golden, ensure_ascii=False, indent=1))
    print("wrote", ", ".join(fixtures), "and tokenizer_golden.json")

if __name__ == "__main__":
    sys.exit(main())
