import json, math, os, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
CASE = json.loads(open(out + "/case.json").read())
G2, THETA, TYPES = CASE["gemma2"], CASE["theta"], CASE["layer_types"]
torch.manual_seed(2)
V, C, H, G, L, I, P, D, eps = 40, 32, 4, 2, 4, 48, 16, 12, 1e-6
WINDOW, QUERY_SCALAR, ATTN_CAP, FINAL_CAP = 5, 16, 3.0, 4.0
# Norm weights in multiples of 1/64: weight + 1 is exact in float32, so the export is the original bit for bit.
norm = lambda: torch.round(torch.randn(C) * 8) / 64
sd = {"model.embed_tokens.weight": torch.randn(V, C) * 0.3, "model.norm.weight": norm()}
norms = ["input_layernorm", "post_attention_layernorm"]
if G2:
    norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
for i in range(L):
    p = f"model.layers.{i}."
    sd.update({p + "self_attn.q_proj.weight": torch.randn(H * D, C) * 0.2, p + "self_attn.k_proj.weight": torch.randn(G * D, C) * 0.2,
               p + "self_attn.v_proj.weight": torch.randn(G * D, C) * 0.2, p + "self_attn.o_proj.weight": torch.randn(C, H * D) * 0.2,
               p + "mlp.gate_proj.weight": torch.randn(I, C) * 0.2, p + "mlp.up_proj.weight": torch.randn(I, C) * 0.2,
               p + "mlp.down_proj.weight": torch.randn(C, I) * 0.2})
    sd.update({p + n + ".weight": norm() for n in norms})
if CASE["bf16_norm"]:  # 1 + w needs more bits than bfloat16 has: the sum must be taken in float32
    sd["model.norm.weight"] = ((torch.arange(C) % 5 + 1) / 512.0).bfloat16()
config = {"model_type": "gemma2" if G2 else "gemma", "vocab_size": V, "hidden_size": C, "intermediate_size": I,
          "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": G, "head_dim": D,
          "max_position_embeddings": P, "rms_norm_eps": eps, "rope_theta": THETA, "tie_word_embeddings": True}
if G2:
    config.update({"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": QUERY_SCALAR,
                   "sliding_window": WINDOW, "attn_logit_softcapping": ATTN_CAP, "final_logit_softcapping": FINAL_CAP})
    if TYPES:
        config["layer_types"] = TYPES
else:
    config.update({"hidden_act": "gelu", "hidden_activation": None})  # as gemma-7b: HF gates with GELU-tanh regardless
    # ... up to transformers 4.x: 5.17's GemmaMLP reads hidden_act (exact GELU here; seen on the H100 machine).
    open(out + "/transformers_5_differs.txt", "w").write("transformers 5 gates a null hidden_activation with hidden_act")
if CASE["rope_parameters"]:
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": config.pop("rope_theta")}
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
json.dump(config, open(out + "/hf/config.json", "w"))
sliding = [t == "sliding_attention" for t in TYPES] if TYPES else [i % 2 == 0 for i in range(L)]
rms = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + w.float())
inv = 1.0 / (THETA ** (torch.arange(0, D, 2).float() / D))
ang = torch.outer(torch.arange(P).float(), inv)
cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
rot = lambda x: torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)
cap = lambda x, c: torch.tanh(x / c) * c
pos = torch.arange(P)
ids = torch.randint(0, V, (2, P))
x = sd["model.embed_tokens.weight"][ids] * torch.tensor(C ** 0.5)
for i in range(L):
    W = lambda n: sd[f"model.layers.{i}." + n + ".weight"]
    a = rms(x, W("input_layernorm"))
    q = (a @ W("self_attn.q_proj").t()).view(2, P, H, D).transpose(1, 2)
    k = (a @ W("self_attn.k_proj").t()).view(2, P, G, D).transpose(1, 2)
    v = (a @ W("self_attn.v_proj").t()).view(2, P, G, D).transpose(1, 2)
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    s = q @ k.transpose(-1, -2) * (QUERY_SCALAR if G2 else D) ** -0.5
    if G2:
        s = cap(s, ATTN_CAP)
    allowed = pos[None, :] <= pos[:, None]
    if G2 and sliding[i]:
        allowed = allowed & (pos[:, None] - pos[None, :] < WINDOW)
    o = (s.masked_fill(~allowed, float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(2, P, H * D) @ W("self_attn.o_proj").t()
    x = x + (rms(o, W("post_attention_layernorm")) if G2 else o)
    m = rms(x, W("pre_feedforward_layernorm" if G2 else "post_attention_layernorm"))
    f = (F.gelu(m @ W("mlp.gate_proj").t(), approximate="tanh") * (m @ W("mlp.up_proj").t())) @ W("mlp.down_proj").t()
    x = x + (rms(f, W("post_feedforward_layernorm")) if G2 else f)
hidden = rms(x, sd["model.norm.weight"])   # the last hidden state, written below
logits = hidden @ sd["model.embed_tokens.weight"].t()
if G2:
    logits = cap(logits, FINAL_CAP)
open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
open(out + "/logits.bin", "wb").write(logits.numpy().astype("float32").tobytes())
open(out + "/hidden.bin", "wb").write(hidden.numpy().astype("float32").tobytes())
