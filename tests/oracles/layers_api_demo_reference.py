import math, sys, torch
torch.set_default_dtype(torch.float64)
c = torch.load(sys.argv[1])
s = {k[len("model."):] if k.startswith("model.") else k: v.double() for k, v in c["state"].items()}
ids, labels, mask = c["ids"].long(), c["labels"].long(), c["mask"].double()
B, T = ids.shape
V, d = s["encoder.word_embeddings.weight"].shape
H, P = 2, 10
n = d // 2
inv = torch.exp(torch.arange(n, dtype=torch.float64) * -(math.log(1.0e4) / (n - 1)))
t = torch.arange(P, dtype=torch.float64)[:, None] * inv[None, :]
table = torch.stack([torch.sin(t), torch.cos(t)], dim=2).reshape(P, 2 * n)
h = (s["encoder.word_embeddings.weight"][ids] + table[:T]) * math.sqrt(d)
causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
def ln(x, p):
    return torch.nn.functional.layer_norm(x, (d,), s[p + ".weight"], s[p + ".bias"], 1e-5)
for i in range(2):
    p = "transformer_encoder.layers.%d." % i
    def heads(name):
        return (h @ s[p + "self_attn." + name + ".weight"].T).view(B, T, H, d // H).transpose(1, 2)
    q, k, v = heads("proj_q_dense_layer"), heads("proj_k_dense_layer"), heads("proj_v_dense_layer")
    a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // H) + causal, dim=-1) @ v
    a = a.transpose(1, 2).reshape(B, T, d) @ s[p + "self_attn.proj_output_dense_layer.weight"].T
    h = ln(h + a, p + "norm1")
    f = torch.nn.functional.gelu(h @ s[p + "ffn.ffn.0.linear_layer.weight"].T) @ s[p + "ffn.ffn.1.linear_layer.weight"].T
    h = ln(h + f, p + "norm2")
logits = h @ s["decoder.weight"].T + s["decoder.bias"]
per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), reduction="none")
loss = (per_token * mask.reshape(-1)).sum() / B / V
dl = (logits - c["logits"]).abs().max().item()
dloss = abs(loss.item() - c["loss"].item())
print("max |logits - zoo| = %.3g, |loss - zoo| = %.3g" % (dl, dloss))
sys.exit(0 if dl < 1e-9 and dloss < 1e-6 * abs(loss.item()) else 1)  # zoo's cross-entropy sums in float32
