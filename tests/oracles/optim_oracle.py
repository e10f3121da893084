import math, sys, torch
torch.set_default_dtype(torch.float64)
LR, STEPS = float(sys.argv[2]), int(sys.argv[3])

class Reference:  # a step function posing as an optimizer
    def __init__(self, step): self.step = step

def cs_adam(ps, lr, b1, b2, eps, wd, decoupled, correct_bias):
    # modelzoo AdamBase: eps added to sqrt(v) before bias correction.
    st = [dict(m=torch.zeros_like(p), v=torch.zeros_like(p), t=0) for p in ps]
    def step():
        with torch.no_grad():
            for p, s in zip(ps, st):
                g = p.grad if decoupled else p.grad + wd * p
                s["t"] += 1
                s["m"] = b1 * s["m"] + (1 - b1) * g
                s["v"] = b2 * s["v"] + (1 - b2) * g * g
                u = s["m"] / (s["v"].sqrt() + eps)
                if correct_bias:
                    u = u * math.sqrt(1 - b2 ** s["t"]) / (1 - b1 ** s["t"])
                if decoupled:
                    u = u + wd * p
                p -= lr * u
    return Reference(step)

def lamb(ps, lr, b1, b2, eps, wd):
    st = [dict(m=torch.zeros_like(p), v=torch.zeros_like(p)) for p in ps]
    def step():
        with torch.no_grad():
            for p, s in zip(ps, st):
                s["m"] = b1 * s["m"] + (1 - b1) * p.grad
                s["v"] = b2 * s["v"] + (1 - b2) * p.grad * p.grad
                a = s["m"] / (s["v"].sqrt() + eps) + wd * p
                wn, an = min(p.norm().item(), 10.0), a.norm().item()
                p -= lr * (1.0 if wn == 0 or an == 0 else wn / an) * a
    return Reference(step)

def lion(ps, lr, b1, b2, wd):
    st = [torch.zeros_like(p) for p in ps]
    def step():
        with torch.no_grad():
            for p, m in zip(ps, st):
                p *= 1 - lr * wd
                p -= lr * torch.sign(b1 * m + (1 - b1) * p.grad)
                m.mul_(b2).add_((1 - b2) * p.grad)
    return Reference(step)

def adafactor(ps, lr, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None, wd=0.0,
              scale_parameter=False, relative_step=False, warmup_init=False):
    # Hugging Face transformers' Adafactor, written out.
    rms = lambda x: x.norm(2) / x.numel() ** 0.5
    st = [dict(t=0) for p in ps]
    def step():
        with torch.no_grad():
            for p, s in zip(ps, st):
                g = p.grad
                s["t"] += 1
                t = s["t"]
                step_lr = min(1e-6 * t if warmup_init else 1e-2, 1 / math.sqrt(t)) if relative_step else lr
                if scale_parameter:
                    step_lr *= max(eps[1], rms(p).item())
                beta2t = 1.0 - t ** decay_rate
                u = g * g + eps[0]
                if g.dim() >= 2:
                    s.setdefault("row", torch.zeros(g.shape[:-1]))
                    s.setdefault("col", torch.zeros(g.shape[:-2] + g.shape[-1:]))
                    s["row"] = beta2t * s["row"] + (1 - beta2t) * u.mean(-1)
                    s["col"] = beta2t * s["col"] + (1 - beta2t) * u.mean(-2)
                    r = (s["row"] / s["row"].mean(-1, keepdim=True)).rsqrt().unsqueeze(-1)
                    u = r * s["col"].unsqueeze(-2).rsqrt() * g
                else:
                    s.setdefault("v", torch.zeros_like(g))
                    s["v"] = beta2t * s["v"] + (1 - beta2t) * u
                    u = s["v"].rsqrt() * g
                u = u / max(1.0, (rms(u) / clip_threshold).item()) * step_lr
                if beta1 is not None:
                    s.setdefault("m", torch.zeros_like(g))
                    s["m"] = beta1 * s["m"] + (1 - beta1) * u
                    u = s["m"]
                if wd:
                    p -= wd * step_lr * p
                p -= u
    return Reference(step)

def nadam(ps, **kw):
    # torch < 2.0 multiplies mu_product_next by mu_t once too often (fixed in
    # 2.0); zoo follows the paper and torch >= 2.0, written out here for 1.13.
    if int(torch.__version__.split(".")[0]) >= 2:
        return torch.optim.NAdam(ps, **kw)
    lr, (b1, b2), psi, wd, eps = kw["lr"], kw["betas"], kw["momentum_decay"], kw["weight_decay"], 1e-8
    st = [dict(m=torch.zeros_like(p), v=torch.zeros_like(p), prod=1.0, t=0) for p in ps]
    def step():
        with torch.no_grad():
            for p, s in zip(ps, st):
                g = p.grad + wd * p
                s["t"] += 1
                t = s["t"]
                mu, mu_next = b1 * (1 - 0.5 * 0.96 ** (t * psi)), b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
                s["prod"] *= mu
                s["m"] = b1 * s["m"] + (1 - b1) * g
                s["v"] = b2 * s["v"] + (1 - b2) * g * g
                denom = (s["v"] / (1 - b2 ** t)).sqrt() + eps
                p -= lr * (1 - mu) / (1 - s["prod"]) * g / denom
                p -= lr * mu_next / (1 - s["prod"] * mu_next) * s["m"] / denom
    return Reference(step)

out = open(sys.argv[1] + ".out", "wb")
for line in open(sys.argv[1]):
    ps = [torch.sin(torch.arange(12.) * 0.7).reshape(4, 3).requires_grad_(),
          torch.sin(torch.arange(5.) * 0.7 + 1).requires_grad_()]
    opt = eval(line)
    for t in range(STEPS):
        for p in ps:
            d = p.detach()
            p.grad = torch.cos(d * (1 + t % 5)) * 0.3 + 0.1 * d
        opt.step()
    out.write(torch.cat([p.detach().flatten() for p in ps]).numpy().tobytes())
