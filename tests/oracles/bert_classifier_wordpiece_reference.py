import sys, unicodedata
vocab = [l.strip() for l in open(sys.argv[1], encoding="utf-8")]
lower = sys.argv[2] == "1"
if lower:
    vocab = [v.lower() for v in vocab]
vocab = set(vocab)
def is_ws(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"
def is_ctrl(c):
    return not is_ws(c) and unicodedata.category(c) in ("Cc", "Cf")
def is_punc(c):
    cp = ord(c)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or unicodedata.category(c).startswith("P")
def is_cjk(cp):
    return 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF
def basic(text):
    text = "".join(" " if is_ws(c) else c for c in text if ord(c) not in (0, 0xFFFD) and not is_ctrl(c))
    text = "".join(" %s " % c if is_cjk(ord(c)) else c for c in text)
    out = []
    for tok in text.split():
        if lower:
            tok = tok.lower()
        tok = "".join(c for c in unicodedata.normalize("NFD", tok) if unicodedata.category(c) != "Mn")
        word = ""
        for c in tok:
            if is_punc(c):
                if word: out.append(word)
                out.append(c); word = ""
            else:
                word += c
        if word: out.append(word)
    return out
def wordpiece(word):
    if len(word) > 200: return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            p = ("##" if start else "") + word[start:end]
            if p in vocab: break
            end -= 1
        if end == start: return ["[UNK]"]
        pieces.append(p); start = end
    return pieces
for line in open(sys.argv[3], encoding="utf-8").read().split("\n"):
    print(" ".join(p for w in basic(line) for p in wordpiece(w)))
