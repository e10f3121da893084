import sys, os, h5py, numpy as np
out, files, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(seed)
T, N = 8, 2
def seq(topic, length):
    ids, mask, types = np.zeros(T, np.int32), np.zeros(T, np.int32), np.zeros(T, np.int32)
    ids[0] = 2                      # [CLS]
    ids[1:length] = topic
    ids[length] = 3                 # [SEP]
    mask[:length + 1] = 1
    return [ids, mask, types]
for f in range(files):
    q = np.zeros((n, 3, T), np.int32)
    c = np.zeros((n, 3, N, T), np.int32)
    for i in range(n):
        topic, other = rng.choice(np.arange(5, 50), 2, replace=False)
        q[i] = seq(topic, int(rng.integers(3, 6)))
        for k, t in enumerate([topic, other]):
            rows = seq(t, int(rng.integers(4, 8)))
            for r in range(3):
                c[i, r, k] = rows[r]
    with h5py.File(f"{out}/dpr-{f}.h5", "w") as h:
        h.attrs["n_examples"] = n
        h.create_dataset("data_0", data=q, chunks=(1, 3, T), compression="gzip")
        h.create_dataset("data_1", data=c, chunks=(1, 3, N, T), compression="gzip")
