# The reference for `zoo checkpoint diff`: loads two checkpoints with
# torch.load (Debian's PyTorch 1.13) and prints a JSON object of
# "model.<key>" -> [max |a - b|, mean squared error] in float64 for every
# model tensor that differs.
import json, sys, torch
a = torch.load(sys.argv[1], map_location="cpu")["model"]
b = torch.load(sys.argv[2], map_location="cpu")["model"]
out = {}
for k in a:
    if not torch.equal(a[k], b[k]):
        d = a[k].double() - b[k].double()
        out["model." + k] = [d.abs().max().item(), d.pow(2).mean().item()]
print(json.dumps(out))
