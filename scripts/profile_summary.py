#!/usr/bin/env python3
"""Summarises Chrome traces from the PyTorch profiler (zoo's ZOO_PROFILE, or
bench_reference_gpt.py --profile): wall time of the traced span, how much of
it the GPU was busy, and the kernels (or, without a GPU, the ops) that took
the most time. With two traces, prints them side by side.

  scripts/profile_summary.py zoo.json [reference.json] [--top 25]
"""
import argparse
import collections
import json


def load(path):
    with open(path) as f:
        trace = json.load(f)
    if isinstance(trace, dict):  # Kineto's format; profilers without Kineto write the list alone
        trace = trace["traceEvents"]
    events = [e for e in trace if e.get("ph") == "X" and "dur" in e]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    timed = kernels or [e for e in events if e.get("cat") == "cpu_op" or e["name"].startswith("aten::")]
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    busy, last = 0.0, start  # union of the kernel intervals
    for e in sorted(kernels, key=lambda e: e["ts"]):
        lo, hi = max(e["ts"], last), e["ts"] + e["dur"]
        if hi > lo:
            busy += hi - lo
            last = hi
    by_name = collections.Counter()
    count = collections.Counter()
    for e in timed:
        by_name[e["name"]] += e["dur"]
        count[e["name"]] += 1
    return {"wall_ms": (end - start) / 1e3, "busy_ms": busy / 1e3, "n": len(timed),
            "what": "kernels" if kernels else "CPU ops (times include their callees)", "by_name": by_name, "count": count}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    for path in a.traces:
        s = load(path)
        busy = f", GPU busy {s['busy_ms']:.1f} ms ({100 * s['busy_ms'] / s['wall_ms']:.0f}%)" if s["busy_ms"] else ""
        print(f"{path}: {s['wall_ms']:.1f} ms traced{busy}, {s['n']} {s['what']}")
        for name, us in s["by_name"].most_common(a.top):
            print(f"  {us / 1e3:9.2f} ms {s['count'][name]:6d}x  {name[:110]}")


if __name__ == "__main__":
    main()
