import json, os, sys, numpy as np, torch, transformers
d = sys.argv[1]
cfg = json.load(open(d + "/hf/config.json"))
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
if "auto_map" in cfg or cfg.get("model_type") not in CONFIG_MAPPING:
    print("model_type", cfg.get("model_type"), "is remote code, not in transformers", transformers.__version__); sys.exit(3)
if int(transformers.__version__.split(".")[0]) >= 5 and os.path.exists(d + "/transformers_5_differs.txt"):
    print(open(d + "/transformers_5_differs.txt").read() + ": not compared"); sys.exit(3)
if "vision_config" in cfg:
    print("the fixture's logits read images too: not compared"); sys.exit(3)
arch = (cfg.get("architectures") or [""])[0]
cls = getattr(transformers, arch, None) or transformers.AutoModelForCausalLM
model, info = cls.from_pretrained(d + "/hf", dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
missing = [k for k in info["missing_keys"] if "rotary" not in k and "masked_bias" not in k and not k.endswith(".attn.bias")]
if missing or info["unexpected_keys"]:
    print("transformers", transformers.__version__, cls.__name__, "missing", missing, "unexpected", info["unexpected_keys"])
ids = torch.from_numpy(np.fromfile(d + "/ids.bin", dtype=np.int64)).view(2, -1)
expected = torch.from_numpy(np.fromfile(d + "/logits.bin", dtype=np.float32))
with torch.no_grad():
    got = model.eval()(input_ids=ids, use_cache=False).logits.float().flatten()
if got.numel() != expected.numel():
    print(cls.__name__, "gave", got.numel(), "logits, the fixture", expected.numel()); sys.exit(1)
diff = (got - expected).abs().max().item()
print(f"transformers {transformers.__version__} {cls.__name__}: max |logit difference| {diff:.2e}")
sys.exit(0 if diff < 1e-4 and not missing else 1)
