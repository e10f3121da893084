import sys, os, h5py, numpy as np
out, gather, n, seed = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(seed)
T, P = 24, 4
data = np.zeros((n, 2, T), np.int32)
labels = np.full((n, 3, P) if gather else (n, 1, T), -100, np.int32)
for i in range(n):
    L = int(rng.integers(14, T + 1))
    toks = np.full(L, rng.integers(4, 29))
    toks[0], toks[-1] = 0, 2
    ids = np.full(T, 1); ids[:L] = toks
    pos = np.sort(rng.choice(np.arange(2, L - 1), P, replace=False))
    lab = ids[pos].copy(); ids[pos] = 32
    data[i, 0], data[i, 1, :L] = ids, 1
    if gather:
        labels[i, 0], labels[i, 1], labels[i, 2] = lab, pos, 1
    else:
        labels[i, 0, pos] = lab
with h5py.File(f"{out}/mlm_0.h5", "w") as h:
    h.create_dataset("data", data=data, chunks=(1, 2, T), compression="gzip")
    h.create_dataset("labels", data=labels)
