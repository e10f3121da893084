# What llava_write_samples.py and multimodal_simple_write_samples.py share:
# their arguments and the text rows of a sample (ids, loss mask, labels, key
# padding), drawn from one generator in the same order for both.
import sys

import numpy as np


class Samples:
    """argv: H5_DIR T N [CHANGE [LABELS]] (CHANGE: a Python statement applied to
    a.h5's arrays before they are written; LABELS: a Python expression of the
    (k, T) labels, default random ids)."""

    def __init__(self, argv=sys.argv):
        self.out, self.T, self.n = argv[1], int(argv[2]), int(argv[3])
        self.change = argv[4] if len(argv) > 4 else ""
        self.labels_expr = argv[5] if len(argv) > 5 and argv[5] else "rng.integers(0, 37, (k, T))"
        self.rng = np.random.default_rng(0)

    def text_rows(self, k):
        """ids, loss mask (0 on the first 5 and last 2 positions), labels, key padding (the last 2)."""
        T = self.T
        ids = self.rng.integers(0, 37, (k, T))
        labels = eval(self.labels_expr, {"rng": self.rng, "np": np, "k": k, "T": T})
        loss = np.ones((k, T)); loss[:, :5] = 0; loss[:, -2:] = 0
        pad = np.zeros((k, T)); pad[:, -2:] = 1
        return ids, loss, labels, pad

    def apply_change(self, **arrays):
        """The arrays after CHANGE ran on them (by name)."""
        scope = dict(arrays, np=np)
        exec(self.change, scope)
        return [scope[name] for name in arrays]
