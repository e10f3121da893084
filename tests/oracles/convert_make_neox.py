import json, math, os, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
V, C, L, H, P, F4 = 50, 32, 2, 4, 12, 64
D, R, base = C // H, 4, 1000.0   # rotary_pct 0.5 of the 8-dim head
sd = {"gpt_neox.embed_in.weight": torch.randn(V, C) * 0.1, "embed_out.weight": torch.randn(V, C) * 0.1}
for i in range(L):
    h = f"gpt_neox.layers.{i}."
    for n, shape in [("input_layernorm", (C,)), ("post_attention_layernorm", (C,))]:
        sd[h + n + ".weight"] = 1.0 + 0.1 * torch.randn(C)
        sd[h + n + ".bias"] = 0.1 * torch.randn(C)
    for n, o, inp in [("attention.query_key_value", 3 * C, C), ("attention.dense", C, C),
                      ("mlp.dense_h_to_4h", F4, C), ("mlp.dense_4h_to_h", C, F4)]:
        sd[h + n + ".weight"] = torch.randn(o, inp) * 0.2
        sd[h + n + ".bias"] = torch.randn(o) * 0.1
    sd[h + "attention.rotary_emb.inv_freq"] = 1.0 / base ** (torch.arange(0, R, 2).float() / R)  # a buffer
sd["gpt_neox.final_layer_norm.weight"] = 1.0 + 0.1 * torch.randn(C)
sd["gpt_neox.final_layer_norm.bias"] = 0.1 * torch.randn(C)
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
json.dump({"model_type": "gpt_neox", "vocab_size": V, "hidden_size": C, "num_hidden_layers": L,
           "num_attention_heads": H, "intermediate_size": F4, "max_position_embeddings": P, "rotary_pct": 0.5,
           "rotary_emb_base": base, "use_parallel_residual": True, "layer_norm_eps": 1e-5, "hidden_act": "gelu",
           "tie_word_embeddings": False}, open(out + "/hf/config.json", "w"))

def rotate_half(x):
    return torch.cat([-x[..., R // 2:], x[..., : R // 2]], -1)

ids = torch.randint(0, V, (2, P))
x = sd["gpt_neox.embed_in.weight"][ids]
t = torch.arange(P).float()[:, None] * (1.0 / base ** (torch.arange(0, R, 2).float() / R))
cos, sin = torch.cat([t, t], -1).cos(), torch.cat([t, t], -1).sin()   # (P, R)
lin = lambda v, n: F.linear(v, sd[n + ".weight"], sd[n + ".bias"])
ln = lambda v, n: F.layer_norm(v, (C,), sd[n + ".weight"], sd[n + ".bias"], 1e-5)
for i in range(L):
    h = f"gpt_neox.layers.{i}."
    qkv = lin(ln(x, h + "input_layernorm"), h + "attention.query_key_value").view(2, P, H, 3, D)
    q, k, v = (qkv[..., j, :].transpose(1, 2) for j in range(3))   # (2, H, P, D)
    q = torch.cat([q[..., :R] * cos + rotate_half(q[..., :R]) * sin, q[..., R:]], -1)
    k = torch.cat([k[..., :R] * cos + rotate_half(k[..., :R]) * sin, k[..., R:]], -1)
    w = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(torch.ones(P, P).triu(1).bool(), float("-inf")).softmax(-1)
    a = lin((w @ v).transpose(1, 2).reshape(2, P, C), h + "attention.dense")
    m = lin(F.gelu(lin(ln(x, h + "post_attention_layernorm"), h + "mlp.dense_h_to_4h")), h + "mlp.dense_4h_to_h")
    x = x + a + m
hidden = ln(x, "gpt_neox.final_layer_norm")   # the last hidden state, written below
logits = hidden @ sd["embed_out.weight"].t()
open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
open(out + "/logits.bin", "wb").write(logits.numpy().astype("float32").tobytes())
open(out + "/hidden.bin", "wb").write(hidden.numpy().astype("float32").tobytes())
