import math, os, sys
import torch.nn.functional as F
out = sys.argv[1]; os.makedirs(out + "/hf", exist_ok=True)
torch.manual_seed(0)
Cv, Hv, Lv, Fv, P, S = 8, 2, 3, 16, 4, 8
C, H, L, Fi, V, T, IMG = 12, 3, 2, 20, 37, 10, 36
sd = {}
def r(*shape): return torch.randn(*shape) * 0.2
def lin(name, i, o, bias=True):
    sd[name + ".weight"] = r(o, i)
    if bias: sd[name + ".bias"] = r(o)
def ln(name, d): sd[name + ".weight"] = 1 + r(d); sd[name + ".bias"] = r(d)
v = "vision_tower.vision_model."
sd[v + "embeddings.class_embedding"] = r(Cv)
sd[v + "embeddings.patch_embedding.weight"] = r(Cv, 3, P, P)
sd[v + "embeddings.position_embedding.weight"] = r((S // P) ** 2 + 1, Cv)
ln(v + "pre_layrnorm", Cv); ln(v + "post_layernorm", Cv)
for i in range(Lv):
    p = v + "encoder.layers.%d." % i
    for n in "qkv": lin(p + "self_attn.%s_proj" % n, Cv, Cv)
    lin(p + "self_attn.out_proj", Cv, Cv); ln(p + "layer_norm1", Cv); ln(p + "layer_norm2", Cv)
    lin(p + "mlp.fc1", Cv, Fv); lin(p + "mlp.fc2", Fv, Cv)
lin("multi_modal_projector.linear_1", Cv, C); lin("multi_modal_projector.linear_2", C, C)
t = "language_model.model."
sd[t + "embed_tokens.weight"] = r(V, C); sd[t + "norm.weight"] = 1 + r(C); sd["language_model.lm_head.weight"] = r(V, C)
for i in range(L):
    p = t + "layers.%d." % i
    for n in "qkvo": lin(p + "self_attn.%s_proj" % n, C, C, False)
    lin(p + "mlp.gate_proj", C, Fi, False); lin(p + "mlp.up_proj", C, Fi, False); lin(p + "mlp.down_proj", Fi, C, False)
    sd[p + "input_layernorm.weight"] = 1 + r(C); sd[p + "post_attention_layernorm.weight"] = 1 + r(C)
def W(n): return sd[n + ".weight"]
def dense(x, n): return F.linear(x, W(n), sd.get(n + ".bias"))
def heads(x, h): return x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 2)
images = torch.randn(2, 3, S, S)
# CLIP, as HF's CLIPVisionModel with output_hidden_states
x = F.conv2d(images, sd[v + "embeddings.patch_embedding.weight"], stride=P).flatten(2).transpose(1, 2)
x = torch.cat([sd[v + "embeddings.class_embedding"].expand(2, 1, Cv), x], 1) + sd[v + "embeddings.position_embedding.weight"]
x = F.layer_norm(x, (Cv,), W(v + "pre_layrnorm"), sd[v + "pre_layrnorm.bias"], 1e-5)
states = [x]
for i in range(Lv):
    p = v + "encoder.layers.%d." % i
    y = F.layer_norm(x, (Cv,), W(p + "layer_norm1"), sd[p + "layer_norm1.bias"], 1e-5)
    q, k, vv = (heads(dense(y, p + "self_attn.%s_proj" % n), Hv) for n in "qkv")
    a = ((q @ k.transpose(-1, -2)) * (Cv // Hv) ** -0.5).softmax(-1) @ vv
    x = x + dense(a.transpose(1, 2).reshape(2, -1, Cv), p + "self_attn.out_proj")
    y = F.layer_norm(x, (Cv,), W(p + "layer_norm2"), sd[p + "layer_norm2.bias"], 1e-5)
    y = dense(y, p + "mlp.fc1"); y = y * torch.sigmoid(1.702 * y)
    x = x + dense(y, p + "mlp.fc2"); states.append(x)
feats = dense(F.gelu(dense(states[-2][:, 1:], "multi_modal_projector.linear_1")), "multi_modal_projector.linear_2")
# LLaMA with the features at the <image> tokens
ids = torch.randint(0, IMG, (2, T)); ids[:, 1:5] = IMG
h = sd[t + "embed_tokens.weight"][ids]
h = h.masked_scatter((ids == IMG).unsqueeze(-1).expand_as(h), feats)
def rms(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
d = C // H
inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
ang = torch.arange(T).float()[:, None] * inv
cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
def rot(x): return x * cos + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * sin
mask = torch.ones(T, T, dtype=torch.bool).triu(1)
for i in range(L):
    p = t + "layers.%d." % i
    y = rms(h, W(p + "input_layernorm"))
    q, k, vv = (heads(dense(y, p + "self_attn.%s_proj" % n), H) for n in "qkv")
    sc = (rot(q) @ rot(k).transpose(-1, -2)) / math.sqrt(d)
    a = sc.masked_fill(mask, float("-inf")).softmax(-1) @ vv
    h = h + dense(a.transpose(1, 2).reshape(2, T, C), p + "self_attn.o_proj")
    y = rms(h, W(p + "post_attention_layernorm"))
    h = h + dense(F.silu(dense(y, p + "mlp.gate_proj")) * dense(y, p + "mlp.up_proj"), p + "mlp.down_proj")
logits = F.linear(rms(h, W(t + "norm")), sd["language_model.lm_head.weight"])
write_safetensors(out + "/hf/model.safetensors", sd)
# config.json as HF's LLaVA-1.5 files have it: fields at their defaults left out
json.dump({"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "image_token_index": IMG,
           "vision_config": {"model_type": "clip_vision_model", "hidden_size": Cv, "intermediate_size": Fv,
                             "num_hidden_layers": Lv, "num_attention_heads": Hv, "image_size": S, "patch_size": P},
           "text_config": {"model_type": "llama", "vocab_size": V, "hidden_size": C, "intermediate_size": Fi,
                           "num_hidden_layers": L, "num_attention_heads": H, "max_position_embeddings": 16,
                           "rms_norm_eps": 1e-5}}, open(out + "/hf/config.json", "w"))
for name, x in [("images", images), ("ids", ids), ("logits", logits)]:
    open(out + "/" + name + ".bin", "wb").write(x.detach().numpy().tobytes())
