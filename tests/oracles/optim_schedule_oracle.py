import sys, torch
from torch.optim.lr_scheduler import *
for line in open(sys.argv[1]):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    sched = eval(line)
    lrs = []
    for t in range(60):
        lrs.append(opt.param_groups[0]["lr"])  # the LR optimizer step t + 1 uses
        opt.step()
        sched.step()
    print(" ".join(repr(x) for x in lrs))
