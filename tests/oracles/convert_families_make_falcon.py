C, L, H, F4, theta = 32, 2, 4, 64, 500.0
D, G = C // H, (2 if FALCON_NEW else 1)
sd = {"transformer.word_embeddings.weight": rnd(V, C, scale=0.1), "transformer.ln_f.weight": norm_w(C),
      "transformer.ln_f.bias": rnd(C, scale=0.1)}
if FALCON_NEW:
    sd["lm_head.weight"] = rnd(V, C, scale=0.1)
for i in range(L):
    h = f"transformer.h.{i}."
    for n in (["ln_attn", "ln_mlp"] if FALCON_NEW else ["input_layernorm"]):
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, o, i_ in [("self_attention.query_key_value", (H + 2 * G) * D, C), ("self_attention.dense", C, C),
                     ("mlp.dense_h_to_4h", F4, C), ("mlp.dense_4h_to_h", C, F4)]:
        sd[h + n + ".weight"] = rnd(o, i_)
        if FALCON_NEW:
            sd[h + n + ".bias"] = rnd(o, scale=0.1)
x = sd["transformer.word_embeddings.weight"][ids]
for i in range(L):
    h = f"transformer.h.{i}."
    a = ln(sd, x, h + ("ln_attn" if FALCON_NEW else "input_layernorm"))
    m_in = ln(sd, x, h + "ln_mlp") if FALCON_NEW else a
    qkv = lin(sd, a, h + "self_attention.query_key_value").view(B, T, G, H // G + 2, D)   # per group [queries; k; v]
    q = qkv[:, :, :, :-2].reshape(B, T, H, D).transpose(1, 2)
    k, v = qkv[:, :, :, -2].transpose(1, 2), qkv[:, :, :, -1].transpose(1, 2)
    att = attend(rope(q, D, theta, False), rope(k, D, theta, False), v, 1 / math.sqrt(D))
    x = x + lin(sd, att, h + "self_attention.dense") + lin(sd, F.gelu(lin(sd, m_in, h + "mlp.dense_h_to_4h")), h + "mlp.dense_4h_to_h")
x = hidden = ln(sd, x, "transformer.ln_f")
logits = lin(sd, x, "lm_head") if FALCON_NEW else x @ sd["transformer.word_embeddings.weight"].t()
finish(sd, {"model_type": "falcon", "vocab_size": V, "hidden_size": C, "num_hidden_layers": L, "num_attention_heads": H,
            "num_kv_heads": G, "new_decoder_architecture": FALCON_NEW, "multi_query": not FALCON_NEW,
            "parallel_attn": True, "bias": FALCON_NEW, "alibi": False, "layer_norm_epsilon": 1e-5, "rope_theta": theta,
            "ffn_hidden_size": F4, "max_position_embeddings": T, "tie_word_embeddings": not FALCON_NEW}, logits, ids)
