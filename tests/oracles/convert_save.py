import collections, json, struct, sys, torch
out = sys.argv[1]
torch.manual_seed(0)
base = torch.randn(6, 4)
sd = collections.OrderedDict()
sd["a.weight"] = base
sd["a.view"] = base[2:5]                 # shares a's storage, with an offset
sd["a.t"] = base.t()                     # not contiguous
sd["half"] = torch.randn(3).half()
sd["bf16"] = torch.randn(2, 2).bfloat16()
sd["steps"] = torch.arange(5)
sd["flag"] = torch.tensor([True, False])
sd._metadata = {"": {"version": 1}}      # as nn.Module.state_dict() sets
torch.save(sd, out + "/state.pt")
torch.save({"model": sd, "global_step": 7, "note": "x"}, out + "/ckpt.pt")
write_safetensors(out + "/expected.safetensors", dict(sd))
