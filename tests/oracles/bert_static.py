import csv, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
cols = ["input_ids", "attention_mask", "labels", "masked_lm_positions", "masked_lm_weights", "token_type_ids",
        "next_sentence_label"]
with open(out + "/a.csv", "w", newline="") as fh:
    w = csv.DictWriter(fh, fieldnames=cols)
    w.writeheader()
    for r in range(4):
        w.writerow({"input_ids": str([2, 10 + r, 4, 3, 0, 0]), "attention_mask": str([1, 1, 1, 1, 0, 0]),
                    "labels": str([20 + r, 0]), "masked_lm_positions": str([2, 0]),
                    "masked_lm_weights": str([1, 0]), "token_type_ids": str([0, 0, 1, 1, 0, 0]),
                    "next_sentence_label": str(r % 2)})
open(out + "/meta.dat", "w").write("a.csv 4\n")
