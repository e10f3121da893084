import math, sys, torch
dim, base = 64, 10000.0
inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
# llama3: factor 8, low 1, high 4, original context 8192
f, lo, hi, orig = 8.0, 1.0, 4.0, 8192
wl = 2 * math.pi / inv
smooth = (orig / wl - lo) / (hi - lo)
llama3 = torch.where(wl > orig / lo, inv / f, torch.where(wl < orig / hi, inv, (1 - smooth) * inv / f + smooth * inv))
# yarn: factor 4, original context 4096, beta_fast 32, beta_slow 1
f, orig, fast, slow = 4.0, 4096, 32.0, 1.0
corr = lambda rot: dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
low, high = max(math.floor(corr(fast)), 0), min(math.ceil(corr(slow)), dim - 1)
ramp = ((torch.arange(dim // 2).float() - low) / (high - low)).clamp(0, 1)
extrapolate = 1 - ramp
yarn = inv / f * (1 - extrapolate) + inv * extrapolate
print(" ".join(f"{v:.9g}" for v in torch.cat([llama3, yarn]).tolist()), 0.1 * math.log(f) + 1.0)
