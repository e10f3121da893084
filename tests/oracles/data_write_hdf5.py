import sys, h5py, numpy as np
out = sys.argv[1]
for f, n in enumerate([5, 3]):
    x = np.zeros((n, 3, 8), dtype=np.int32)
    for i in range(n):
        toks = np.arange(9) + 100 * f + 10 * i
        x[i, 0], x[i, 1], x[i, 2] = toks[:-1], 1, toks[1:]
    x[0, 1, 6:] = 0  # padding positions are not counted in the loss
    with h5py.File(f"{out}/examples_{f}.h5", "w") as h:
        h.attrs["n_examples"] = n
        h.create_dataset("data", data=x, dtype="i4", chunks=(1, 3, 8), compression="gzip")
with h5py.File(f"{out}/bad_rank.h5x", "w") as h:
    h.create_dataset("data", data=np.zeros((2, 10), dtype=np.int32))
import os
os.makedirs(f"{out}/corpus", exist_ok=True)
with h5py.File(f"{out}/corpus/tokens_0.h5", "w") as h:  # corpus format: a token stream
    h.create_dataset("data", data=np.arange(1000, 1026, dtype=np.int32))
