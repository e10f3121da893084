import sys, os, h5py, numpy as np
rng = np.random.default_rng(1)
x = rng.integers(0, 50000, size=(6, 3, 16), dtype=np.int32)
x[:, 1] = rng.integers(0, 2, size=(6, 16))  # loss masks are 0 or 1
layouts = {"modelzoo": dict(chunks=(1, 3, 16), compression="gzip"), "plain_chunks": dict(chunks=(1, 3, 16)),
           "contiguous": {}, "big_chunks": dict(chunks=(4, 3, 16), compression="gzip"),
           "shuffled_gzip": dict(chunks=(1, 3, 16), compression="gzip", shuffle=True),
           "int64": dict(chunks=(1, 3, 16), compression="gzip", dtype="i8")}
for name, kw in layouts.items():
    os.makedirs(f"{sys.argv[1]}/{name}")
    with h5py.File(f"{sys.argv[1]}/{name}/examples_0.h5", "w") as h:
        h.attrs["n_examples"] = 6
        h.create_dataset("data", data=x.astype(kw.pop("dtype", "i4")), **kw)
