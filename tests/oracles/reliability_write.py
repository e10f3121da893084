import os, sys, h5py, numpy as np
out, n, msl = sys.argv[1], 8, 16
rng = np.random.default_rng(0)
good = np.stack([rng.integers(0, 256, (n, msl)), np.ones((n, msl)), rng.integers(0, 256, (n, msl))], 1).astype(np.int32)
def write(name, data, **kw):
    os.makedirs(f"{out}/{name}")
    with h5py.File(f"{out}/{name}/d.h5", "w") as f:
        f.create_dataset("data", data=data, chunks=(1,) + data.shape[1:], **kw)
write("rows4", np.concatenate([good, good[:, :1]], 1))
write("lzf", good, compression="lzf")
write("long", np.ones((n, 3, 64), np.int32))
def variant(name, change):
    d = good.copy(); change(d); write(name, d)
variant("mask_minus_one", lambda d: d.__setitem__((2, 1, 7), -1))
variant("mask_all_zero", lambda d: d.__setitem__((slice(None), 1), 0))
variant("negative_label", lambda d: d.__setitem__((3, 2, 5), -1))
def padded(d):
    d[:, 1, :4] = 0; d[:, 2, :4] = -100
variant("padding_labels", padded)
