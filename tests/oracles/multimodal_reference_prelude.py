import json, math, sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1]); o = json.loads(sys.argv[2])
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
def dense(x, p): return F.linear(x, s[p + ".weight"], s.get(p + ".bias"))
def qgelu(x): return x * torch.sigmoid(1.702 * x)
def mha(x, p, heads, bias=None, rope=False):
    Bx, T, C = x.shape
    q, k, v = (dense(x, p + "proj_%s_dense_layer" % n).view(Bx, T, heads, C // heads) for n in "qkv")
    if rope:
        R = o["rotary_dim"]
        inv = 1.0 / (10000 ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv
        cos, sin = ang.cos()[:, None], ang.sin()[:, None]
        def rot(t):
            pr = t[..., :R].reshape(Bx, T, heads, R // 2, 2)
            ev, od = pr[..., 0], pr[..., 1]
            return torch.cat([torch.stack([ev * cos - od * sin, ev * sin + od * cos], -1).flatten(-2), t[..., R:]], -1)
        q, k = rot(q), rot(k)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    sc = q @ k.transpose(-1, -2) / math.sqrt(C // heads)
    if bias is not None: sc = bias(sc)
    y = (sc.softmax(-1) @ v).transpose(1, 2).reshape(Bx, T, C)
    return dense(y, p + "proj_output_dense_layer")
def vit(img, e, Di, heads, conv, last, final_norm):
    P, n = 4, img.shape[0]
    w = s[e + "embedding_layer.linear_proj.weight"]
    if conv:
        x = F.conv2d(img, w, None, stride=(P, P)).flatten(2).transpose(1, 2)
    else:
        x = F.linear(img.reshape(n, 3, 2, P, 2, P).permute(0, 2, 4, 3, 5, 1).reshape(n, 4, P * P * 3), w)
    N = x.shape[1]
    pos = s[e + "embedding_layer.position_embeddings.weight"]
    x = torch.cat([s[e + "embedding_layer.cls_embedding"].expand(n, 1, Di) + pos[N], x + pos[:N]], 1)
    x = F.layer_norm(x, (Di,), s[e + "embedding_layer.post_embed_ln.weight"], s[e + "embedding_layer.post_embed_ln.bias"], 1e-5)
    for i in range(last + 1):
        p = e + "encoder.transformer_encoder.layers.%d." % i
        n1 = lambda t: F.layer_norm(t, (Di,), s[p + "norm1.weight"], s[p + "norm1.bias"], 1e-5)
        n2 = lambda t: F.layer_norm(t, (Di,), s[p + "norm2.weight"], s[p + "norm2.bias"], 1e-5)
        x = x + mha(n1(x), p + "self_attn.", heads)
        x = x + dense(qgelu(dense(n2(x), p + "ffn.ffn.0.linear_layer")), p + "ffn.ffn.1.linear_layer")
    if final_norm:
        nm = e + "encoder.transformer_encoder.norm."
        x = F.layer_norm(x, (Di,), s[nm + "weight"], s[nm + "bias"], 1e-5)
    return x
def rms(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
def llama_logits(h, kpm):
    T = h.shape[1]
    def mask(sc):
        sc = sc + (kpm.double() * torch.finfo(torch.float64).min)[:, None, None, :]
        return sc.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    for i in range(2):
        p = "text_model.transformer_decoder.layers.%d." % i
        h = h + mha(rms(h, s[p + "norm1.weight"]), p + "self_attn.", 3, mask, True)
        u = rms(h, s[p + "norm3.weight"])
        g = F.silu(dense(u, p + "ffn.ffn.0.linear_layer_for_glu")) * dense(u, p + "ffn.ffn.0.linear_layer")
        h = h + dense(g, p + "ffn.ffn.1.linear_layer")
    h = rms(h, s["text_model.transformer_decoder.norm.weight"])
    return F.linear(h, s["text_model.lm_head.weight"])
def check(logits):
    labels, lmask = d["labels"], d["loss_mask"].double()
    err = (logits - d["logits"].double()).abs().max().item()
    nll = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none").view_as(lmask)
    loss_err = abs((nll * lmask).sum().item() / lmask.sum().item() - d["loss"].item())
    print("logits error", err, "loss error", loss_err)
    sys.exit(0 if err < 1e-6 and loss_err < 1e-6 else 1)
