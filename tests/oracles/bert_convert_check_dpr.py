import sys, numpy as np, torch, transformers
d = sys.argv[1]
worst = 0.0
for sub, side, cls in (("q_encoder", "dprq", transformers.DPRQuestionEncoder), ("ctx_encoder", "dprc", transformers.DPRContextEncoder)):
    model, info = cls.from_pretrained(d + "/back/" + sub, output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"]:
        sys.exit("%s: missing %s, unused %s" % (sub, info["missing_keys"], info["unexpected_keys"]))
    read = lambda name, t: torch.from_numpy(np.fromfile("%s/%s_%s.bin" % (d, name, side), dtype=t)).view(2, -1)
    with torch.no_grad():
        got = model(input_ids=read("ids", np.int64), attention_mask=read("mask", np.int64), token_type_ids=read("types", np.int64)).pooler_output
    worst = max(worst, (got - read("mlm", np.float32)).abs().max().item())
print("transformers %s DPR encoders: max |pooled difference| %.2e" % (transformers.__version__, worst))
sys.exit(0 if worst < 1e-4 else 1)
