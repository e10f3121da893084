import sys, h5py, numpy as np
with h5py.File(sys.argv[1] + "/tokens_0.h5", "w") as h:
    h.create_dataset("data", data=np.arange(1000, 2000, dtype=np.int32))
