# A float64 forward of a Llama in Hugging Face's layout (config.json +
# model.safetensors): llama_float64(hf_dir) gives a function from a token-id
# list to the (T, V) log-probabilities of the next token at each position.
# Appended to safetensors_prelude.py (read_safetensors); the oracles that use
# it follow it.
import json, math, torch
import torch.nn.functional as F

def llama_float64(hf_dir):
    cfg = json.load(open(hf_dir + "/config.json"))
    sd = {k: v.double() for k, v in read_safetensors(hf_dir + "/model.safetensors").items()}
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
        return (rms(x, sd["model.norm.weight"]) @ sd["lm_head.weight"].t()).log_softmax(-1)[0]

    return logprobs
