import math, os, sys
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
B, T, V = 2, 12, 50
HF_ONLY = []   # buffers and tied copies the round trip does not give back

def rnd(*shape, scale=0.2):
    return torch.randn(*shape) * scale

def norm_w(n):
    return 1.0 + 0.1 * torch.randn(n)

def lin(sd, x, name, conv1d=False):   # nn.Linear stores (out, in); GPT-2's Conv1D (in, out)
    w = sd[name + ".weight"]
    y = x @ w if conv1d else x @ w.t()
    return y + sd[name + ".bias"] if name + ".bias" in sd else y

def ln(sd, x, name, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), sd[name + ".weight"], sd.get(name + ".bias"), eps)

def heads(x, n):   # (B, T, n * D) -> (B, n, T, D)
    return x.reshape(x.shape[0], x.shape[1], n, -1).transpose(1, 2)

def alibi_slopes(n):   # Press et al.: 2^(-8k/n); n not a power of two: those of the power below, then every other of twice it
    pow2 = lambda m: [2.0 ** (-8.0 * (k + 1) / m) for k in range(m)]
    if math.log2(n).is_integer():
        return pow2(n)
    p = 2 ** int(math.floor(math.log2(n)))
    return pow2(p) + pow2(2 * p)[0::2][: n - p]

def attend(q, k, v, scale, slopes=None):
    # q (B, H, T, D); k, v (B, G, T, D), group g serving query heads g*H/G .. (g+1)*H/G - 1
    H, G = q.shape[1], k.shape[1]
    k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    s = q @ k.transpose(-1, -2) * scale
    if slopes is not None:   # ALiBi: slope x (key position - query position)
        s = s + torch.tensor(slopes)[:, None, None] * (torch.arange(T)[None, :] - torch.arange(T)[:, None])
    s = s.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(q.shape[0], T, -1)

def rope(x, R, base, interleaved):
    # Rotates the first R dims of each head by position x base^(-2j/R): as pairs (2j, 2j+1)
    # (GPT-J) or as halves (j, j + R/2) (GPT-NeoX, LLaMA, Falcon).
    f = torch.arange(T).float()[:, None] * (1.0 / base ** (torch.arange(0, R, 2).float() / R))
    cos, sin, r = f.cos(), f.sin(), x[..., :R]
    if interleaved:
        a, b = r[..., 0::2], r[..., 1::2]
        r = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
    else:
        a, b = r[..., : R // 2], r[..., R // 2:]
        r = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    return torch.cat([r, x[..., R:]], -1)

def finish(sd, config, logits, ids):
    os.makedirs(out + "/hf", exist_ok=True)
    write_safetensors(out + "/hf/model.safetensors", sd)
    json.dump(config, open(out + "/hf/config.json", "w"))
    open(out + "/hf_only.txt", "w").write("\n".join(HF_ONLY))
    open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
    open(out + "/logits.bin", "wb").write(logits.detach().numpy().astype("float32").tobytes())
    if "hidden" in globals():   # the base model's last hidden state (after the final norm), what AutoModel returns
        open(out + "/hidden.bin", "wb").write(hidden.detach().numpy().astype("float32").tobytes())

ids = torch.randint(0, V, (B, T))
