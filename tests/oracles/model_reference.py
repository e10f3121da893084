import math, sys, torch
import torch.nn.functional as F
d = torch.load(sys.argv[1])
s = {k[len("model."):]: v.double() for k, v in d["state"].items()}
ids, expected = d["ids"], d["logits"].double()
H, scaled, L = 4, sys.argv[2] == "scaled_dot_product", 2
x = s["embedding_layer.word_embeddings.weight"][ids] + s["embedding_layer.position_embeddings.weight"][: ids.shape[1]]
B, T, C = x.shape
for i in range(L):
    p = f"transformer_decoder.layers.{i}."
    h = F.layer_norm(x, (C,), s[p + "norm1.weight"], s[p + "norm1.bias"], 1e-5)
    q, k, v = (F.linear(h, s[p + f"self_attn.proj_{n}_dense_layer.weight"], s[p + f"self_attn.proj_{n}_dense_layer.bias"])
               .view(B, T, H, C // H).transpose(1, 2) for n in "qkv")
    att = q @ k.transpose(-1, -2) / (math.sqrt(C // H) if scaled else 1.0)
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
    y = (att @ v).transpose(1, 2).reshape(B, T, C)
    x = x + F.linear(y, s[p + "self_attn.proj_output_dense_layer.weight"], s[p + "self_attn.proj_output_dense_layer.bias"])
    h = F.layer_norm(x, (C,), s[p + "norm3.weight"], s[p + "norm3.bias"], 1e-5)
    h = F.gelu(F.linear(h, s[p + "ffn.ffn.0.linear_layer.weight"], s[p + "ffn.ffn.0.linear_layer.bias"]))
    x = x + F.linear(h, s[p + "ffn.ffn.1.linear_layer.weight"], s[p + "ffn.ffn.1.linear_layer.bias"])
x = F.layer_norm(x, (C,), s["transformer_decoder.norm.weight"], s["transformer_decoder.norm.bias"], 1e-5)
w = s.get("lm_head.weight", s["embedding_layer.word_embeddings.weight"])
logits = F.linear(x, w, s.get("lm_head.bias"))
err = (logits - expected).abs().max().item()
print("max abs diff", err)
sys.exit(0 if err < 1e-5 else 1)
