img, loc, ids, kpm = d["image_data"].double(), d["image_data_loc"], d["text_input_ids"], d["key_padding_mask"]
B, I = img.shape[0], img.shape[1]
flat = img.reshape(B * I, *img.shape[2:])
feats = []
for k, tw in enumerate(o["towers"]):
    x = vit(flat, "image_model.image_model_list.%d.0." % k, tw["hidden"], 2, tw["conv"],
            2 if tw["layer"] is None else tw["layer"], tw["layer"] is None)
    if o["mode"] == "patch": x = x[:, 1:]
    if tw["proj"]: x = F.relu(dense(x, "image_model.image_model_list.%d.1.ffn.0.linear_layer" % k))
    feats.append(x)
f = torch.cat(feats, 1)
if o["global"]:
    f = dense(F.gelu(dense(f, "image_model.projection.ffn.0.linear_layer")), "image_model.projection.ffn.1.linear_layer")
f = f.reshape(B, -1, f.shape[-1])
t = s["text_model.embedding_layer.word_embeddings.weight"][ids]
T, C = t.shape[1], t.shape[2]
where = loc.reshape(B, -1, 1).long().expand(B, f.shape[1], C)
h = torch.cat([t, torch.zeros(B, 1, C, dtype=t.dtype)], 1).scatter(1, where, f)[:, :T]
check(llama_logits(h, kpm))
