import json, math, sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1]); o = json.loads(sys.argv[2])
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
lat, noise, t, y = d["latent"].double(), d["noise"].double(), d["timestep"].long(), d["label"].long()
B, C, H, W = lat.shape
P, D, heads, L, eps, T = o["patch"], o["hidden"], o["heads"], o["layers"], o["eps"], o["steps"]
act = {"gelu": F.gelu, "relu": F.relu}[o["act"]]
scale = 1000 / T
betas = torch.linspace(scale * 0.0001, scale * 0.02, T, dtype=torch.float64)
ab = torch.cumprod(1.0 - betas, dim=0)
table_err = max((s["gaussian_diffusion.sqrt_alphas_cum_prod"] - ab.sqrt()).abs().max().item(),
                (s["gaussian_diffusion.sqrt_one_minus_alphas_cum_prod"] - (1 - ab).sqrt()).abs().max().item())
x_t = ab.sqrt()[t].view(-1, 1, 1, 1) * lat + (1 - ab).sqrt()[t].view(-1, 1, 1, 1) * noise
def dense(x, p): return F.linear(x, s[p + ".weight"], s.get(p + ".bias"))
e = "patch_embedding_layer."
nh, nw = H // P, W // P
if o["conv"]:
    h = F.conv2d(x_t, s[e + "linear_proj.weight"], s[e + "linear_proj.bias"], stride=(P, P)).flatten(2).transpose(1, 2)
else:
    h = dense(x_t.reshape(B, C, nh, P, nw, P).permute(0, 2, 4, 3, 5, 1).reshape(B, nh * nw, P * P * C), e + "linear_proj")
if o["pos"] == "fixed":
    pid_w = torch.arange(0, nh).expand(nw, -1).permute(1, 0)
    pid_h = torch.arange(0, nw).expand((nh, -1))
    fe = D // 2
    inv = 1.0 / (10000 ** (torch.arange(0, fe // 2, dtype=torch.float64) / (fe / 2.0)))
    ow = torch.einsum("m,d->md", pid_w.reshape(-1).double(), inv)
    oh = torch.einsum("m,d->md", pid_h.reshape(-1).double(), inv)
    pe = torch.cat([torch.cat([oh.sin(), oh.cos()], 1), torch.cat([ow.sin(), ow.cos()], 1)], 1)
    table_err = max(table_err, (s[e + "position_embeddings"] - pe).abs().max().item())
    h = h + pe
else:
    h = h + s[e + "position_embeddings.weight"]
half = o["freq"] // 2
freqs = torch.exp(-math.log(10000) * torch.arange(0, half, dtype=torch.float64) / half)
args = torch.arange(T, dtype=torch.float64)[:, None] * freqs[None]
tf = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
if o["freq"] % 2: tf = torch.cat([tf, torch.zeros_like(tf[:, :1])], dim=-1)
table_err = max(table_err, (s["timestep_embedding_layer.timestep_embedding"] - tf).abs().max().item())
tl = "timestep_embedding_layer.ffn.ffn."
c = dense(F.silu(dense(tf[t], tl + "0.linear_layer")), tl + "1.linear_layer") + s["label_embedding_layer.weight"][y]
def mod(p): return dense(F.silu(c), p)[:, None]
def ada(x, p): return (1 + mod(p + ".scale_linear.1")) * F.layer_norm(x, (D,), eps=eps) + mod(p + ".shift_linear.1")
hd = D // heads
for i in range(L):
    p = "transformer_decoder.layers.%d." % i
    def attn(x):
        q, k, v = (dense(x, p + "self_attn.proj_%s_dense_layer" % n).view(B, -1, heads, hd).transpose(1, 2) for n in "qkv")
        a = ((q @ k.transpose(-1, -2)) / hd ** 0.5).softmax(-1) @ v
        return dense(a.transpose(1, 2).reshape(B, -1, D), p + "self_attn.proj_output_dense_layer")
    def ffn(x): return dense(act(dense(x, p + "ffn.ffn.0.linear_layer")), p + "ffn.ffn.1.linear_layer")
    if o["norm_first"]:
        h = h + mod(p + "gate_msa.1") * attn(ada(h, p + "norm1"))
        h = h + mod(p + "gate_mlp.1") * ffn(ada(h, p + "norm3"))
    else:
        h = ada(h + mod(p + "gate_msa.1") * attn(h), p + "norm1")
        h = ada(h + mod(p + "gate_mlp.1") * ffn(h), p + "norm3")
h = ada(h, "final_norm")
if o["conv_head"]:
    out = F.conv_transpose2d(h.transpose(1, 2).reshape(B, D, nh, nw), s["noise_head.conv_transpose.weight"],
                             s["noise_head.conv_transpose.bias"], stride=(P, P))
else:
    out = torch.einsum("nhwpqc->nchpwq", dense(h, "noise_head.linear").reshape(B, nh, nw, P, P, C)).reshape(B, C, H, W)
err = (out - d["pred"].double()).abs().max().item()
loss_err = abs(F.mse_loss(out, noise).item() - d["loss"].item())
print("noise error", err, "loss error", loss_err, "table error", table_err)
sys.exit(0 if err < 1e-10 and loss_err < 1e-10 and table_err < 1e-10 else 1)
