import sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1])
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
ids, mask = d["ids"], d["mask"]
B, T = ids.shape
C, H, R, L = 16, 2, 8, 2
D = C // H
def ln(x, p):
    return F.layer_norm(x, (C,), s[p + ".weight"], s[p + ".bias"], 1e-5)
def dense(x, p):
    return F.linear(x, s[p + ".weight"], s[p + ".bias"])
x = s["bert_encoder.embedding_layer.word_embeddings.weight"][ids]
masked = (ids == 32).double()
kept = 1 - masked.sum(-1, keepdim=True) / mask.double().sum(-1, keepdim=True)
x = x * (1 - masked)[..., None] * (1 - 0.15 * 0.8) / kept[..., None]
inv = 1.0 / (10000 ** (torch.arange(0, R, 2, dtype=torch.float32) / R))
angle = torch.arange(T).double()[:, None] * inv.double()[None, :]
cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]
def rope(t):
    t = t.clone()
    a, b = t[..., 0:R:2].clone(), t[..., 1:R:2].clone()
    t[..., 0:R:2], t[..., 1:R:2] = a * cos - b * sin, a * sin + b * cos
    return t
keep = mask.bool()[:, None, None, :]
for i in range(L):
    p = f"bert_encoder.transformer_encoder.layers.{i}."
    h = ln(x, p + "norm1")
    q, k, v = (dense(h, p + f"self_attn.proj_{n}_dense_layer").view(B, T, H, D) for n in "qkv")
    q, k = rope(q), rope(k)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / D ** 0.5
    probs = scores.masked_fill(~keep, float("-inf")).softmax(-1)
    a = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(B, T, C)
    x = x + dense(a, p + "self_attn.proj_output_dense_layer")
    h = ln(x, p + "norm2")
    x = x + dense(F.gelu(dense(h, p + "ffn.ffn.0.linear_layer")), p + "ffn.ffn.1.linear_layer")
x = ln(x, "bert_encoder.transformer_encoder.norm")
h = ln(F.gelu(dense(x, "bert_mlm_head.mlm_transform.ffn.ffn.0.linear_layer")), "bert_mlm_head.mlm_transform.ln")
ref = h @ s["bert_encoder.embedding_layer.word_embeddings.weight"].t() + s["bert_mlm_head.classifier.ffn.0.linear_layer.bias"]
err = (ref - d["logits"].double())[mask.bool()].abs().max().item()
print("max abs error", err)
sys.exit(0 if err < 1e-7 else 1)  # zoo rotates q and k in float32, as modelzoo does
