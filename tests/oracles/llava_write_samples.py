# LLaVA samples as modelzoo's preprocessing and h5py write them (tests/test_llava.cpp):
# a.h5 with fixed-length img_path strings, b.h5 with variable-length ones; the
# last sample of a.h5 is text only (its image positions padded).
# Usage: llava_write_samples.py H5_DIR T N [CHANGE [LABELS]] (image_text_samples.py)
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from image_text_samples import Samples  # noqa: E402

s = Samples()


def rows(k, image):
    ids, loss, labels, pad = s.text_rows(k)
    if not image:
        pad[:, 1:5] = 1
    return np.stack([ids, loss, labels, pad], 1).astype(np.int32)


with h5py.File(s.out + "/a.h5", "w") as f:
    data = rows(s.n, True); data[-1, 3, 1:5] = 1
    (data,) = s.apply_change(data=data)
    f.create_dataset("data", data=data)
    f.create_dataset("img_path", data=np.array([[b"sub/wide.png"], [b"square.png"]] + [[b"None"]] * (s.n - 2), dtype="S"))
with h5py.File(s.out + "/b.h5", "w") as f:
    f.create_dataset("data", data=rows(2, True))
    f.create_dataset("img_path", data=np.array([["square.png"], ["sub/wide.png"]], dtype=object), dtype=h5py.string_dtype())
