import sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1])
R, theta, G, H = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[7])
parallel, alibi = sys.argv[5] == "parallel", sys.argv[6] == "alibi"
# muP and StarCoder's options: embeddings scale, logits scale, scores / D instead of / sqrt(D), layer i's scores / (i + 1)
emb_scale, logits_scale, by_d, by_layer = (float(sys.argv[8]), float(sys.argv[9]), sys.argv[10] == "d", sys.argv[11] == "1") \
    if len(sys.argv) > 8 else (1.0, 1.0, False, False)
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
# Gemma 2: attention scores and logits softcapped, the window on odd layers only (0: none)
att_cap, final_cap, odd_window = (float(sys.argv[12]), float(sys.argv[13]), int(sys.argv[14])) \
    if len(sys.argv) > 12 else (0.0, 0.0, 0)

def alibi_slopes(n):  # Press et al.: 2^(-8k/n), k = 1..n; other n: the power of two below, then every other of twice it
    if n & (n - 1) == 0:
        return [2 ** (-8 * k / n) for k in range(1, n + 1)]
    below = 2 ** (n.bit_length() - 1)
    return alibi_slopes(below) + alibi_slopes(2 * below)[0::2][: n - below]
ids, expected = d["ids"], d["logits"].double()

def rotate(x):  # (B, T, heads, D): pairs (2j, 2j+1) of the first R dims turn by t * theta^(-2j/R)
    t = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * theta ** (-torch.arange(0, R, 2, dtype=torch.float64) / R)
    cos, sin = t.cos()[None, :, None, :], t.sin()[None, :, None, :]
    even, odd = x[..., 0:R:2], x[..., 1:R:2]
    turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)
    return torch.cat([turned, x[..., R:]], -1) if R else x

def norm(x, name):  # LayerNorm, biasless where the checkpoint has no bias
    return F.layer_norm(x, (x.shape[-1],), s[name + ".weight"], s.get(name + ".bias"), 1e-5)

def dense(x, name):
    return F.linear(x, s[name + ".weight"], s.get(name + ".bias"))

x = s["embedding_layer.word_embeddings.weight"][ids]
B, T, C = x.shape
if "embedding_layer.position_embeddings.weight" in s:
    x = x + s["embedding_layer.position_embeddings.weight"][:T]
if "embedding_ln_f.weight" in s:
    x = norm(x, "embedding_ln_f")
x = x * emb_scale
D = C // H
causal = torch.ones(T, T, dtype=torch.bool).triu(1)
distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).double()  # i - j
bias = -torch.tensor(alibi_slopes(H)).double()[:, None, None] * distance if alibi else 0.0
if alibi:
    assert torch.allclose(s["embedding_layer.position_embed_helper.slopes"].view(-1), torch.tensor(alibi_slopes(H)).double())
for i in range(2):
    p = f"transformer_decoder.layers.{i}."
    h = norm(x, p + "norm1")
    q = rotate(dense(h, p + "self_attn.proj_q_dense_layer").view(B, T, H, D)).transpose(1, 2)
    k = rotate(dense(h, p + "self_attn.proj_k_dense_layer").view(B, T, G, D)).transpose(1, 2)
    v = dense(h, p + "self_attn.proj_v_dense_layer").view(B, T, G, D).transpose(1, 2)
    k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    scores = q @ k.transpose(-1, -2) / (D if by_d else D ** 0.5) / ((i + 1) if by_layer else 1)
    if att_cap:
        scores = att_cap * torch.tanh(scores / att_cap)
    mask = causal | (distance >= odd_window) if odd_window and i % 2 == 1 else causal
    att = (scores + bias).masked_fill(mask, float("-inf")).softmax(-1)
    a = dense((att @ v).transpose(1, 2).reshape(B, T, C), p + "self_attn.proj_output_dense_layer")
    if p + "norm1_post.weight" in s:
        a = norm(a, p + "norm1_post")
    if parallel:  # both branches read the layer input
        n = norm(x, p + "norm3") if p + "norm3.weight" in s else h  # untied norms, or the attention's
        x = x + a + dense(F.gelu(dense(n, p + "ffn.ffn.0.linear_layer")), p + "ffn.ffn.1.linear_layer")
    else:
        x = x + a
        f = dense(F.gelu(dense(norm(x, p + "norm3"), p + "ffn.ffn.0.linear_layer")), p + "ffn.ffn.1.linear_layer")
        x = x + (norm(f, p + "norm3_post") if p + "norm3_post.weight" in s else f)
x = norm(x, "transformer_decoder.norm")
logits = F.linear(x, s.get("lm_head.weight", s["embedding_layer.word_embeddings.weight"]), s.get("lm_head.bias")) * logits_scale
if final_cap:
    logits = final_cap * torch.tanh(logits / final_cap)
err = (logits - expected).abs().max().item()
print("max abs diff", err)
sys.exit(0 if err < 1e-5 else 1)
