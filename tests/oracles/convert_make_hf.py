import json, math, struct, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
V, C, L, H, P = 50, 16, 2, 4, 12
sd = {"transformer.wte.weight": torch.randn(V, C) * 0.1, "transformer.wpe.weight": torch.randn(P, C) * 0.1}
for i in range(L):
    h = f"transformer.h.{i}."
    for n, shape in [("ln_1.weight", (C,)), ("ln_1.bias", (C,)), ("ln_2.weight", (C,)), ("ln_2.bias", (C,)),
                     ("attn.c_attn.weight", (C, 3 * C)), ("attn.c_attn.bias", (3 * C,)),
                     ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", (C,)),
                     ("mlp.c_fc.weight", (C, 4 * C)), ("mlp.c_fc.bias", (4 * C,)),
                     ("mlp.c_proj.weight", (4 * C, C)), ("mlp.c_proj.bias", (C,))]:
        sd[h + n] = torch.randn(*shape) * 0.2 + (1.0 if n.endswith("ln_1.weight") or n.endswith("ln_2.weight") else 0.0)
    sd[h + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)  # HF's mask buffer
sd["transformer.ln_f.weight"] = torch.ones(C) + 0.1 * torch.randn(C)
sd["transformer.ln_f.bias"] = 0.1 * torch.randn(C)
import os
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
json.dump({"model_type": "gpt2", "vocab_size": V, "n_embd": C, "n_layer": L, "n_head": H, "n_positions": P,
           "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}, open(out + "/hf/config.json", "w"))
ids = torch.randint(0, V, (2, P))
x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][:P]
conv1d = lambda t, p: t @ sd[p + ".weight"] + sd[p + ".bias"]
for i in range(L):
    h = f"transformer.h.{i}."
    a = F.layer_norm(x, (C,), sd[h + "ln_1.weight"], sd[h + "ln_1.bias"], 1e-5)
    q, k, v = conv1d(a, h + "attn.c_attn").split(C, dim=-1)
    q, k, v = (t.view(2, P, H, C // H).transpose(1, 2) for t in (q, k, v))
    w = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)
    w = w.masked_fill(torch.tril(torch.ones(P, P)) == 0, float("-inf")).softmax(-1)
    x = x + conv1d((w @ v).transpose(1, 2).reshape(2, P, C), h + "attn.c_proj")
    m = F.layer_norm(x, (C,), sd[h + "ln_2.weight"], sd[h + "ln_2.bias"], 1e-5)
    x = x + conv1d(F.gelu(conv1d(m, h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
x = F.layer_norm(x, (C,), sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"], 1e-5)
logits = x @ sd["transformer.wte.weight"].t()
os.makedirs(out + "/hf_bin", exist_ok=True)
import collections, shutil
torch.save(collections.OrderedDict(sd), out + "/hf_bin/pytorch_model.bin")
shutil.copy(out + "/hf/config.json", out + "/hf_bin/config.json")
open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
open(out + "/logits.bin", "wb").write(logits.numpy().astype("float32").tobytes())
open(out + "/hidden.bin", "wb").write(x.numpy().astype("float32").tobytes())   # the last hidden state
