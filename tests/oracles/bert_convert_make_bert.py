import os, sys
import torch.nn.functional as F
out, kind = sys.argv[1], sys.argv[2]
nsp, roberta, seq, tok = kind == "nsp", kind == "roberta", kind == "seq", kind == "tok"
dpr = kind in ("dprq", "dprc")
qa, bare = kind == "qa", kind == "base"   # BertForQuestionAnswering; BertModel (no heads, no bert. prefix)
finetuned = seq or tok
torch.manual_seed(1 if kind == "dprc" else 0)
B, T, V, C, L, H, FF, P = 2, 12, 50, 32, 2, 4, 48, 16
PAD = 1 if roberta else 0
base = {"roberta": "roberta.", "dprq": "question_encoder.bert_model.", "dprc": "ctx_encoder.bert_model.",
        "base": ""}.get(kind, "bert.")
head = ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder") if roberta else \
       ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias", "cls.predictions.decoder")

def rnd(*shape):
    return torch.randn(*shape) * 0.2

TYPES = 1 if roberta else 2
sd = {base + "embeddings.word_embeddings.weight": rnd(V, C),
      base + "embeddings.position_embeddings.weight": rnd(P + (PAD + 1 if roberta else 0), C),
      base + "embeddings.token_type_embeddings.weight": rnd(TYPES, C),
      base + "embeddings.LayerNorm.weight": 1 + rnd(C), base + "embeddings.LayerNorm.bias": rnd(C),
      base + "embeddings.position_ids": torch.arange(P)[None]}
def linear(name, n_in, n_out):
    sd[name + ".weight"], sd[name + ".bias"] = rnd(n_out, n_in), rnd(n_out)
def norm(name):
    sd[name + ".weight"], sd[name + ".bias"] = 1 + rnd(C), rnd(C)
for i in range(L):
    p = base + "encoder.layer.%d." % i
    for n in ("query", "key", "value"):
        linear(p + "attention.self." + n, C, C)
    linear(p + "attention.output.dense", C, C)
    norm(p + "attention.output.LayerNorm")
    linear(p + "intermediate.dense", C, FF)
    linear(p + "output.dense", FF, C)
    norm(p + "output.LayerNorm")
if not finetuned and not dpr and not qa and not bare:
    linear(head[0], C, C)
    norm(head[1])
    sd[head[2]] = rnd(V)
    sd[head[3] + ".weight"] = sd[base + "embeddings.word_embeddings.weight"]  # tied, as HF saves it
if nsp or seq or bare or kind == "dprq":  # (facebook's DPR checkpoints keep a pooler HF's DPR does not use)
    linear(base + "pooler.dense", C, C)
if nsp:
    linear("cls.seq_relationship", C, 2)
LABELS = ["negative", "neutral", "positive"] if seq else ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
if finetuned:
    linear("classifier", C, len(LABELS))
if qa:
    linear("qa_outputs", C, 2)
saved = sd
if qa or bare:   # their references in float64, from the same (float32) weights
    sd = {k: v.double() for k, v in sd.items()}

def lin(x, name):
    return x @ sd[name + ".weight"].t() + sd[name + ".bias"]
EPS = 1e-5 if roberta else 1e-12
def ln(x, name):
    return F.layer_norm(x, (C,), sd[name + ".weight"], sd[name + ".bias"], EPS)

ids = torch.randint(2, V, (B, T))
types = torch.zeros(B, T).long() if roberta else torch.cat([torch.zeros(B, 5), torch.ones(B, T - 5)], 1).long()
mask = torch.ones(B, T, dtype=torch.float64 if qa or bare else torch.float32)
mask[1, 8:] = 0
ids[1, 8:] = PAD
# RoBERTa numbers tokens from PAD + 1 and gives padding position PAD (HF's create_position_ids_from_input_ids)
positions = torch.where(ids != PAD, torch.arange(T) + PAD + 1, torch.full_like(ids, PAD)) if roberta else torch.arange(T)
x = sd[base + "embeddings.word_embeddings.weight"][ids] + sd[base + "embeddings.position_embeddings.weight"][positions] \
    + sd[base + "embeddings.token_type_embeddings.weight"][types]
x = ln(x, base + "embeddings.LayerNorm")
D = C // H
for i in range(L):
    p = base + "encoder.layer.%d." % i
    q, k, v = [lin(x, p + "attention.self." + n).view(B, T, H, D).transpose(1, 2) for n in ("query", "key", "value")]
    s = q @ k.transpose(-1, -2) / D ** 0.5 + (1 - mask)[:, None, None, :] * -1e9   # padding keys hidden
    a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    x = ln(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
    x = ln(x + lin(F.gelu(lin(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
if dpr:   # the [CLS] state
    mlm = x[:, 0]
elif bare:   # every token's last hidden state
    mlm = x
elif qa:   # start and end scores of every token: (B, T, 2)
    mlm = lin(x, "qa_outputs")
elif finetuned:   # the pooled [CLS] state (sequence) or every token's state (token), then the classifier
    mlm = lin(torch.tanh(lin(x[:, 0], base + "pooler.dense")) if seq else x, "classifier")
else:
    mlm = ln(F.gelu(lin(x, head[0])), head[1]) @ sd[base + "embeddings.word_embeddings.weight"].t() + sd[head[2]]
hf = out + "/hf" + {"dprq": "/q_encoder", "dprc": "/ctx_encoder"}.get(kind, "")
os.makedirs(hf, exist_ok=True)
write_safetensors(hf + "/model.safetensors", saved)
arch = {"roberta": "RobertaForMaskedLM", "nsp": "BertForPreTraining", "mlm": "BertForMaskedLM",
        "seq": "BertForSequenceClassification", "tok": "BertForTokenClassification",
        "dprq": "DPRQuestionEncoder", "dprc": "DPRContextEncoder", "qa": "BertForQuestionAnswering",
        "base": "BertModel"}[kind]
config = {"model_type": "roberta" if roberta else "dpr" if dpr else "bert", "architectures": [arch],
          "vocab_size": V, "hidden_size": C, "num_hidden_layers": L, "num_attention_heads": H,
          "intermediate_size": FF, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": P + (PAD + 1 if roberta else 0),
          "type_vocab_size": TYPES, "initializer_range": 0.02, "layer_norm_eps": EPS, "pad_token_id": PAD,
          "position_embedding_type": "absolute"}
if finetuned:
    config.update({"id2label": {str(i): n for i, n in enumerate(LABELS)}, "label2id": {n: i for i, n in enumerate(LABELS)},
                   "classifier_dropout": None})
if dpr:
    config["projection_dim"] = 0
json.dump(config, open(hf + "/config.json", "w"))
open(hf + "/vocab.txt", "w").write("\n".join("t%d" % i for i in range(V)) + "\n")
json.dump({"do_lower_case": True}, open(hf + "/tokenizer_config.json", "w"))
if bare:
    open(out + "/pooled.bin", "wb").write(torch.tanh(lin(x[:, 0], "pooler.dense")).numpy().tobytes())
for name, t in [("ids", ids), ("types", types), ("mask", mask.long()), ("mlm", mlm)]:
    open(out + "/" + name + ("_" + kind if dpr else "") + ".bin", "wb").write(t.detach().numpy().tobytes())
if nsp:
    nsp_logits = lin(torch.tanh(lin(x[:, 0], base + "pooler.dense")), "cls.seq_relationship")
    open(out + "/nsp.bin", "wb").write(nsp_logits.detach().numpy().tobytes())
