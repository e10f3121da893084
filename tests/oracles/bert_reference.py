import sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1])
H, G, norm_first, mask_padding = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5] == "1"
logits_scale, by_d, R = float(sys.argv[6]), sys.argv[7] == "d", int(sys.argv[8])
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
f = d["features"]
ids, attend = f["input_ids"], f["attention_mask"].bool()

def norm(x, name):
    return F.layer_norm(x, (x.shape[-1],), s[name + ".weight"], s[name + ".bias"], 1e-5)

def dense(x, name):
    return F.linear(x, s[name + ".weight"], s.get(name + ".bias"))

def rotate(x):  # (B, T, heads, D): pairs (2j, 2j+1) of the first R dims turn by t * 10000^(-2j/R)
    if not R:
        return x
    t = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, R, 2, dtype=torch.float64) / R)
    cos, sin = t.cos()[None, :, None, :], t.sin()[None, :, None, :]
    even, odd = x[..., 0:R:2], x[..., 1:R:2]
    return torch.cat([torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2), x[..., R:]], -1)

e = "bert_encoder."
x = s[e + "embedding_layer.word_embeddings.weight"][ids]
B, T, C = x.shape
if e + "embedding_layer.position_embeddings.weight" in s:
    # RoBERTa (HF's create_position_ids_from_input_ids): each token at its count of non-pad tokens so far,
    # past the pad id (0 here); pads at 0
    positions = torch.cumsum(ids != 0, 1) * (ids != 0) if mask_padding else torch.arange(T)
    x = x + s[e + "embedding_layer.position_embeddings.weight"][positions]
if e + "embedding_layer.segment_embeddings.weight" in s:
    x = x + s[e + "embedding_layer.segment_embeddings.weight"][f["token_type_ids"]]
x = norm(x, e + "embed_ln_f")
D = C // H
hide = ~attend[:, None, None, :]  # padding keys, hidden from every query
for i in range(2):
    p = e + f"transformer_encoder.layers.{i}."
    def attention(h):
        q = rotate(dense(h, p + "self_attn.proj_q_dense_layer").view(B, T, H, D)).transpose(1, 2)
        k = rotate(dense(h, p + "self_attn.proj_k_dense_layer").view(B, T, G, D)).transpose(1, 2)
        v = dense(h, p + "self_attn.proj_v_dense_layer").view(B, T, G, D).transpose(1, 2)
        k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
        scores = (q @ k.transpose(-1, -2) / (D if by_d else D ** 0.5)).masked_fill(hide, float("-inf"))
        return dense((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C), p + "self_attn.proj_output_dense_layer")
    def ffn(h):
        return dense(F.gelu(dense(h, p + "ffn.ffn.0.linear_layer")), p + "ffn.ffn.1.linear_layer")
    if norm_first:
        x = x + attention(norm(x, p + "norm1"))
        x = x + ffn(norm(x, p + "norm2"))
    else:  # the original Transformer's post-norm
        x = norm(x + attention(x), p + "norm1")
        x = norm(x + ffn(x), p + "norm2")
if e + "transformer_encoder.norm.weight" in s:
    x = norm(x, e + "transformer_encoder.norm")

at = torch.gather(x, 1, f["masked_lm_positions"][:, :, None].expand(-1, -1, C))
m = norm(F.gelu(dense(at, "bert_mlm_head.mlm_transform.ffn.ffn.0.linear_layer")), "bert_mlm_head.mlm_transform.ln")
out = "bert_mlm_head.classifier.ffn.0.linear_layer."
mlm = F.linear(m, s.get(out + "weight", s[e + "embedding_layer.word_embeddings.weight"]), s[out + "bias"]) * logits_scale
V = mlm.shape[-1]
per_token = F.cross_entropy(mlm.reshape(-1, V), f["labels"].reshape(-1), reduction="none")
loss = (per_token * f["masked_lm_mask"].reshape(-1).double()).sum() / B * 0.25  # mlm_loss_weight
errs = [(mlm - d["mlm_logits"].double()).abs().max().item()]
if "bert_cls_head.classifier.ffn.0.linear_layer.weight" in s:
    pooled = torch.tanh(dense(x[:, 0], e + "pooler.pooler.ffn.0.linear_layer"))
    nsp = dense(pooled, "bert_cls_head.classifier.ffn.0.linear_layer") * logits_scale
    loss = loss + F.cross_entropy(nsp, f["next_sentence_label"])
    errs.append((nsp - d["nsp_logits"].double()).abs().max().item())
errs.append(abs(loss.item() - d["loss"].item()))
print("max abs diffs (mlm, [nsp,] loss)", errs)
sys.exit(0 if max(errs) < 1e-5 else 1)
