# multimodal_simple samples as modelzoo's preprocessing and h5py write them
# (tests/test_multimodal_simple.cpp): a.h5 with fixed-length img_path strings,
# b.h5 with variable-length ones. Sample k of a.h5 puts its first image at
# 1..4 and, when it has a second, at 6..9; unused slots are "None" at T.
# Usage: multimodal_simple_write_samples.py H5_DIR T N [CHANGE [LABELS]] (image_text_samples.py)
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from image_text_samples import Samples  # noqa: E402

s = Samples()
T = s.T


def samples(k, two):
    ids, loss, labels, pad = s.text_rows(k)
    modality = np.zeros((k, T)); modality[:, 1:5] = 1
    loc = np.full((k, 2, 4), T)
    loc[:, 0] = np.arange(1, 5)
    for i in range(k):
        if two[i]:
            loc[i, 1] = np.arange(6, 10); modality[i, 6:10] = 1
    return np.stack([ids, loss, labels, pad, modality], 1).astype(np.int32), loc


with h5py.File(s.out + "/a.h5", "w") as f:
    data, loc = samples(s.n, [True] + [False] * (s.n - 1))
    data, loc = s.apply_change(data=data, loc=loc)
    f.create_dataset("data", data=data)
    f.create_dataset("img_data_loc", data=loc)
    f.create_dataset("has_img", data=np.ones((s.n, 1), dtype=bool))
    f.create_dataset("img_path", data=np.array([[b"sub/wide.png", b"square.png"]] + [[b"square.png", b"None"]] * (s.n - 1), dtype="S"))
with h5py.File(s.out + "/b.h5", "w") as f:
    data, loc = samples(2, [True, True])
    f.create_dataset("data", data=data)
    f.create_dataset("img_data_loc", data=loc)
    f.create_dataset("img_path", data=np.array([["square.png", "sub/wide.png"]] * 2, dtype=object), dtype=h5py.string_dtype())
