#!/usr/bin/env python3
"""Converts lm-eval task data a user has on disk into zoo's task files (docs/evaluation.md).

    scripts/lm_eval_tasks.py FORMAT INPUT OUTPUT.jsonl [--labels FILE] [--limit N]

FORMAT and the published files it reads (JSON Lines unless said):
  hellaswag   hellaswag_val.jsonl (ctx_a, ctx_b, activity_label, endings, label)
  arc         ARC-Easy/Challenge *.jsonl (question.stem, question.choices, answerKey),
              or a datasets JSON export (question, choices.text/label, answerKey)
  piqa        valid.jsonl (goal, sol1, sol2) with --labels valid-labels.lst
  winogrande  dev.jsonl (sentence with "_", option1, option2, answer)
  lambada     lambada_test.jsonl (text)
  wikitext    wiki.test.raw (wikitext-2/103 raw; one document per " = Title = " article)

Each is written as lm-eval's task prepares its requests: the same prompts,
choices and preprocessing, so zoo's acc, acc_norm and perplexities are those
lm-eval reports for the same model. Python 3 standard library only.
"""
import argparse
import json
import re
import sys


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not JSON ({e})")


def need(doc, key, path, n):
    if key not in doc:
        sys.exit(f"{path}: record {n} has no \"{key}\" (is this the right FORMAT?)")
    return doc[key]


def hellaswag_clean(text):
    # lm-eval's hellaswag preprocess: WikiHow's [title] marks become sentence ends, other [tags] go.
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag(path, _):
    for n, d in enumerate(read_jsonl(path), 1):
        ctx = need(d, "ctx_a", path, n) + " " + need(d, "ctx_b", path, n).capitalize()
        yield {"context": hellaswag_clean(need(d, "activity_label", path, n) + ": " + ctx),
               "choices": [hellaswag_clean(e) for e in need(d, "endings", path, n)], "gold": int(need(d, "label", path, n))}


def arc(path, _):
    for n, d in enumerate(read_jsonl(path), 1):
        q = need(d, "question", path, n)
        if isinstance(q, dict):  # AI2's release
            stem, texts, labels = q["stem"], [c["text"] for c in q["choices"]], [c["label"] for c in q["choices"]]
        else:  # a datasets export
            stem, texts, labels = q, d["choices"]["text"], d["choices"]["label"]
        key = need(d, "answerKey", path, n)
        if key not in labels:
            sys.exit(f"{path}: record {n}: answerKey {key!r} is not one of the labels {labels}")
        yield {"context": f"Question: {stem}\nAnswer:", "choices": texts, "gold": labels.index(key)}


def piqa(path, labels_path):
    if not labels_path:
        sys.exit("piqa: pass --labels valid-labels.lst (the answers are published beside the questions)")
    with open(labels_path, encoding="utf-8") as f:
        labels = [int(line) for line in f if line.strip()]
    docs = list(read_jsonl(path))
    if len(docs) != len(labels):
        sys.exit(f"piqa: {path} has {len(docs)} questions but {labels_path} {len(labels)} labels")
    for n, (d, label) in enumerate(zip(docs, labels), 1):
        yield {"context": f"Question: {need(d, 'goal', path, n)}\nAnswer:",
               "choices": [need(d, "sol1", path, n), need(d, "sol2", path, n)], "gold": label}


def winogrande(path, _):
    # lm-eval's partial scoring: each option completes the sentence up to the
    # blank; the rest of the sentence is scored after each.
    for n, d in enumerate(read_jsonl(path), 1):
        sentence = need(d, "sentence", path, n)
        if "_" not in sentence:
            sys.exit(f"{path}: record {n}: the sentence has no blank \"_\"")
        blank = sentence.index("_")
        yield {"contexts": [sentence[:blank] + need(d, "option1", path, n), sentence[:blank] + need(d, "option2", path, n)],
               "continuation": " " + sentence[blank + 1:].strip(), "gold": {"1": 0, "2": 1}[str(need(d, "answer", path, n))]}


def lambada(path, _):
    for n, d in enumerate(read_jsonl(path), 1):
        words = need(d, "text", path, n).split(" ")
        yield {"context": " ".join(words[:-1]), "continuation": " " + words[-1]}


def wikitext_detokenize(s):
    # lm-eval's wikitext_detokenizer (Megatron's rules): undo the dataset's tokenized spacing.
    s = s.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", r"/'[0-9]/", s)
    for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "), (" . ", ". "),
                 (" ! ", "! "), (" ? ", "? "), (" , ", ", ")):
        s = s.replace(a, b)
    s = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", s)
    s = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", s)
    s = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", s)
    s = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', s)
    s = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", s)
    for a, b in (("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" " + chr(176) + " ", chr(176)),
                 (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")):
        s = s.replace(a, b)
    return s


def wikitext(path, _):
    # Articles as EleutherAI's wikitext_document_level pages: a line " = Title = " starts one.
    pages, page = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if re.fullmatch(r" = [^=].*[^=] = \n", line) and any(l.strip() for l in page):
                pages.append("".join(page))
                page = []
            page.append(line)
    if any(l.strip() for l in page):
        pages.append("".join(page))
    for p in pages:
        # lm-eval counts the words and bytes of the page before detokenizing.
        yield {"text": wikitext_detokenize(p), "words": len(re.split(r"\s+", p)), "bytes": len(p.encode("utf-8"))}


FORMATS = {"hellaswag": hellaswag, "arc": arc, "piqa": piqa, "winogrande": winogrande, "lambada": lambada,
           "wikitext": wikitext}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("format", choices=sorted(FORMATS))
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--labels", help="piqa: the labels file")
    ap.add_argument("--limit", type=int, default=0, help="records to write (0: all)")
    a = ap.parse_args()
    written = 0
    with open(a.output, "w", encoding="utf-8") as out:
        for record in FORMATS[a.format](a.input, a.labels):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            written += 1
            if a.limit and written >= a.limit:
                break
    print(f"{a.output}: {written} {a.format} records")


if __name__ == "__main__":
    main()
