import sys, h5py, numpy as np
out, (first, counts) = sys.argv[1], sys.argv[2].split(":")
counts = [int(c) for c in counts.split(",") if c]
for f, n in enumerate(counts, int(first)):
    x = np.zeros((n, 3, 8), dtype=np.int32)
    for i in range(n):
        toks = 100 * f + i + np.arange(9) * 1000
        x[i, 0], x[i, 1], x[i, 2] = toks[:-1], 1, toks[1:]
    with h5py.File(f"{out}/examples_{f}.h5", "w") as h:
        h.attrs["n_examples"] = n
        h.create_dataset("data", data=x, dtype="i4", chunks=(1, 3, 8), compression="gzip")
