import sys, h5py, numpy as np
out, counts, seed, rows, row_count = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
order = [int(r) for r in rows.split(",")]
rng = np.random.default_rng(seed)
def response(tokens):
    ids, labels, mask = np.zeros(16, np.int32), np.zeros(16, np.int32), np.zeros(16, np.int32)
    ids[:12] = tokens
    labels[:11] = tokens[1:]
    mask[3:11] = 1
    return [ids, mask, labels]
for f, n in enumerate(int(c) for c in counts.split(",")):
    x = np.zeros((n, 6, 16), np.int32)
    for i in range(n):
        prompt = rng.integers(1, 32, 4)
        chosen = 2 * rng.integers(1, 16, 8)
        rejected = 2 * rng.integers(0, 16, 8) + 1
        feats = response(np.concatenate([prompt, chosen])) + response(np.concatenate([prompt, rejected]))
        for r in range(6):
            x[i, order[r]] = feats[r]
    with h5py.File(f"{out}/pairs_{f}.h5", "w") as h:
        h.attrs["n_examples"] = n
        h.create_dataset("data", data=x[:, :row_count], dtype="i4", chunks=(1, row_count, 16), compression="gzip")
