import json, math, os, struct, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
CASE = json.loads(open(out + "/case.json").read())
SCALING, BIAS, THETA, QK_NORM = CASE["rope_scaling"], CASE["bias"], CASE["theta"], CASE["model_type"] == "qwen3"
torch.manual_seed(1)
V, C, H, G, L, I, P, eps = 40, 32, 4, 2, 2, 48, 16, 1e-6
D = CASE["head_dim"] or C // H
E, K = CASE["experts"], 2  # Mixtral: E experts per layer, each token through the top K
sd = {"model.embed_tokens.weight": torch.randn(V, C) * 0.3, "model.norm.weight": 1 + 0.1 * torch.randn(C),
      "lm_head.weight": torch.randn(V, C) * 0.2}
for i in range(L):
    p = f"model.layers.{i}."
    sd.update({p + "self_attn.q_proj.weight": torch.randn(H * D, C) * 0.2, p + "self_attn.k_proj.weight": torch.randn(G * D, C) * 0.2,
               p + "self_attn.v_proj.weight": torch.randn(G * D, C) * 0.2, p + "self_attn.o_proj.weight": torch.randn(C, H * D) * 0.2,
               p + "input_layernorm.weight": 1 + 0.1 * torch.randn(C), p + "post_attention_layernorm.weight": 1 + 0.1 * torch.randn(C)})
    if E:
        sd[p + "block_sparse_moe.gate.weight"] = torch.randn(E, C)
        for e in range(E):
            q = p + f"block_sparse_moe.experts.{e}."
            sd.update({q + "w1.weight": torch.randn(I, C) * 0.2, q + "w3.weight": torch.randn(I, C) * 0.2,
                       q + "w2.weight": torch.randn(C, I) * 0.2})
    else:
        sd.update({p + "mlp.gate_proj.weight": torch.randn(I, C) * 0.2, p + "mlp.up_proj.weight": torch.randn(I, C) * 0.2,
                   p + "mlp.down_proj.weight": torch.randn(C, I) * 0.2})
    if QK_NORM:   # Qwen3: each head's queries and keys RMS-normalized, scaled per head dim
        sd.update({p + "self_attn.q_norm.weight": 1 + 0.3 * torch.randn(D), p + "self_attn.k_norm.weight": 1 + 0.3 * torch.randn(D)})
    biased = {"qkv": ["q", "k", "v"], "all": ["q", "k", "v", "o", "gate", "up", "down"]}.get(BIAS, [])
    for n in biased:
        w = sd[p + ("self_attn." if n in "qkvo" else "mlp.") + n + "_proj.weight"]
        sd[p + ("self_attn." if n in "qkvo" else "mlp.") + n + "_proj.bias"] = torch.randn(w.shape[0]) * 0.2
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
config = {"model_type": CASE["model_type"], "vocab_size": V, "hidden_size": C, "intermediate_size": I,
          "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": G, "max_position_embeddings": P,
          "rms_norm_eps": eps, "tie_word_embeddings": False, "rope_scaling": SCALING, "head_dim": D, "rope_theta": THETA}
if BIAS == "all":
    config.update({"attention_bias": True, "mlp_bias": True})
if CASE["model_type"] == "qwen2":  # Qwen2's window field, unused without use_sliding_window
    config.update({"sliding_window": 4096, "use_sliding_window": False, "max_window_layers": L})
if CASE["rope_parameters"]:
    config["rope_parameters"] = dict(SCALING or {"rope_type": "default"}, rope_theta=config.pop("rope_theta"))
    del config["rope_scaling"]
if E:
    config.update({"num_local_experts": E, "num_experts_per_tok": K, "router_aux_loss_coef": 0.02, "sliding_window": None})
json.dump(config, open(out + "/hf/config.json", "w"))
rms = lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
inv = 1.0 / (THETA ** (torch.arange(0, D, 2).float() / D))
if SCALING:  # Llama 3.1's bands: short wavelengths kept, long ones / factor, the ones between blended
    f, lo, hi, orig = (SCALING[k] for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
    wavelen = 2 * math.pi / inv
    blend = (orig / wavelen - lo) / (hi - lo)
    inv = torch.where(wavelen > orig / lo, inv / f,
                      torch.where(wavelen < orig / hi, inv, (1 - blend) * inv / f + blend * inv))
ang = torch.outer(torch.arange(P).float(), inv)
cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
rot = lambda x: torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)
ids = torch.randint(0, V, (2, P))
x = sd["model.embed_tokens.weight"][ids]
for i in range(L):
    p = f"model.layers.{i}."
    lin = lambda t, n: F.linear(t, sd[p + n + ".weight"], sd.get(p + n + ".bias"))
    a = rms(x, sd[p + "input_layernorm.weight"])
    q = lin(a, "self_attn.q_proj").view(2, P, H, D).transpose(1, 2)
    k = lin(a, "self_attn.k_proj").view(2, P, G, D).transpose(1, 2)
    v = lin(a, "self_attn.v_proj").view(2, P, G, D).transpose(1, 2)
    if QK_NORM:
        q, k = rms(q, sd[p + "self_attn.q_norm.weight"]), rms(k, sd[p + "self_attn.k_norm.weight"])
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    w = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(torch.tril(torch.ones(P, P)) == 0, float("-inf")).softmax(-1)
    x = x + lin((w @ v).transpose(1, 2).reshape(2, P, H * D), "self_attn.o_proj")
    m = rms(x, sd[p + "post_attention_layernorm.weight"])
    swiglu = lambda gate, up, down: (F.silu(m @ sd[gate].t()) * (m @ sd[up].t())) @ sd[down].t()
    if not E:
        x = x + lin(F.silu(lin(m, "mlp.gate_proj")) * lin(m, "mlp.up_proj"), "mlp.down_proj")
        continue
    # Mixtral's block: a float32 softmax router, the top K renormalized to sum to 1
    probs = (m @ sd[p + "block_sparse_moe.gate.weight"].t()).float().softmax(-1)
    top, chosen = probs.topk(K)
    top = top / top.sum(-1, keepdim=True)
    for e in range(E):
        q = p + f"block_sparse_moe.experts.{e}."
        x = x + (top * (chosen == e)).sum(-1, keepdim=True) * swiglu(q + "w1.weight", q + "w3.weight", q + "w2.weight")
hidden = rms(x, sd["model.norm.weight"])   # the last hidden state, written below
logits = hidden @ sd["lm_head.weight"].t()
open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
open(out + "/logits.bin", "wb").write(logits.numpy().astype("float32").tobytes())
open(out + "/hidden.bin", "wb").write(hidden.numpy().astype("float32").tobytes())
