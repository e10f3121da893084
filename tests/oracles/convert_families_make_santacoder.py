C, L, H = 32, 2, 4
D = C // H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.wpe.weight": rnd(T, C, scale=0.1),
      "transformer.ln_f.weight": norm_w(C), "transformer.ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"transformer.h.{i}."
    for n in ["ln_1", "ln_2"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, i_, o in [("attn.q_attn", C, C), ("attn.kv_attn", C, 2 * D), ("attn.c_proj", C, C), ("mlp.c_fc", C, 4 * C),
                     ("mlp.c_proj", 4 * C, C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(i_, o), rnd(o, scale=0.1)
    sd[h + "attn.masked_bias"] = torch.tensor(-1e4)
    HF_ONLY.append(h + "attn.masked_bias")
x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][:T]
for i in range(L):
    h = f"transformer.h.{i}."
    a = ln(sd, x, h + "ln_1")
    k, v = (heads(t, 1) for t in lin(sd, a, h + "attn.kv_attn", True).split(D, -1))
    att = attend(heads(lin(sd, a, h + "attn.q_attn", True), H), k, v, 1 / math.sqrt(D) / (i + 1))
    x = x + lin(sd, att, h + "attn.c_proj", True)
    x = x + lin(sd, F.gelu(lin(sd, ln(sd, x, h + "ln_2"), h + "mlp.c_fc", True), approximate="tanh"), h + "mlp.c_proj", True)
hidden = ln(sd, x, "transformer.ln_f")
logits = hidden @ sd["transformer.wte.weight"].t()
finish(sd, {"model_type": "gpt2", "attention_head_type": "multiquery", "vocab_size": V, "n_embd": C, "n_layer": L,
            "auto_map": {"AutoConfig": "configuration_gpt2_mq.GPT2CustomConfig",
                         "AutoModelForCausalLM": "modeling_gpt2_mq.GPT2LMHeadCustomModel"},
            "n_head": H, "n_inner": None, "n_positions": T, "activation_function": "gelu_fast",
            "scale_attn_by_inverse_layer_idx": True, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attn_pdrop": 0.0}, logits, ids)
