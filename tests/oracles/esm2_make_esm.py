import os, sys
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
B, T, V, C, L, H, FF, P = 2, 12, 33, 32, 2, 4, 48, 64
PAD, MASK = 1, 32
D = C // H
def rnd(*shape):
    return torch.randn(*shape) * 0.2
sd = {"esm.embeddings.word_embeddings.weight": rnd(V, C), "esm.embeddings.position_ids": torch.arange(P)[None]}
def linear(name, n_in, n_out):
    sd[name + ".weight"], sd[name + ".bias"] = rnd(n_out, n_in), rnd(n_out)
def norm(name):
    sd[name + ".weight"], sd[name + ".bias"] = 1 + rnd(C), rnd(C)
for i in range(L):
    p = "esm.encoder.layer.%d." % i
    for n in ("query", "key", "value"):
        linear(p + "attention.self." + n, C, C)
    sd[p + "attention.self.rotary_embeddings.inv_freq"] = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    linear(p + "attention.output.dense", C, C)
    norm(p + "attention.LayerNorm")
    linear(p + "intermediate.dense", C, FF)
    linear(p + "output.dense", FF, C)
    norm(p + "LayerNorm")
norm("esm.encoder.emb_layer_norm_after")
linear("esm.contact_head.regression", L * H, 1)
linear("lm_head.dense", C, C)
norm("lm_head.layer_norm")
sd["lm_head.bias"] = rnd(V)
sd["lm_head.decoder.weight"] = sd["esm.embeddings.word_embeddings.weight"]

def lin(x, name):
    return x @ sd[name + ".weight"].t() + sd[name + ".bias"]
def ln(x, name):
    return F.layer_norm(x, (C,), sd[name + ".weight"], sd[name + ".bias"], 1e-5)
def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)
ids = torch.randint(4, 30, (B, T))
mask = torch.ones(B, T)
mask[1, 9:] = 0
ids[1, 9:] = PAD
ids[0, 3] = ids[0, 6] = ids[1, 2] = MASK
x = sd["esm.embeddings.word_embeddings.weight"][ids]
x = x.masked_fill((ids == MASK)[..., None], 0.0)
observed = (ids == MASK).sum(-1).float() / mask.sum(-1)
x = x * (1 - 0.15 * 0.8) / (1 - observed)[:, None, None]
x = x * mask[..., None]
inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
freqs = torch.arange(T).float()[:, None] * inv[None, :]
emb = torch.cat((freqs, freqs), dim=-1)
cos, sin = emb.cos()[None, None], emb.sin()[None, None]
for i in range(L):
    p = "esm.encoder.layer.%d." % i
    h = ln(x, p + "attention.LayerNorm")
    q, k, v = [lin(h, p + "attention.self." + n).view(B, T, H, D).transpose(1, 2) for n in ("query", "key", "value")]
    q = q * D ** -0.5
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    s = q @ k.transpose(-1, -2) + (1 - mask)[:, None, None, :] * -1e9
    a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    x = x + lin(a, p + "attention.output.dense")
    h = ln(x, p + "LayerNorm")
    x = x + lin(F.gelu(lin(h, p + "intermediate.dense")), p + "output.dense")
x = ln(x, "esm.encoder.emb_layer_norm_after")
m = F.layer_norm(F.gelu(lin(x, "lm_head.dense")), (C,), sd["lm_head.layer_norm.weight"], sd["lm_head.layer_norm.bias"], 1e-5)
mlm = m @ sd["esm.embeddings.word_embeddings.weight"].t() + sd["lm_head.bias"]
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
config = {"model_type": "esm", "architectures": ["EsmForMaskedLM"], "vocab_size": V, "hidden_size": C,
          "num_hidden_layers": L, "num_attention_heads": H, "intermediate_size": FF, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "max_position_embeddings": P,
          "initializer_range": 0.02, "layer_norm_eps": 1e-5, "position_embedding_type": "rotary",
          "emb_layer_norm_before": False, "token_dropout": True, "mask_token_id": MASK, "pad_token_id": PAD,
          "is_folding_model": False}
json.dump(config, open(out + "/hf/config.json", "w"))
for name, t in [("ids", ids), ("mask", mask.long()), ("mlm", mlm)]:
    open(out + "/" + name + ".bin", "wb").write(t.detach().numpy().tobytes())
