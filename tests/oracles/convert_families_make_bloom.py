C, L, H = 48, 2, 6
D = C // H
sd = {"word_embeddings.weight": rnd(V, C, scale=0.1), "word_embeddings_layernorm.weight": norm_w(C),
      "word_embeddings_layernorm.bias": rnd(C, scale=0.1), "ln_f.weight": norm_w(C), "ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"h.{i}."
    for n in ["input_layernorm", "post_attention_layernorm"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, o, i_ in [("self_attention.query_key_value", 3 * C, C), ("self_attention.dense", C, C),
                     ("mlp.dense_h_to_4h", 4 * C, C), ("mlp.dense_4h_to_h", C, 4 * C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(o, i_), rnd(o, scale=0.1)
bloom_gelu = lambda x: x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))
x = ln(sd, sd["word_embeddings.weight"][ids], "word_embeddings_layernorm")
for i in range(L):
    h = f"h.{i}."
    qkv = lin(sd, ln(sd, x, h + "input_layernorm"), h + "self_attention.query_key_value").view(B, T, H, 3, D)
    q, k, v = (qkv[..., j, :].transpose(1, 2) for j in range(3))
    x = x + lin(sd, attend(q, k, v, 1 / math.sqrt(D), alibi_slopes(H)), h + "self_attention.dense")
    m = ln(sd, x, h + "post_attention_layernorm")
    x = x + lin(sd, bloom_gelu(lin(sd, m, h + "mlp.dense_h_to_4h")), h + "mlp.dense_4h_to_h")
hidden = ln(sd, x, "ln_f")
logits = hidden @ sd["word_embeddings.weight"].t()
finish(sd, {"model_type": "bloom", "vocab_size": V, "hidden_size": C, "n_layer": L, "n_head": H,
            "layer_norm_epsilon": 1e-5, "apply_residual_connection_post_layernorm": False, "hidden_dropout": 0.0,
            "attention_dropout": 0.0}, logits, ids)
