# The reference for `zoo checkpoint info`: opens a checkpoint with torch.load (Debian's PyTorch 1.13) and prints what
# info must report, as JSON: the model tensors' count and elements, the optimizer's per-parameter state names and
# the number of parameters with state, the step. Usage: checkpoint_info_reference.py CKPT
import json, sys, torch
d = torch.load(sys.argv[1], map_location="cpu")
model = d["model"] if "model" in d else d
out = {"tensors": len(model), "elements": sum(t.numel() for t in model.values()),
       "lora_layers": sum(1 for k in model if k.endswith(".lora_A") or k.endswith(".lora_A.weight"))}
if "optimizer" in d:
    state = d["optimizer"]["state"]
    out["parameters_with_state"] = len(state)
    out["state"] = sorted({name for s in state.values() for name in s})
if "global_step" in d:
    out["step"] = d["global_step"]
print(json.dumps(out))
