import sys, os, h5py, numpy as np
out = sys.argv[1]
def write(sub, name="data", data=None, **kw):
    os.makedirs(f"{out}/{sub}", exist_ok=True)
    with h5py.File(f"{out}/{sub}/examples_0.h5", "w") as h:
        h.attrs["n_examples"] = len(data)
        h.create_dataset(name, data=data, **kw)
write("missing", name="tokens", data=np.zeros((2, 3, 8), np.int32))
write("float", data=np.zeros((2, 3, 8), np.float32))
write("rows", data=np.zeros((2, 2, 8), np.int32))
write("rank", data=np.zeros((2, 3, 8, 1), np.int32))
write("msl", data=np.zeros((4, 3, 8), np.int32))
os.makedirs(f"{out}/unwritten", exist_ok=True)
with h5py.File(f"{out}/unwritten/examples_0.h5", "w") as h:  # chunks 2 and 3 never written: they read as zeros
    h.attrs["n_examples"] = 4
    d = h.create_dataset("data", shape=(4, 3, 8), dtype="i4", chunks=(1, 3, 8), compression="gzip")
    d[0:2] = np.ones((2, 3, 8), np.int32)
os.makedirs(f"{out}/notsdf", exist_ok=True)
open(f"{out}/notsdf/examples_0.h5", "w").write("plain text, not HDF5")
os.makedirs(f"{out}/empty", exist_ok=True)
