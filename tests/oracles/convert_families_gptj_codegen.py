C, L, H, R, F4 = 32, 2, 8, 2, 64
D = C // H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "lm_head.weight": rnd(V, C, scale=0.1),
      "lm_head.bias": rnd(V, scale=0.1), "transformer.ln_f.weight": norm_w(C), "transformer.ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"transformer.h.{i}."
    sd[h + "ln_1.weight"], sd[h + "ln_1.bias"] = norm_w(C), rnd(C, scale=0.1)
    for p in (["qkv_proj"] if MODEL_TYPE == "codegen" else ["q_proj", "k_proj", "v_proj"]) + ["out_proj"]:
        sd[h + "attn." + p + ".weight"] = rnd(3 * C if p == "qkv_proj" else C, C)
    sd[h + "mlp.fc_in.weight"], sd[h + "mlp.fc_in.bias"] = rnd(F4, C), rnd(F4, scale=0.1)
    sd[h + "mlp.fc_out.weight"], sd[h + "mlp.fc_out.bias"] = rnd(C, F4), rnd(C, scale=0.1)
    sd[h + "attn.bias"] = torch.tril(torch.ones(T, T)).bool().view(1, 1, T, T)   # mask buffers
    sd[h + "attn.masked_bias"] = torch.tensor(-1e9)
    HF_ONLY += [h + "attn.bias", h + "attn.masked_bias"]
x = sd["transformer.wte.weight"][ids]
for i in range(L):
    h = f"transformer.h.{i}."
    a = ln(sd, x, h + "ln_1")
    if MODEL_TYPE == "codegen":   # per shard: its queries, values, keys; the shards' heads in order
        q, v, k = lin(sd, a, h + "attn.qkv_proj").reshape(B, T, 4, 3 * C // 4).split(C // 4, -1)
        q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))
    else:
        q, k, v = (heads(lin(sd, a, h + "attn." + p), H) for p in ["q_proj", "k_proj", "v_proj"])
    att = lin(sd, attend(rope(q, R, 10000.0, True), rope(k, R, 10000.0, True), v, 1 / math.sqrt(D)), h + "attn.out_proj")
    x = x + att + lin(sd, F.gelu(lin(sd, a, h + "mlp.fc_in"), approximate="tanh"), h + "mlp.fc_out")
hidden = ln(sd, x, "transformer.ln_f")
logits = lin(sd, hidden, "lm_head")
finish(sd, {"model_type": MODEL_TYPE, "vocab_size": V, "n_embd": C, "n_layer": L, "n_head": H, "n_inner": F4,
            "n_positions": T, "rotary_dim": R, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": False}, logits, ids)
