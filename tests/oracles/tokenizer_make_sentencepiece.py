# Writes a tiny Llama-2-style tokenizer directory into argv[1]: a SentencePiece
# BPE model with byte fallback (tokenizer.model), the same vocabulary and
# merges as a Hugging Face tokenizer.json, and tokenizer_config.json.
# argv[2] picks the tokenizer.json layout Hugging Face has used for such
# models: "prepend" (a Prepend + Replace normalizer, Llama 2's file) or
# "metaspace" (a Metaspace pre-tokenizer, the newer conversions').
import json, os, random, sys
import sentencepiece as spm

out, layout = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
rng = random.Random(7)
words = ("the quick brown fox jumps over lazy dog hello world data model train token piece "
         "naïve café Straße 東京 서울 Москва Ελληνικά 😀 🎉 numbers 3.14 2023 it's they're").split()
lines = []
for _ in range(3000):
    n = rng.randint(3, 14)
    sep = lambda: rng.choice([" ", " ", " ", "  ", "\t", " \n"])
    lines.append("".join(rng.choice(words) + sep() for _ in range(n)).strip())
corpus = os.path.join(out, "corpus.txt")
with open(corpus, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
spm.SentencePieceTrainer.train(
    input=corpus, model_prefix=os.path.join(out, "tokenizer"), model_type="bpe", vocab_size=520,
    byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
    add_dummy_prefix=True, allow_whitespace_only_pieces=True, split_digits=True, character_coverage=0.9995,
    unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
os.remove(corpus)
os.remove(os.path.join(out, "tokenizer.vocab"))

sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
# A merge (left, right) for every way a piece splits into two pieces, ordered
# as SentencePiece scores the merged piece (its id), as transformers' converter does.
merges = []
for piece, pid in vocab.items():
    if sp.is_control(pid) or sp.is_unknown(pid) or sp.is_byte(pid):
        continue
    for k in range(1, len(piece)):
        left, right = piece[:k], piece[k:]
        if left in vocab and right in vocab:
            merges.append((pid, vocab[left], vocab[right], left, right))
merges.sort()
special = [{"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True} for i in (0, 1, 2)]
bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
tokenizer = {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
    "post_processor": {"type": "TemplateProcessing",
                       "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                       "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 1}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
              "vocab": vocab, "merges": [[m[3], m[4]] for m in merges]},
}
if layout == "prepend":
    tokenizer["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    tokenizer["pre_tokenizer"] = None
    tokenizer["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
else:
    tokenizer["normalizer"] = None
    tokenizer["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    tokenizer["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(tokenizer, f, ensure_ascii=False)
with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
               "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
               "model_max_length": 4096}, f, ensure_ascii=False)
