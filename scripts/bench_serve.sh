#!/usr/bin/env bash
# zoo serve's throughput with concurrent streams, side by side in one run: a
# GPT-2-small-shaped byte-level model (12 layers, 768 wide; one training step
# on zoo's corpus, so the weights are real enough) served on 127.0.0.1, then
# generated tokens/s for 1 stream and for N streams at once (each 128 tokens,
# eos ignored), and the ratio N-stream / 1-stream, with each stream's time to
# its last token; then lm-eval's loglikelihood requests (256 token ids, echo,
# logprobs 1, max_tokens 1) from 1 client and from N clients at once, whose
# rows zoo scores in shared batches: requests/s and the ratio.
# Usage: scripts/bench_serve.sh [N] [CPU|GPU]   (default: 8 CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
streams="${1:-8}"
device="${2:-CPU}"
build_dir="${ZOO_BUILD_DIR:-build}"
scripts/setup.sh zoo >/dev/null
zoo="$(cd "$build_dir" && pwd)/zoo"
work="$(cd "$build_dir" && pwd)/bench_serve"
mkdir -p "$work"
if [ ! -f "$work/model/checkpoint_1.mdl" ]; then
  "$zoo" corpus --output_dir "$work/data" >/dev/null
  sed -e 's/hidden_size: 128/hidden_size: 768/' -e 's/num_hidden_layers: 4/num_hidden_layers: 12/' \
      -e 's/num_heads: 4/num_heads: 12/' -e 's/filter_size: 512/filter_size: 3072/' \
      -e 's/max_position_embeddings: 128/max_position_embeddings: 512/' \
      -e "s#./data/generated/quickstart#$work/data#" configs/quickstart.yaml > "$work/params.yaml"
  "$zoo" "$device" --params "$work/params.yaml" --mode train --max_steps 1 -o "$work/model" >/dev/null 2>&1
fi
"$zoo" serve --checkpoint_path "$work/model" --device "$device" --port 0 > "$work/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q "listening on" "$work/serve.log" && break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
[ -n "$port" ] || { cat "$work/serve.log"; exit 1; }
/usr/bin/python3 - "$port" "$streams" <<'PY'
import json, sys, threading, time, urllib.request
port, streams = int(sys.argv[1]), int(sys.argv[2])
def stream(results, i):
    body = json.dumps({"prompt": "The river ", "max_tokens": 128, "temperature": 0.8, "seed": i,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    start, tokens = time.time(), 0
    with urllib.request.urlopen(req) as r:
        for line in r:
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    results[i] = (tokens, time.time() - start)
def run(n):
    results = [None] * n
    threads = [threading.Thread(target=stream, args=(results, i)) for i in range(n)]
    start = time.time()
    for t in threads: t.start()
    for t in threads: t.join()
    took = time.time() - start
    return sum(r[0] for r in results) / took, sum(r[1] for r in results) / n
run(1)  # warm-up
one, first_one = run(1)
many, first_many = run(streams)
print(f"{'streams':>8} {'tokens/s':>10} {'s per stream':>14}")
print(f"{1:>8} {one:>10.1f} {first_one:>14.3f}")
print(f"{streams:>8} {many:>10.1f} {first_many:>14.3f}")
print(f"ratio {streams} streams / 1 stream: {many / one:.2f}")

def score(done, i, requests):
    for r in range(requests):
        ids = [(i * 7919 + r * 104729 + t * 31) % 256 for t in range(256)]
        body = json.dumps({"model": "zoo", "prompt": [ids], "temperature": 0, "max_tokens": 1, "logprobs": 1,
                           "seed": 1234, "echo": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as reply:
            json.load(reply)
        done[i] += 1
def scoring(clients, requests):
    done = [0] * clients
    threads = [threading.Thread(target=score, args=(done, i, requests)) for i in range(clients)]
    start = time.time()
    for t in threads: t.start()
    for t in threads: t.join()
    return sum(done) / (time.time() - start)
scoring(1, 2)  # warm-up
alone = scoring(1, 4 * streams)
shared = scoring(streams, 4)
print(f"{'clients':>8} {'scoring requests/s':>20}")
print(f"{1:>8} {alone:>20.2f}")
print(f"{streams:>8} {shared:>20.2f}")
print(f"ratio {streams} scoring clients / 1 client: {shared / alone:.2f}")
PY
