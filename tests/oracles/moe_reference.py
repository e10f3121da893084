import sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1])
routing, K, null_bias, normalize = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
select, weigh, before, act = sys.argv[6], sys.argv[7], sys.argv[8] == "1", sys.argv[9]
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
ids, mask = d["ids"], d["mask"].double()
B, T = ids.shape
H = 4

def dense(x, name):
    return F.linear(x, s[name + ".weight"], s.get(name + ".bias"))

def norm(x, name):
    return F.layer_norm(x, (x.shape[-1],), s[name + ".weight"], s[name + ".bias"], 1e-5)

def ffn(x, p):
    up = dense(x, p + "ffn.0.linear_layer")
    h = F.silu(dense(x, p + "ffn.0.linear_layer_for_glu")) * up if act == "swiglu" else F.gelu(up)
    return dense(h, p + "ffn.1.linear_layer")

def nonlinearity(name, logits):
    if name == "sigmoid":
        return logits.sigmoid()
    if name == "sinkhorn":  # one round: normalize over experts, then over the sequence
        r = logits - logits.logsumexp(2, keepdim=True)
        return (r - r.logsumexp(1, keepdim=True)).exp()
    return logits.softmax(-1)

E = sum(1 for k in s if k.startswith("transformer_decoder.layers.0.ffn.experts.experts.") and k.endswith("ffn.1.linear_layer.weight"))
routed = s["transformer_decoder.layers.0.ffn.gate.weight"].shape[0]  # the rest are shared

def moe(x, p, stats):
    N = routed
    if routing == "learned":
        logits = dense(x, p + "ffn.gate")
        probs, weights = nonlinearity(select, logits), nonlinearity(weigh, logits)
    elif routing == "hash":
        probs = F.one_hot(ids % N, N).double()
        weights = probs
    else:  # uniform: position t goes to (t + k) % N
        idx = (torch.arange(T)[:, None] + torch.arange(K)[None, :]) % N
        probs = (F.one_hot(idx, N).double().sum(-2) / K).expand(B, T, N)
        weights = probs
    top, chosen = probs.topk(K)
    w = weights.gather(-1, chosen)
    if normalize:
        w = w / (w.sum(-1, keepdim=True) + null_bias)
    picked = F.one_hot(chosen, N).sum(-2).double()
    per_row = mask.sum(1, keepdim=True)
    stats.append(((picked * mask[..., None]).sum(1) / per_row, (probs * mask[..., None]).sum(1) / per_row))
    out = torch.zeros_like(x)
    for e in range(E):
        q = p + f"ffn.experts.experts.{e}."
        if e >= N:  # shared
            out = out + ffn(x, q)
            continue
        g = (w * (chosen == e)).sum(-1, keepdim=True)  # this expert's weight per token, 0 if not picked
        on = (chosen == e).any(-1, keepdim=True).double()
        out = out + on * (ffn(x * g, q) if before else g * ffn(x, q))
    return out

x = s["embedding_layer.word_embeddings.weight"][ids] + s["embedding_layer.position_embeddings.weight"][:T]
C = x.shape[-1]
D = C // H
causal = torch.ones(T, T, dtype=torch.bool).triu(1)
stats = []
for i in range(2):
    p = f"transformer_decoder.layers.{i}."
    h = norm(x, p + "norm1")
    q, k, v = (dense(h, p + f"self_attn.proj_{n}_dense_layer").view(B, T, H, D).transpose(1, 2) for n in "qkv")
    att = (q @ k.transpose(-1, -2) / D ** 0.5).masked_fill(causal, float("-inf")).softmax(-1)
    x = x + dense((att @ v).transpose(1, 2).reshape(B, T, C), p + "self_attn.proj_output_dense_layer")
    x = x + moe(norm(x, p + "norm3"), p, stats)
x = norm(x, "transformer_decoder.norm")
logits = F.linear(x, s["embedding_layer.word_embeddings.weight"])
tokens = sum(t for t, _ in stats) / len(stats)
probs = sum(pr for _, pr in stats) / len(stats)
N = tokens.shape[-1]
aux = N * N * (tokens * probs).mean()
err = (logits - d["logits"].double()).abs().max().item()
aux_err = abs(aux.item() - d["aux"].item()) if d["aux"].item() >= 0 else 0.0
print("max abs diff", err, "aux", aux.item(), "zoo", d["aux"].item())
sys.exit(0 if err < 1e-5 and aux_err < 1e-5 else 1)
