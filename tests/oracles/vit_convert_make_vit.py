import os, sys
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
B, Cin, S, P, C, L, H, FF, K = 2, 3, 16, 4, 32, 2, 4, 48, 5
N = (S // P) ** 2
def rnd(*shape): return torch.randn(*shape) * 0.2
sd = {"vit.embeddings.cls_token": rnd(1, 1, C), "vit.embeddings.position_embeddings": rnd(1, N + 1, C),
      "vit.embeddings.patch_embeddings.projection.weight": rnd(C, Cin, P, P),
      "vit.embeddings.patch_embeddings.projection.bias": rnd(C)}
def linear(name, n_in, n_out): sd[name + ".weight"], sd[name + ".bias"] = rnd(n_out, n_in), rnd(n_out)
def norm(name): sd[name + ".weight"], sd[name + ".bias"] = 1 + rnd(C), rnd(C)
for i in range(L):
    p = "vit.encoder.layer.%d." % i
    for n in ("query", "key", "value"): linear(p + "attention.attention." + n, C, C)
    linear(p + "attention.output.dense", C, C)
    linear(p + "intermediate.dense", C, FF)
    linear(p + "output.dense", FF, C)
    norm(p + "layernorm_before"); norm(p + "layernorm_after")
norm("vit.layernorm")
linear("classifier", C, K)
def lin(x, name): return x @ sd[name + ".weight"].t() + sd[name + ".bias"]
def ln(x, name): return F.layer_norm(x, (C,), sd[name + ".weight"], sd[name + ".bias"], 1e-12)
images = torch.randn(B, Cin, S, S)
x = F.conv2d(images, sd["vit.embeddings.patch_embeddings.projection.weight"],
             sd["vit.embeddings.patch_embeddings.projection.bias"], stride=P).flatten(2).transpose(1, 2)
x = torch.cat([sd["vit.embeddings.cls_token"].expand(B, 1, C), x], 1) + sd["vit.embeddings.position_embeddings"]
D = C // H
for i in range(L):
    p = "vit.encoder.layer.%d." % i
    h = ln(x, p + "layernorm_before")
    q, k, v = [lin(h, p + "attention.attention." + n).view(B, -1, H, D).transpose(1, 2) for n in ("query", "key", "value")]
    a = ((q @ k.transpose(-1, -2)) / D ** 0.5).softmax(-1) @ v
    x = x + lin(a.transpose(1, 2).reshape(B, -1, C), p + "attention.output.dense")
    x = x + lin(F.gelu(lin(ln(x, p + "layernorm_after"), p + "intermediate.dense")), p + "output.dense")
logits = lin(ln(x, "vit.layernorm")[:, 0], "classifier")
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
config = {"model_type": "vit", "architectures": ["ViTForImageClassification"], "hidden_size": C,
          "num_hidden_layers": L, "num_attention_heads": H, "intermediate_size": FF, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02,
          "layer_norm_eps": 1e-12, "image_size": S, "patch_size": P, "num_channels": Cin, "qkv_bias": True,
          "id2label": {str(i): "c%d" % i for i in range(K)}, "label2id": {"c%d" % i: i for i in range(K)}}
json.dump(config, open(out + "/hf/config.json", "w"))
for name, t in [("images", images), ("logits", logits)]:
    open(out + "/" + name + ".bin", "wb").write(t.detach().numpy().tobytes())
