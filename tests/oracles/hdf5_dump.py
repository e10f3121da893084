import sys, glob, os, json, h5py
out = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.h5"))):
    with h5py.File(path, "r") as h:
        d = h["data"]
        out[os.path.basename(path)] = {"shape": list(d.shape), "chunks": list(d.chunks), "dtype": str(d.dtype),
            "compression": d.compression, "n_examples": int(h.attrs["n_examples"]), "data": d[()].tolist()}
print(json.dumps(out))
