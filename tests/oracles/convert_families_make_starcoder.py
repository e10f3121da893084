C, L, H = 32, 2, 4
D = C // H
G = 1 if MULTI_QUERY else H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.wpe.weight": rnd(T, C, scale=0.1),
      "transformer.ln_f.weight": norm_w(C), "transformer.ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"transformer.h.{i}."
    for n in ["ln_1", "ln_2"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, o, i_ in [("attn.c_attn", C + 2 * G * D, C), ("attn.c_proj", C, C), ("mlp.c_fc", 4 * C, C), ("mlp.c_proj", C, 4 * C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(o, i_), rnd(o, scale=0.1)
x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][:T]
for i in range(L):
    h = f"transformer.h.{i}."
    qkv = lin(sd, ln(sd, x, h + "ln_1"), h + "attn.c_attn")
    if MULTI_QUERY:
        q, k, v = qkv.split([C, D, D], -1)
        q, k, v = heads(q, H), heads(k, 1), heads(v, 1)
    else:
        per_head = qkv.view(B, T, H, 3 * D).transpose(1, 2)
        q, k, v = per_head[..., :D], per_head[..., D:2 * D], per_head[..., 2 * D:]
    x = x + lin(sd, attend(q, k, v, 1 / math.sqrt(D)), h + "attn.c_proj")
    x = x + lin(sd, F.gelu(lin(sd, ln(sd, x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
hidden = ln(sd, x, "transformer.ln_f")
logits = hidden @ sd["transformer.wte.weight"].t()
finish(sd, {"model_type": "gpt_bigcode", "multi_query": MULTI_QUERY, "vocab_size": V, "n_embd": C, "n_layer": L,
            "n_head": H, "n_inner": None, "n_positions": T, "activation_function": "gelu_pytorch_tanh",
            "scale_attn_weights": True, "attention_softmax_in_fp32": True, "scale_attention_softmax_in_fp32": True,
            "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}, logits, ids)
