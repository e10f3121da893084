# LoRA on a LLaMA in Hugging Face's layout, from the published math in
# float64: each adapted nn.Linear computes W x + b + (alpha / r) B A x (PEFT's
# LoraLayer). Reads dir/hf (config.json, model.safetensors), the PEFT adapter
# dir/adapter and the token ids dir/ids.bin (B x T int64); the loss is the
# mean cross-entropy of each next token. Writes the loss to dir/ref_loss.txt
# and d loss / d A, d loss / d B under the adapter's own keys to
# dir/ref_grads.safetensors.
import math, sys
import torch.nn.functional as F
out = sys.argv[1]
cfg = json.load(open(out + "/hf/config.json"))
acfg = json.load(open(out + "/adapter/adapter_config.json"))
sd = {k: v.double() for k, v in read_safetensors(out + "/hf/model.safetensors").items()}
ad = {k: v.double().requires_grad_() for k, v in read_safetensors(out + "/adapter/adapter_model.safetensors").items()}
C, H, G, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
D, eps, theta = cfg.get("head_dim") or C // H, cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
raw = open(out + "/ids.bin", "rb").read()
ids = torch.frombuffer(bytearray(raw), dtype=torch.int64).reshape(2, -1)
B, T = ids.shape

def lin(t, name):
    y = F.linear(t, sd[name + ".weight"], sd.get(name + ".bias"))
    a = ad.get("base_model.model." + name + ".lora_A.weight")
    if a is None:
        return y
    b = ad["base_model.model." + name + ".lora_B.weight"]
    r = a.shape[0]
    r_eff = acfg.get("rank_pattern", {}).get(name, acfg["r"])
    alpha = acfg.get("alpha_pattern", {}).get(name, acfg["lora_alpha"])
    assert r == r_eff
    return y + (t @ a.t() @ b.t()) * (alpha / r)

rms = lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
inv = 1.0 / (theta ** (torch.arange(0, D, 2).double() / D))
ang = torch.outer(torch.arange(T).double(), inv)
cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
rot = lambda x: torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)
x = sd["model.embed_tokens.weight"][ids]
for i in range(L):
    p = f"model.layers.{i}."
    a = rms(x, sd[p + "input_layernorm.weight"])
    q = lin(a, p + "self_attn.q_proj").view(B, T, H, D).transpose(1, 2)
    k = lin(a, p + "self_attn.k_proj").view(B, T, G, D).transpose(1, 2)
    v = lin(a, p + "self_attn.v_proj").view(B, T, G, D).transpose(1, 2)
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    w = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf")).softmax(-1)
    x = x + lin((w @ v).transpose(1, 2).reshape(B, T, H * D), p + "self_attn.o_proj")
    m = rms(x, sd[p + "post_attention_layernorm.weight"])
    x = x + lin(F.silu(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj"), p + "mlp.down_proj")
logits = rms(x, sd["model.norm.weight"]) @ sd["lm_head.weight"].t()
loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
loss.backward()
open(out + "/ref_loss.txt", "w").write(repr(loss.item()))
write_safetensors(out + "/ref_grads.safetensors", {k: t.grad.float() for k, t in ad.items()})
