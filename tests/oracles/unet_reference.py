import json, sys, torch, torch.nn as nn, torch.nn.functional as F
d = torch.load(sys.argv[1]); o = json.loads(sys.argv[2])
conv3d = o["use_conv3d"]
Conv, ConvT = (nn.Conv3d, nn.ConvTranspose3d) if conv3d else (nn.Conv2d, nn.ConvTranspose2d)
class GroupInstance(nn.Module):
    def __init__(s, C):
        super().__init__(); s.instancenorm = nn.GroupNorm(C, C)
    def forward(s, x): return s.instancenorm(x)
def norm(C):
    k = o["norm_layer"]
    return {"batchnorm2d": lambda: nn.BatchNorm2d(C), "batchnorm3d": lambda: nn.BatchNorm3d(C),
            "group": lambda: nn.GroupNorm(o.get("num_groups", 1), C), "group_instance": lambda: GroupInstance(C)}[k]()
def cna(cin, cout, k, stride):
    layers = [Conv(cin, cout, k, stride, ((stride - 1) + (k - 1)) // 2, bias=o["bias"])]
    if o["norm_layer"]: layers.append(norm(cout))
    layers.append(nn.ReLU())
    return nn.Sequential(*layers)
class Block(nn.Module):
    def __init__(s, cin, cout, downscale):
        super().__init__()
        n = len(o["convs_per_block"]); at = 0 if o["downscale_first_conv"] else n - 1
        s.layers = nn.Sequential(*[cna(cin if i == 0 else cout, cout, 1 if c == "1x1_conv" else 3,
                                       2 if downscale and o["downscale_method"] == "strided_conv" and i == at else 1)
                                   for i, c in enumerate(o["convs_per_block"])])
    def forward(s, x):
        n, skip = len(s.layers), None
        for i, layer in enumerate(s.layers):
            x = layer(x)
            if o["residual_blocks"]:
                if i == 0: first = x
                elif i == n - 1: x = x + first
            if o["downscale_method"] == "strided_conv" and i == n - 2 and o["skip_connect"]: skip = x
        return x, (skip if o["downscale_method"] == "strided_conv" else x)
enc, dec = o["encoder_filters"], o["decoder_filters"]
down = o["downscale_encoder_blocks"]
m = nn.Module()
m.encoder = nn.Module()
m.encoder.unet_blocks = nn.ModuleList([Block(o["channels"] if i == 0 else enc[i - 1], enc[i], down[i]) for i in range(len(enc) - 1)])
m.bottleneck = Block(enc[-2], enc[-1], o["downscale_bottleneck"])
m.decoder = nn.Module()
m.decoder.transpose_layers = nn.ModuleList([ConvT(dec[i - 1] if i else enc[-1], dec[i], 2, 2, bias=o["bias"]) for i in range(len(dec))])
m.decoder.unet_blocks = nn.ModuleList([Block(dec[i] + enc[-i - 2], dec[i], False) for i in range(len(dec))])
m.final_conv = nn.Sequential(Conv(dec[-1], o["outputs"], 1, 1, 0, bias=True))
state = {k[len("model."):]: v for k, v in d["state"].items()}
m.double().train()  # before loading, so that the weights keep every digit
m.load_state_dict(state, strict=True)
x = d["input"].double()
skips = []
for b in m.encoder.unet_blocks:
    x, skip = b(x); skips.append(skip)
    if o["downscale_method"] == "max_pool": x = (F.max_pool3d if conv3d else F.max_pool2d)(x, 2, 2)
x = m.bottleneck(x)[0]
for i in range(len(dec)):
    x = m.decoder.transpose_layers[i](x)
    x = torch.cat([x, skips[-1 - i]], 1)
    x = m.decoder.unet_blocks[i](x)[0]
logits = m.final_conv(x)
labels, loss_type, C = d["labels"], o["loss"], o["num_classes"]
if loss_type == "bce":  # modelzoo's own stable form, written out
    neg = -logits; mx = neg.clamp(min=0)
    loss = ((1 - labels.double()) * logits + mx + ((-mx).exp() + (neg - mx).exp()).log()).mean()
elif loss_type == "ssce":
    loss = F.cross_entropy(logits, labels.long())
else:  # ssce_dice, background left out
    ce = F.cross_entropy(logits, labels.long())
    p = logits.softmax(1)
    t = F.one_hot(labels.long(), C).double().movedim(-1, 1)
    keep = torch.ones(C, dtype=torch.double); keep[0] = 0
    shape = [1, C] + [1] * (p.dim() - 2)
    p, t = p * keep.view(shape), t * keep.view(shape)
    dims = list(range(2, p.dim()))
    dice = (2 * (p * t).sum(dims)) / (t.sum(dims) + p.sum(dims) + 1e-6)
    loss = 0.5 * ce + 0.5 * (1 - C / (C - 1) * dice.mean())
err = (logits - d["logits"]).abs().max().item()
loss_err = abs(loss.item() - d["loss"].item())
stats = {k: v for k, v in m.state_dict().items() if "running" in k}
stats_err = max([(v - d["after"]["model." + k].double()).abs().max().item() for k, v in stats.items()] + [0.0])
print("logits", err, "loss", loss_err, "running stats", stats_err, "of", len(stats))
sys.exit(0 if err < 1e-9 and loss_err < 1e-9 and stats_err < 1e-9 else 1)
