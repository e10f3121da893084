import sys, os, h5py, numpy as np
out, fill = sys.argv[1], int(sys.argv[2])
os.makedirs(out, exist_ok=True)
data = np.ones((4, 2, 8), np.int32)
data[:, 0] = 5
labels = np.full((4, 1, 8), -100, np.int32)
labels[1, 0, 3] = fill
with h5py.File(out + "/part.h5", "w") as h:
    h.create_dataset("data", data=data)
    h.create_dataset("labels", data=labels)
