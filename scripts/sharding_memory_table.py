#!/usr/bin/python3
"""Prints docs/distributed.md's table of memory per GPU under full sharding.

For each config: the model state per device that `zoo --validate_only`
prints for WORLD_SIZE = 8, 64 and 512 with runconfig.sharding: full, plus an
estimate of the activations of one sequence (msl tokens) per GPU in 16-bit
precision: per layer s*h*(34 + 5*a*s/h) bytes without activation
checkpointing (Korthikanti et al., 2022, for a transformer layer), the
layers' inputs (2*s*h each) plus one layer's with it; the logits and their
gradient in float32 (8*s*V) either way. A cell says whether it fits a GPU of
80 GB with 5% left for the allocator.
Usage: scripts/sharding_memory_table.py ZOO CONFIG.yaml...
"""
import os
import subprocess
import sys
import tempfile

import yaml

GB = 1e9
CAPACITY = 80 * GB * 0.95


def model_state(zoo, config, world):
    with open(config) as f:
        params = yaml.safe_load(f)
    params.setdefault("runconfig", {}).update({"enable_distributed": True, "sharding": "full"})
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(params, f)
    out = subprocess.run([zoo, "GPU", "--params", f.name, "--mode", "train", "--validate_only"], capture_output=True,
                         text=True, env=dict(os.environ, WORLD_SIZE=str(world), RANK="0"))
    os.unlink(f.name)
    for line in out.stdout.splitlines():
        if line.startswith("Parameters: "):
            parameters = int(line.split()[1])
        if line.startswith("Model state per device"):
            value, unit = line.split(": ")[2].split()[:2]
            state = float(value) * (2**30 if unit == "GiB" else 2**20)
    return parameters, state, params["model"]


def activations(model, checkpointing):
    s, h, a = model["max_position_embeddings"], model["hidden_size"], model["num_heads"]
    layers, vocab = model["num_hidden_layers"], model["vocab_size"]
    layer = s * h * (34 + 5 * a * s / h)
    logits = 8 * s * vocab
    return (layers * 2 * s * h + layer if checkpointing else layers * layer) + logits


def main():
    zoo, configs = sys.argv[1], sys.argv[2:]
    print("| config | parameters | msl | 8 GPUs | 64 GPUs | 512 GPUs | fits 80 GB (no checkpointing / activation checkpointing) |")
    print("|---|---|---|---|---|---|---|")
    for config in configs:
        cells, fits = [], []
        for world in (8, 64, 512):
            parameters, state, model = model_state(zoo, config, world)
            cells.append(f"{state / GB:.1f} GB")
            plain = state + activations(model, False) <= CAPACITY
            recomputed = state + activations(model, True) <= CAPACITY
            fits.append(f"{world}: {'yes' if plain else 'no'} / {'yes' if recomputed else 'no'}")
        name = os.path.splitext(os.path.basename(config))[0]
        print(f"| {name} | {parameters / 1e9:.2f}B | {model['max_position_embeddings']} | " + " | ".join(cells) +
              " | " + "; ".join(fits) + " |")


if __name__ == "__main__":
    main()
