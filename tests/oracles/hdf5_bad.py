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
os.makedirs(f"{out}/notsdf", exist_ok=True)
open(f"{out}/notsdf/examples_0.h5", "w").write("plain text, not HDF5")
os.makedirs(f"{out}/empty", exist_ok=True)
