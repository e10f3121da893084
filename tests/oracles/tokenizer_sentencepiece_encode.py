# Reference SentencePiece tokenization with the SentencePiece library's Python
# binding: encodes each string of the JSON list argv[2] with the model
# argv[1]. Control pieces (<s>, </s>) written in the text are matched whole
# first and each stretch between them is encoded on its own, as transformers'
# slow tokenizers do. Prints {"ids": [...], "decoded": [...]} as JSON.
import json, sys
import sentencepiece as spm

sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
controls = sorted((sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.is_control(i)), key=len, reverse=True)

def encode(text):
    ids, start, pos = [], 0, 0
    while pos < len(text):
        hit = next((c for c in controls if text.startswith(c, pos)), None)
        if hit is None:
            pos += 1
            continue
        if pos > start:
            ids += sp.encode(text[start:pos])
        ids.append(sp.piece_to_id(hit))
        pos += len(hit)
        start = pos
    if start < len(text):
        ids += sp.encode(text[start:])
    return ids

texts = json.load(open(sys.argv[2], encoding="utf-8"))
ids = [encode(t) for t in texts]
print(json.dumps({"ids": ids, "decoded": [sp.decode(i) for i in ids]}))
