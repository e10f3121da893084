import csv, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%d" % i for i in range(5, 30)] + ["'", ",", "it's"]
open(os.path.join(out, "vocab.txt"), "w").write("\n".join(vocab) + "\n")
meta = []
for f in range(2):
    name = "part_%d.csv" % f
    with open(os.path.join(out, name), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["tokens", "segment_ids", "is_random_next"])
        w.writeheader()
        for r in range(6):
            row = 6 * f + r
            a = ["w%d" % (5 + (row + k) % 25) for k in range(4 + row % 5)]
            if row in (1, 2):
                a[1:3] = ["'", ",", "it's"][row - 1:row + 1]
            b = ["w%d" % (5 + (2 * row + k) % 25) for k in range(3)]
            tokens = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
            w.writerow({"tokens": str(tokens), "segment_ids": str([0] * (len(a) + 2) + [1] * 4),
                        "is_random_next": row % 2})
    meta.append("%s 6" % name)
open(os.path.join(out, "meta.dat"), "w").write("\n".join(meta) + "\n")
