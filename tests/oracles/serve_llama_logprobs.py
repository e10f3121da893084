# With llama_float64_prelude.py: each token-id list in DIR/prompts.json,
# continued by 4 greedy tokens of the float64 forward of DIR/hf, then log
# p(token t | tokens before t) for t >= 1 and whether token t was the most
# likely one there. Written to DIR/logprobs.json with the continued ids.
import json, sys
out = sys.argv[1]
forward = llama_float64(out + "/hf")

def logprobs(ids):
    lp = forward(ids)
    T = len(ids)
    return {"logprobs": [lp[t - 1, ids[t]].item() for t in range(1, T)],
            "greedy": [bool(lp[t - 1].argmax().item() == ids[t]) for t in range(1, T)],
            "next_argmax": int(lp[T - 1].argmax().item())}

def continued(ids):
    for _ in range(4):
        ids = ids + [logprobs(ids)["next_argmax"]]
    return dict(logprobs(ids), ids=ids)

json.dump([continued(ids) for ids in json.load(open(out + "/prompts.json"))], open(out + "/logprobs.json", "w"))
