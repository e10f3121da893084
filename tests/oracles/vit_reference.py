import json, sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1]); o = json.loads(sys.argv[2])
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
x = d["images"].double()
B, C, H, W = x.shape
ph, pw, D, heads, L = o["patch"], o["patch"], o["hidden"], o["heads"], o["layers"]
def dense(t, p): return F.linear(t, s[p + ".weight"], s.get(p + ".bias"))
def ln(t, p, eps): return F.layer_norm(t, (D,), s[p + ".weight"], s[p + ".bias"], eps)
e = "vit_model.embedding_layer."
if o["conv"]:
    t = F.conv2d(x, s[e + "linear_proj.weight"], s[e + "linear_proj.bias"], stride=(ph, pw)).flatten(2).transpose(1, 2)
else:
    p = x.reshape(B, C, H // ph, ph, W // pw, pw).permute(0, 2, 4, 3, 5, 1).reshape(B, -1, ph * pw * C)
    t = dense(p, e + "linear_proj")
N = t.shape[1]
t = torch.cat([s[e + "cls_embedding"].expand(B, 1, D), t], 1)
pos = s[e + "position_embeddings.weight"]
t = t + torch.cat([pos[N:N + 1], pos[:N]], 0)
if o["post_ln"]: t = ln(t, e + "post_embed_ln", 1e-5)
eps, hd = o["eps"], D // heads
for i in range(L):
    p = f"vit_model.encoder.transformer_encoder.layers.{i}."
    def attn(h):
        q, k, v = (dense(h, p + f"self_attn.proj_{n}_dense_layer").view(B, -1, heads, hd).transpose(1, 2) for n in "qkv")
        a = ((q @ k.transpose(-1, -2)) / hd ** 0.5).softmax(-1) @ v
        return dense(a.transpose(1, 2).reshape(B, -1, D), p + "self_attn.proj_output_dense_layer")
    def ffn(h): return dense(F.gelu(dense(h, p + "ffn.ffn.0.linear_layer")), p + "ffn.ffn.1.linear_layer")
    g1, g2 = s.get(p + "layer_scale1", 1.0), s.get(p + "layer_scale2", 1.0)  # LayerScale (DINOv2)
    if o["norm_first"]:
        t = t + g1 * attn(ln(t, p + "norm1", eps))
        t = t + g2 * ffn(ln(t, p + "norm2", eps))
    else:
        t = ln(t + g1 * attn(t), p + "norm1", eps)
        t = ln(t + g2 * ffn(t), p + "norm2", eps)
t = ln(t, "vit_model.encoder.transformer_encoder.norm", eps)
pooled = t[:, 0]
if o["pooler"]: pooled = torch.tanh(dense(pooled, "vit_model.encoder.pooler.pooler.ffn.0.linear_layer"))
logits = dense(pooled, "classifier.classifier.ffn.0.linear_layer")
err = (logits - d["logits"].double()).abs().max().item()
print("max abs error", err)
sys.exit(0 if err < 1e-10 else 1)
