img, ids, kpm = d["image_data"].double(), d["text_input_ids"], d["key_padding_mask"]
feats = vit(img, "image_model.", o["image_hidden"], 2, o["conv"], o["layer"], False)
if o["mode"] == "patch": feats = feats[:, 1:]
if "projector_image_model.ffn.0.linear_layer.weight" in s:
    feats = dense(F.gelu(dense(feats, "projector_image_model.ffn.0.linear_layer")), "projector_image_model.ffn.1.linear_layer")
t = s["text_model.embedding_layer.word_embeddings.weight"][ids]
if "projector_text_model.ffn.0.linear_layer.weight" in s:
    t = F.relu(dense(t, "projector_text_model.ffn.0.linear_layer"))
st, n = o["start"], feats.shape[1]
check(llama_logits(torch.cat([t[:, :st], feats, t[:, st + n:]], 1), kpm))
