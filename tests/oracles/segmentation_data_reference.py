import sys, torch, torch.nn.functional as F
d = torch.load(sys.argv[1])
img = F.interpolate(d["decoded"].float()[None], size=(32, 64), mode="bicubic", align_corners=False, antialias=True)
img = img[0].clamp(0, 255).round() / 127.5 - 1
mask = F.interpolate(d["mask"].float()[None, None], size=(32, 64), mode="nearest")[0]
e1, e2 = (img - d["input"]).abs().max().item(), (mask - d["labels"]).abs().max().item()
print("image", e1, "mask", e2, "mask pixels", mask.sum().item())
sys.exit(0 if e1 < 1e-6 and e2 == 0 and mask.sum() > 0 else 1)
