#!/usr/bin/python3
"""A wider random Qwen3 for the prefill comparison (issue 38, measurement 2): qwen3-tiny's config, tokenizer and
vocabulary at another width, seeded random bf16 weights, written where the peer benchmark reads models.

    /usr/bin/python3 scripts/peer/make_wide.py [--hidden 1024] [--layers 2] [--out DIR]

DIR defaults to .cache/peer-src/qwen3-w<hidden> (ignored by git: 25-100 MB). heads = hidden / 64 (head_dim 64),
half as many KV heads, intermediate 3 × hidden. bench/prefill-tiling.ts and `npm run bench:peer` (after a link
models/tiny/qwen3-w<hidden> -> DIR) read it; scripts/peer/export_onnx.py exports it like the tiny models.
"""
import argparse
import json
import os
import shutil

import torch

from export_onnx import write_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SRC = os.path.join(ROOT, "models", "tiny", "qwen3-tiny")


def bf16_bytes(t):
    bits = t.to(torch.float32).contiguous().view(torch.int32)
    # round to nearest even, as torch's .bfloat16() does
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return (bits & 0xFFFF).to(torch.int16).numpy().astype("<i2").tobytes()


def write_safetensors_bf16(path, weights):
    write_safetensors(path, {name: ("BF16", w.shape, bf16_bytes(w)) for name, w in weights.items()})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--out")
    args = ap.parse_args()
    H = args.hidden
    if H % 128:
        raise SystemExit(f"--hidden {H}: expected a multiple of 128")
    out = args.out or os.path.join(ROOT, ".cache", "peer-src", f"qwen3-w{H}")
    with open(os.path.join(SRC, "config.json")) as fh:
        cfg = json.load(fh)
    D, heads = 64, H // 64
    cfg.update(hidden_size=H, intermediate_size=3 * H, head_dim=D, num_attention_heads=heads, num_key_value_heads=heads // 2,
               num_hidden_layers=args.layers, max_window_layers=args.layers)
    V, I, kv = cfg["vocab_size"], 3 * H, heads // 2 * D
    g = torch.Generator().manual_seed(args.seed)
    lin = lambda n, k: torch.randn(n, k, generator=g) / k ** 0.5  # noqa: E731
    norm = lambda n: 1 + 0.1 * torch.randn(n, generator=g)  # noqa: E731
    w = {"model.embed_tokens.weight": torch.randn(V, H, generator=g), "model.norm.weight": norm(H)}
    for i in range(args.layers):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": norm(H), p + "post_attention_layernorm.weight": norm(H),
                  p + "self_attn.q_proj.weight": lin(heads * D, H), p + "self_attn.k_proj.weight": lin(kv, H),
                  p + "self_attn.v_proj.weight": lin(kv, H), p + "self_attn.o_proj.weight": lin(H, heads * D),
                  p + "self_attn.q_norm.weight": norm(D), p + "self_attn.k_norm.weight": norm(D),
                  p + "mlp.gate_proj.weight": lin(I, H), p + "mlp.up_proj.weight": lin(I, H), p + "mlp.down_proj.weight": lin(H, I)})
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(SRC):
        if f != "model.safetensors" and f != "config.json":
            shutil.copyfile(os.path.join(SRC, f), os.path.join(out, f))
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    write_safetensors_bf16(os.path.join(out, "model.safetensors"), w)
    n = sum(t.numel() for t in w.values())
    print(f"{out}: qwen3 hidden {H}, {args.layers} layers, {heads} heads, intermediate {I}: {n:,} parameters (bf16)")


if __name__ == "__main__":
    main()
