import os, sys, torch
src, out = sys.argv[1], sys.argv[2]
for name in ("resaved", "edited", "unsummed"):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    d = torch.load(src)
    if name == "edited":
        d["model"][next(iter(d["model"]))].add_(0.5)
    if name == "unsummed":
        del d["__checksum__"]
    torch.save(d, os.path.join(out, name, "checkpoint_2.mdl"))
