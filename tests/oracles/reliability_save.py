import collections, sys, torch
d = sys.argv[1]
weights = {k[len("model."):] if k.startswith("model.") else k: v for k, v in torch.load(d + "/m/checkpoint_6.mdl")["model"].items()}
torch.save(weights, d + "/plain.pt")
torch.save({"model." + k: v for k, v in weights.items()}, d + "/prefixed.pt")
ordered = collections.OrderedDict(weights)
ordered._metadata = {"": {"version": 1}}  # as nn.Module.state_dict() returns it
torch.save(ordered, d + "/module_state_dict.pt")
torch.save({"state_dict": weights, "epoch": 3}, d + "/nested.pt")
torch.save({"decoder." + k: v for k, v in weights.items()}, d + "/renamed.pt")
