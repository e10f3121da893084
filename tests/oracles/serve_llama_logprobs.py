# A float64 forward of the Llama in DIR/hf (config.json + model.safetensors, as
# convert_llama_make_llama.py writes it): each token-id list in
# DIR/prompts.json continued by 4 greedy tokens, then log p(token t | tokens
# before t) for t >= 1 and whether token t was the most likely one there.
# Written to DIR/logprobs.json with the continued ids.
# Appended to safetensors_prelude.py (read_safetensors).
import json, math, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
cfg = json.load(open(out + "/hf/config.json"))
sd = {k: v.double() for k, v in read_safetensors(out + "/hf/model.safetensors").items()}
C, H, G, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
D, eps, theta = cfg.get("head_dim") or C // H, cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
rms = lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
rot = lambda x: torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)
inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))

def logprobs(ids):
    T = len(ids)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    x = sd["model.embed_tokens.weight"][torch.tensor(ids)].unsqueeze(0)
    for i in range(L):
        p = f"model.layers.{i}."
        lin = lambda t, n: F.linear(t, sd[p + n + ".weight"])
        a = rms(x, sd[p + "input_layernorm.weight"])
        q = lin(a, "self_attn.q_proj").view(1, T, H, D).transpose(1, 2)
        k = lin(a, "self_attn.k_proj").view(1, T, G, D).transpose(1, 2)
        v = lin(a, "self_attn.v_proj").view(1, T, G, D).transpose(1, 2)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
        w = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf")).softmax(-1)
        x = x + lin((w @ v).transpose(1, 2).reshape(1, T, H * D), "self_attn.o_proj")
        m = rms(x, sd[p + "post_attention_layernorm.weight"])
        x = x + lin(F.silu(lin(m, "mlp.gate_proj")) * lin(m, "mlp.up_proj"), "mlp.down_proj")
    lp = (rms(x, sd["model.norm.weight"]) @ sd["lm_head.weight"].t()).log_softmax(-1)[0]
    return {"logprobs": [lp[t - 1, ids[t]].item() for t in range(1, T)],
            "greedy": [bool(lp[t - 1].argmax().item() == ids[t]) for t in range(1, T)],
            "next_argmax": int(lp[T - 1].argmax().item())}

def continued(ids):
    for _ in range(4):
        ids = ids + [logprobs(ids)["next_argmax"]]
    return dict(logprobs(ids), ids=ids)

json.dump([continued(ids) for ids in json.load(open(out + "/prompts.json"))], open(out + "/logprobs.json", "w"))
