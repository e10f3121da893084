C, L, H, E = 48, 2, 6, 2
D = C // H
def mpt_slopes(n, bias_max=8):   # MPT's model card: the next power of two's slopes, odd ones first
    p = 2 ** math.ceil(math.log2(n))
    m = [1.0 / 2 ** (k * bias_max / p) for k in range(1, p + 1)]
    return (m[1::2] + m[0::2])[:n] if p != n else m
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.norm_f.weight": norm_w(C)}
for i in range(L):
    h = f"transformer.blocks.{i}."
    sd[h + "norm_1.weight"], sd[h + "norm_2.weight"] = norm_w(C), norm_w(C)
    for n, o, i_ in [("attn.Wqkv", 3 * C, C), ("attn.out_proj", C, C), ("ffn.up_proj", E * C, C), ("ffn.down_proj", C, E * C)]:
        sd[h + n + ".weight"] = rnd(o, i_)
x = sd["transformer.wte.weight"][ids]
for i in range(L):
    h = f"transformer.blocks.{i}."
    q, k, v = (heads(t, H) for t in lin(sd, ln(sd, x, h + "norm_1"), h + "attn.Wqkv").chunk(3, -1))
    x = x + lin(sd, attend(q, k, v, 1 / math.sqrt(D), mpt_slopes(H)), h + "attn.out_proj")
    x = x + lin(sd, F.gelu(lin(sd, ln(sd, x, h + "norm_2"), h + "ffn.up_proj")), h + "ffn.down_proj")
hidden = ln(sd, x, "transformer.norm_f")
logits = hidden @ sd["transformer.wte.weight"].t()
finish(sd, {"model_type": "mpt", "vocab_size": V, "d_model": C, "n_heads": H, "n_layers": L, "expansion_ratio": E,
            "max_seq_len": T, "no_bias": True, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "emb_pdrop": 0.0,
            "attn_config": {"alibi": True, "alibi_bias_max": 8, "attn_pdrop": 0.0, "clip_qkv": None, "qk_ln": False,
                            "softmax_scale": None}}, logits, ids)
