# Loads two checkpoints with torch.load (Debian's PyTorch 1.13) and prints the
# largest difference between their model tensors and both global steps.
import sys, torch
a = torch.load(sys.argv[1], map_location="cpu")
b = torch.load(sys.argv[2], map_location="cpu")
assert sorted(a["model"]) == sorted(b["model"]), "keys differ"
print("max diff", max((a["model"][k] - b["model"][k]).abs().max().item() for k in a["model"]))
print("steps", a["global_step"], b["global_step"])
