# With llama_float64_prelude.py: lm-eval's formulas for the task files in
# DIR/tasks over a float64 forward of DIR/hf, tokenized by SentencePiece
# (DIR/hf/tokenizer.model). Reads DIR/gen_contexts.json and first writes
# DIR/tasks/gen.jsonl: for the first context whose greedy continuation has a
# stop string of two ASCII letters inside it (after some text), the
# continuation cut there is the target (exact match); for the others a
# target they cannot produce. Writes DIR/expected.json: each task's metrics, and
# the smallest margin of each decision (argmax over choices, greedy tokens),
# so a test can tell that float32 noise cannot flip them.
import glob, json, math, os, re, sys
import sentencepiece as spm

out = sys.argv[1]
forward = llama_float64(out + "/hf")
sp = spm.SentencePieceProcessor(model_file=out + "/hf/tokenizer.model")
max_length = json.load(open(out + "/hf/config.json"))["max_position_embeddings"]
prefix, eos = sp.bos_id(), sp.eos_id()
encode = lambda s: sp.encode(s)
# transformers' decode with skip_special_tokens, as lm-eval's generate_until reads the text.
decode = lambda ids: sp.decode([t for t in ids if not (sp.is_control(t) or sp.is_unknown(t))])
margins = {}

def note_margin(task, m):
    margins[task] = min(margins.get(task, float("inf")), m)

def top2_gap(row):
    v = row.topk(2).values
    return (v[0] - v[1]).item()

def score(task, context_enc, continuation_enc):
    """lm-eval's _loglikelihood_tokens for one request: (sum logprob, greedy)."""
    inp = (context_enc + continuation_enc)[-(max_length + 1):][:-1]
    lp = forward(inp)
    n = len(continuation_enc)
    rows = lp[len(inp) - n:]
    ll = sum(rows[j, continuation_enc[j]].item() for j in range(n))
    greedy = all(rows[j].argmax().item() == continuation_enc[j] for j in range(n))
    for j in range(n):
        best = rows[j].max().item()
        note_margin(task, top2_gap(rows[j]) if rows[j].argmax().item() == continuation_enc[j] else best - rows[j, continuation_enc[j]].item())
    return ll, greedy

def encode_pair(context, continuation):
    if context == "":
        return [prefix], encode(continuation)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole, ctx = encode(context + continuation), encode(context)
    return ctx, whole[len(ctx):]

def rolling_windows(tokens):
    """get_rolling_token_windows(context_len=1) then make_disjoint_window: (context, continuation) pairs."""
    pred_len, predicted = max_length, 0
    first = min(max_length, len(tokens))
    windows = [([prefix] + tokens[:first - 1], tokens[:first])]
    predicted += first
    while predicted < len(tokens):
        n = min(len(tokens) - predicted, pred_len)
        end = predicted + n
        windows.append((tokens[end - max_length - 1:end - 1], tokens[end - n:end]))
        predicted += n
    return [(a[:len(a) - (len(b) - 1)], b) for a, b in windows]

def argmax_margin(values):
    order = sorted(values, reverse=True)
    return order[0] - order[1]

def greedy_until(context, until, max_gen_toks):
    ids = encode(context)[-(max_length - max_gen_toks):]
    gen = []
    for _ in range(max_gen_toks):
        lp = forward(ids + gen)[-1]
        note_margin("gen", top2_gap(lp))
        t = lp.argmax().item()
        if t == eos:
            break
        gen.append(t)
        if any(u in decode(gen) for u in until):
            break
    text = decode(gen)
    for u in until:
        text = text.split(u)[0]
    return text, decode(gen)

# generate_until: the task file, then its expected metric.
contexts = json.load(open(out + "/gen_contexts.json"))
records = []
for c in contexts:
    _, raw = greedy_until(c, [], 24)
    clean = [raw[i:i + 2] for i in range(1, len(raw) - 1) if raw[i:i + 2].isascii() and raw[i:i + 2].isalpha()
             and raw.split(raw[i:i + 2])[0].strip()]
    if clean and not records:
        records.append({"context": c, "until": [clean[0]], "target": greedy_until(c, [clean[0]], 24)[0], "max_gen_toks": 24})
    else:
        records.append({"context": c, "until": ["\n", "da"], "target": "nothing like it", "max_gen_toks": 12})
with open(out + "/tasks/gen.jsonl", "w") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")

expected = {}
for path in sorted(glob.glob(out + "/tasks/*.jsonl")):
    task = os.path.basename(path)[:-len(".jsonl")]
    docs = [json.loads(line) for line in open(path) if line.strip()]
    m = {}
    if "choices" in docs[0] or "contexts" in docs[0]:
        acc = acc_norm = 0
        for d in docs:
            if "choices" in d:
                delim = d.get("target_delimiter", " ")
                lls = [score(task, *encode_pair(d["context"], delim + c))[0] for c in d["choices"]]
                lens = [float(len(c)) for c in d["choices"]]
            else:
                lls = [score(task, *encode_pair(c, d["continuation"]))[0] for c in d["contexts"]]
                lens = [float(len(c)) for c in d["contexts"]]
            normed = [ll / n for ll, n in zip(lls, lens)]
            note_margin(task, min(argmax_margin(lls), argmax_margin(normed)))
            acc += lls.index(max(lls)) == d["gold"]
            acc_norm += normed.index(max(normed)) == d["gold"]
        m["acc"] = acc / len(docs)
        if all("choices" in d for d in docs):
            m["acc_norm"] = acc_norm / len(docs)
    elif "text" in docs[0]:
        ll = words = nbytes = 0
        for d in docs:
            for ctx, cont in rolling_windows(encode(d["text"])):
                ll += score(task, ctx, cont)[0]
            words += d.get("words", len(re.split(r"\s+", d["text"])))
            nbytes += d.get("bytes", len(d["text"].encode("utf-8")))
        m = {"word_perplexity": math.exp(-ll / words), "byte_perplexity": math.exp(-ll / nbytes),
             "bits_per_byte": -ll / nbytes / math.log(2)}
    elif "until" in docs[0]:
        m["exact_match"] = sum(greedy_until(d["context"], d["until"], d["max_gen_toks"])[0].strip() == d["target"].strip()
                               for d in docs) / len(docs)
    else:
        results = [score(task, *encode_pair(d["context"], d["continuation"])) for d in docs]
        mean = sum(r[0] for r in results) / len(docs)
        m = {"loglikelihood": mean, "perplexity": math.exp(-mean), "acc": sum(r[1] for r in results) / len(docs)}
    expected[task] = m
json.dump({"metrics": expected, "margins": margins}, open(out + "/expected.json", "w"), indent=1)
