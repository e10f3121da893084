# Writes rows as modelzoo's VSL fine-tuning generator lays them out
# (vsl_finetuning_token_generator.py, Release 2.10): the packed sequences'
# tokens concatenated and the whole row shifted once (input = all[:-1],
# labels = all[1:], loss mask = mask[1:]), attention_span [L-1 .. 0] and
# position_ids [0 .. L-1] per sequence, cut to the row with the rest; padding
# 0 in every row. Then copies with one row spoiled, for the bad-input cases.
#   packing_write_vsl.py OUT_DIR
import os, sys
import h5py, numpy as np

out = sys.argv[1]
msl, vocab = 12, 61
rng = np.random.default_rng(7)
rows = [[4, 5, 4], [6, 3], [7, 6], [2, 3, 4, 2]]  # token counts per sequence; each row <= msl + 1 tokens
data = np.zeros((len(rows), 5, msl), np.int32)
for r, lengths in enumerate(rows):
    tokens, mask, span, position = [], [], [], []
    for L in lengths:
        tokens += list(rng.integers(1, vocab, L))
        m = list(rng.integers(0, 2, L)); m[0] = 0; m[-1] = 1  # a sequence's first token is its prompt's
        mask += m
        span += list(range(L - 1, -1, -1))
        position += list(range(L))
    pad = msl + 1 - len(tokens)
    tokens += [0] * pad; mask += [0] * pad; span += [0] * pad; position += [0] * pad
    data[r, 0] = tokens[:-1]
    data[r, 1] = mask[1:]
    data[r, 2] = tokens[1:]
    data[r, 3] = span[:-1]
    data[r, 4] = position[:-1]

def write(sub, d):
    os.makedirs(f"{out}/{sub}", exist_ok=True)
    with h5py.File(f"{out}/{sub}/examples_0.h5", "w") as h:
        h.attrs["n_examples"] = len(d)
        h.create_dataset("data", data=d, dtype="i4", chunks=(1, d.shape[1], msl), compression="gzip")

write("vsl", data)
past = data.copy(); past[2, 3, msl - 1] = 2  # the last column's span runs two past the row (the shift cuts one)
write("span_past_row", past)
restart = data.copy(); restart[1, 4, 6] = 3  # the second sequence numbers on instead of restarting
write("no_restart", restart)
three = np.zeros((4, 3, msl), np.int32); three[:, 1] = 1
write("three_rows", three)
