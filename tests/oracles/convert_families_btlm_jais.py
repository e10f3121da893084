C, L, H, F3 = 32, 2, 4, 48
D = C // H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.ln_f.weight": norm_w(C),
      "transformer.ln_f.bias": rnd(C, scale=0.1), "transformer.relative_pe.slopes": torch.tensor(alibi_slopes(H)).unsqueeze(-1)}
for i in range(L):
    h = f"transformer.h.{i}."
    for n in ["ln_1", "ln_2"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, i_, o in [("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C), ("mlp.c_fc", C, F3), ("mlp.c_fc2", C, F3),
                     ("mlp.c_proj", F3, C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(i_, o), rnd(o, scale=0.1)
x = sd["transformer.wte.weight"][ids] * 3.0
slopes = sd["transformer.relative_pe.slopes"].view(-1).tolist()
for i in range(L):
    h = f"transformer.h.{i}."
    q, k, v = (heads(t, H) for t in lin(sd, ln(sd, x, h + "ln_1"), h + "attn.c_attn", True).split(C, -1))
    x = x + lin(sd, attend(q, k, v, 1.0 / D, slopes), h + "attn.c_proj", True)
    m = ln(sd, x, h + "ln_2")
    x = x + lin(sd, lin(sd, m, h + "mlp.c_fc", True) * F.silu(lin(sd, m, h + "mlp.c_fc2", True)), h + "mlp.c_proj", True)
hidden = ln(sd, x, "transformer.ln_f")
logits = hidden @ sd["transformer.wte.weight"].t() * (1.5 * 0.5)
finish(sd, {"model_type": MODEL_TYPE, "vocab_size": V, "n_embd": C, "n_layer": L, "n_head": H, "n_inner": F3,
            "n_positions": T, "activation_function": "swiglu", "position_embedding_type": "alibi",
            "mup_width_scale": 0.5, "mup_embeddings_scale": 3.0, "mup_output_alpha": 1.5, "mup_scale_qk_dot_by_d": True,
            "scale_attn_weights": True, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attn_pdrop": 0.0, "alibi_scaling": None}, logits, ids)
