#!/usr/bin/env python3
"""Plain PyTorch GPT for zoo's benchmarks: the model a careful engineer writes
in Python (nanoGPT style: fused QKV, SDPA where torch has it, tied
embeddings, AdamW fused/foreach where torch has it, grad clipping), trained
on random tokens. Prints one JSON line with the steady-state step time.

Shape and schedule come from flags so scripts/bench_cpu.sh and
scripts/bench_gpu.sh run it at exactly zoo's shape:
  bench_reference_gpt.py --layers 4 --hidden 256 --heads 4 --ffn 1024 --seq 256 \
      --vocab 256 --batch 8 --steps 30 --warmup 5 [--device cuda --bf16 --compile]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, ffn)
        self.fc_out = nn.Linear(ffn, d)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.x
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, a, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, a.hidden)
        self.wpe = nn.Embedding(a.seq, a.hidden)
        self.blocks = nn.ModuleList(Block(a.hidden, a.heads, a.ffn) for _ in range(a.layers))
        self.ln_f = nn.LayerNorm(a.hidden)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids, labels):
        x = self.wte(ids) + self.wpe(torch.arange(ids.size(1), device=ids.device))
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), labels.view(-1))


def main():
    ap = argparse.ArgumentParser()
    for name in ("layers", "hidden", "heads", "ffn", "seq", "vocab", "batch"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--pad_vocab", type=int, default=1, help="round the vocabulary up to a multiple of this")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--profile", help="write a Chrome trace of 3 steps after the warm-up here")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dev = torch.device(a.device)
    vocab = (a.vocab + a.pad_vocab - 1) // a.pad_vocab * a.pad_vocab
    model = GPT(a, vocab).to(dev)
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    extra = {}
    if dev.type == "cuda":
        extra = {"fused": True}
    opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, **extra)
    step_model = torch.compile(model) if a.compile else model
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    profiler = None
    times, loss = [], None
    for i in range(a.warmup + a.steps):
        if a.profile and i == a.warmup:
            sync()
            profiler = torch.profiler.profile()
            profiler.__enter__()
        if profiler and i == a.warmup + 3:
            sync()
            profiler.__exit__(None, None, None)
            profiler.export_chrome_trace(a.profile)
            profiler = None
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    if profiler:  # fewer than 3 steps after the warm-up: the trace holds them all
        sync()
        profiler.__exit__(None, None, None)
        profiler.export_chrome_trace(a.profile)
    step = statistics.median(times)
    out = {"step_s": step, "tokens_per_s": a.batch * a.seq / step, "loss": loss.detach().item(),
           "torch": torch.__version__, "threads": torch.get_num_threads(),
           "compile": a.compile, "vocab": vocab}
    if dev.type == "cuda":
        out["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps(out))


if __name__ == "__main__":
    main()
