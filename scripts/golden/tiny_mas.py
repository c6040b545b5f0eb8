#!/usr/bin/python3
"""Golden RecursiveLinks and a tiny three-agent latent round trip, for the TypeScript MAS tests.

Run (Debian's torch 1.13; run from anywhere):
    /usr/bin/python3 scripts/golden/tiny_mas.py
writes into test/golden/tiny-mas/:

  planner-inner.pt  inner link `ln_res_adapter`, d 48 (planner = models/tiny/qwen3-tiny)
  critic-inner.pt   inner link, d 64 (critic = models/tiny/llama-tiny)
  solver-inner.pt   inner link, d 32 (solver = models/tiny/qwen2-tiny)
  outer_12.pt       outer link `outer_ln_res_adapter`, 48 -> 64 (planner -> critic)
  outer_23.pt       outer link, 64 -> 32 (critic -> solver)
  outer_31.pt       outer link, 32 -> 48 (solver -> planner, feedback)
  rollout.json      the float64 reference described below

Links are built from the formulas of docs/method.md §2, PyTorch default init under
torch.manual_seed(1000 + k), then every LayerNorm is perturbed (weight = 1 + 0.2·randn, bias = 0.1·randn) so
a test that ignores the affine part fails. Each module is cast to bfloat16 and saved as
`torch.save(module.state_dict())`, the way upstream ships links, with upstream's key names:
  inner: pre_ln.{weight,bias} [d], proj1.{weight [d,d], bias [d]}, proj2.{weight [d,d], bias [d]}, post_ln.*
  outer: ln_source.* [d_in], proj1.{weight [2·d_out, d_in], bias}, proj2.{weight [d_out, 2·d_out], bias},
         residual_proj.{weight [d_out, d_in], bias [d_out]}, ln_target.* [d_out]
  Inner(x) = LN_post(x + W2·GELU(W1·LN_pre(x) + b1) + b2)
  Outer(x) = LN_target(W2·GELU(W1·LN_source(x) + b1) + b2 + W3·x + b3)      (LayerNorm eps 1e-5, erf GELU)

The reference reloads the saved .pt files and widens the bf16 weights to float64; the model forward is
tiny_models.forward (float64 over the bf16 checkpoint weights, batch 1, positions 0..T-1). Everything
downstream (latents, inner link applications) stays float64: no bf16 rounding of latents between agents.

rollout.json layout. Every "b64" value is base64 of little-endian float64, row-major, shape given alongside;
ids, gaps and shapes are plain JSON.
  "format": short description, "m": 4 (latent steps everywhere),
  "links": {name: {"file", "kind" ("inner" | "outer"), "d_in", "d_out", "x" b64 [3, d_in], "y" b64 [3, d_out]}}
     for names planner-inner, critic-inner, solver-inner, outer_12, outer_23, outer_31; x is randn (bf16-exact,
     row i shifted by 0.5·i) and y = link(x) in float64.
  "stages": {stage: {...}} in run order planner, critic, solver_feedback, planner_round2, solver_decode, each
     "model"       tiny model folder name under models/tiny
     "inner"       inner link name used by the rollout (absent for solver_decode)
     "segments"    list of id lists; the input is embed(seg0) ⊕ latents_in ⊕ embed(seg1) (one segment: embed(seg0))
     "latents_in_from"  outer link that produced latents_in (absent for the first planner)
     "latents_in"  b64 [4, d_model] (absent for the first planner)
     "shapes"      {array name: shape}
     "hidden"      b64 [4, d_model]: H, the post-final-norm hidden state at the last position of each of the m
                   full forwards; after step i the sequence grows by Inner(h_i); the last Inner(h_4) is never
                   forwarded
     "latents_out" {outer link name: b64 [4, d_target]} = Outer(Inner(H))
  solver_decode has no inner/hidden/latents_out; it has the solver_feedback input and greedy decoding with full
  forwards (argmax of the last row's logits, append that token's embedding), 6 steps:
     "generated_ids" [6], "top2_gap" [6] (top-1 minus top-2 logit per step), "logits0" b64 [vocab] (step 1's
     last-row logits, before any generated token).
"""
import hashlib
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from goldenjson import dump  # noqa: E402
from tiny_models import b64, forward, read_safetensors  # noqa: E402

f64 = torch.float64
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "test", "golden", "tiny-mas")
M = 4
DECODE_STEPS = 6
EPS = 1e-5

MODELS = {"planner": "qwen3-tiny", "critic": "llama-tiny", "solver": "qwen2-tiny"}

# Id segments: what `rmas ask --style sequential_light --question "2+3?" --prompts test/golden/tiny-mas/prompts.json`
# renders and tokenises for each stage (system prompt + a short user template, Qwen-style chat, empty think block),
# so that test/mas/ask-golden.test.ts can compare the dump of a real run with this reference, stage by stage.
P0 = [  # planner, round 1: whole prompt
    457, 115, 121, 115, 116, 101, 109, 10, 89, 284, 359, 258, 32, 256, 108, 112, 102, 117, 108, 258, 115, 115, 437, 116,
    281, 116, 46, 458, 10, 457, 117, 115, 268, 10, 80, 308, 280, 346, 58, 32, 50, 43, 51, 63, 458, 10, 457, 97, 115,
    115, 437, 116, 281, 116, 10, 459, 10, 10, 460, 10, 10,
]
C0 = [  # critic prefix, then L12
    457, 115, 121, 115, 116, 101, 109, 10, 89, 284, 359, 258, 32, 256, 108, 112, 102, 117, 108, 258, 115, 115, 437, 116,
    281, 116, 46, 458, 10, 457, 117, 115, 268, 10, 377, 278, 105, 290, 32, 80, 308, 58, 10,
]
C1 = [  # critic suffix
    10, 82, 101, 102, 277, 101, 280, 346, 58, 32, 50, 43, 51, 63, 458, 10, 457, 97, 115, 115, 437, 116, 281, 116, 10,
    459, 10, 10, 460, 10, 10,
]
S0 = [  # solver prefix, then L23
    457, 115, 121, 115, 116, 101, 109, 10, 89, 284, 359, 258, 32, 256, 108, 112, 102, 117, 108, 258, 115, 115, 437, 116,
    281, 116, 46, 458, 10, 457, 117, 115, 268, 10, 82, 101, 102, 277, 101, 100, 32, 80, 308, 58, 10,
]
S1 = [10, 381, 58, 32, 50, 43, 51, 63, 458, 10, 457, 97, 115, 115, 437, 116, 281, 116, 10, 459, 10, 10, 460, 10, 10]  # solver suffix
F0 = [  # planner feedback prefix, then L31
    457, 115, 121, 115, 116, 101, 109, 10, 89, 284, 359, 258, 32, 256, 108, 112, 102, 117, 108, 258, 115, 115, 437, 116,
    281, 116, 46, 458, 10, 457, 117, 115, 268, 10, 82, 284, 110, 100, 32, 50, 46, 32, 70, 101, 101, 100, 98, 327, 107,
    58, 10,
]
F1 = [  # planner feedback suffix
    10, 80, 308, 280, 346, 58, 32, 50, 43, 51, 63, 458, 10, 457, 97, 115, 115, 437, 116, 281, 116, 10, 459, 10, 10, 460,
    10, 10,
]


class InnerLink(nn.Module):
    """Upstream `ln_res_adapter` layout: LN_post(x + proj2(GELU(proj1(LN_pre(x)))))."""

    def __init__(self, d):
        super().__init__()
        self.pre_ln = nn.LayerNorm(d, eps=EPS)
        self.proj1 = nn.Linear(d, d)
        self.proj2 = nn.Linear(d, d)
        self.post_ln = nn.LayerNorm(d, eps=EPS)

    def forward(self, x):
        return self.post_ln(x + self.proj2(F.gelu(self.proj1(self.pre_ln(x)))))


class OuterLink(nn.Module):
    """Upstream `outer_ln_res_adapter` layout: LN_target(proj2(GELU(proj1(LN_source(x)))) + residual_proj(x))."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.ln_source = nn.LayerNorm(d_in, eps=EPS)
        self.proj1 = nn.Linear(d_in, 2 * d_out)
        self.proj2 = nn.Linear(2 * d_out, d_out)
        self.residual_proj = nn.Linear(d_in, d_out)
        self.ln_target = nn.LayerNorm(d_out, eps=EPS)

    def forward(self, x):
        return self.ln_target(self.proj2(F.gelu(self.proj1(self.ln_source(x)))) + self.residual_proj(x))


# name -> (kind, d_in, d_out); order fixes the seeds
LINKS = {
    "planner-inner": ("inner", 48, 48),
    "critic-inner": ("inner", 64, 64),
    "solver-inner": ("inner", 32, 32),
    "outer_12": ("outer", 48, 64),
    "outer_23": ("outer", 64, 32),
    "outer_31": ("outer", 32, 48),
}


def make_link(k, kind, d_in, d_out):
    torch.manual_seed(1000 + k)
    mod = InnerLink(d_in) if kind == "inner" else OuterLink(d_in, d_out)
    with torch.no_grad():
        for sub in mod.modules():
            if isinstance(sub, nn.LayerNorm):
                sub.weight.copy_(1 + 0.2 * torch.randn(sub.weight.shape))
                sub.bias.copy_(0.1 * torch.randn(sub.bias.shape))
    return mod.to(torch.bfloat16)


def layer_norm(x, sd, p):
    return F.layer_norm(x, x.shape[-1:], sd[p + ".weight"], sd[p + ".bias"], EPS)


def apply_link(kind, sd, x):
    """Float64 link forward written from the state dict (independent of the nn.Module classes)."""
    if kind == "inner":
        y = F.linear(layer_norm(x, sd, "pre_ln"), sd["proj1.weight"], sd["proj1.bias"])
        y = F.linear(F.gelu(y), sd["proj2.weight"], sd["proj2.bias"])
        return layer_norm(x + y, sd, "post_ln")
    y = F.linear(layer_norm(x, sd, "ln_source"), sd["proj1.weight"], sd["proj1.bias"])
    y = F.linear(F.gelu(y), sd["proj2.weight"], sd["proj2.bias"])
    return layer_norm(y + F.linear(x, sd["residual_proj.weight"], sd["residual_proj.bias"]), sd, "ln_target")


def load_model(name):
    folder = os.path.join(ROOT, "models", "tiny", name)
    with open(os.path.join(folder, "config.json")) as fh:
        cfg = json.load(fh)
    return cfg, read_safetensors(os.path.join(folder, "model.safetensors"))


def embed(w, ids):
    return w["model.embed_tokens.weight"][torch.tensor(ids)]


def rollout(cfg, w, inner, x):
    """Upstream's latent rollout: m full forwards, no cache; returns H [m, d]."""
    hs = []
    for _ in range(M):
        hidden, _ = forward(cfg, w, x)
        h = hidden[-1]
        hs.append(h)
        x = torch.cat([x, inner(h[None, :])], dim=0)
    return torch.stack(hs)


def greedy(cfg, w, x):
    ids, gaps, logits0 = [], [], None
    for step in range(DECODE_STEPS):
        _, logits = forward(cfg, w, x)
        row = logits[-1]
        if step == 0:
            logits0 = row
        top = torch.topk(row, 2)
        ids.append(int(top.indices[0]))
        gaps.append(float(top.values[0] - top.values[1]))
        x = torch.cat([x, embed(w, [ids[-1]])], dim=0)
    return ids, gaps, logits0


def main():
    os.makedirs(OUT, exist_ok=True)
    links, link_json = {}, {}
    for k, (name, (kind, d_in, d_out)) in enumerate(LINKS.items()):
        path = os.path.join(OUT, f"{name}.pt")
        torch.save(make_link(k, kind, d_in, d_out).state_dict(), path)
        sd = {key: t.to(f64) for key, t in torch.load(path).items()}
        links[name] = lambda x, kind=kind, sd=sd: apply_link(kind, sd, x)
        g = torch.Generator().manual_seed(2000 + k)
        x = torch.randn(3, d_in, generator=g, dtype=torch.float32) + 0.5 * torch.arange(3.0)[:, None]
        x = x.to(torch.bfloat16).to(f64)
        mod = (InnerLink(d_in) if kind == "inner" else OuterLink(d_in, d_out)).to(f64)
        mod.load_state_dict(sd)  # the nn.Module and the state-dict forward must agree
        assert (mod(x) - links[name](x)).abs().max() < 1e-12, name
        link_json[name] = {"file": f"test/golden/tiny-mas/{name}.pt", "kind": kind, "d_in": d_in,
                           "d_out": d_out, "x": b64(x), "y": b64(links[name](x))}

    models = {role: load_model(name) for role, name in MODELS.items()}
    stages = {}

    def agent_stage(role, segs, lat_in, lat_from, outer):
        cfg, w = models[role]
        parts = [embed(w, segs[0])] + ([lat_in, embed(w, segs[1])] if lat_in is not None else [])
        H = rollout(cfg, w, links[f"{role}-inner"], torch.cat(parts, dim=0))
        L = links[outer](links[f"{role}-inner"](H))
        st = {"model": MODELS[role], "inner": f"{role}-inner", "segments": segs}
        shapes = {}
        if lat_in is not None:
            st["latents_in_from"] = lat_from
            st["latents_in"] = b64(lat_in)
            shapes["latents_in"] = list(lat_in.shape)
        shapes["hidden"] = list(H.shape)
        shapes[f"latents_out.{outer}"] = list(L.shape)
        st["shapes"] = shapes
        st["hidden"] = b64(H)
        st["latents_out"] = {outer: b64(L)}
        return st, H, L

    stages["planner"], H1, L12 = agent_stage("planner", [P0], None, None, "outer_12")
    stages["critic"], H2, L23 = agent_stage("critic", [C0, C1], L12, "outer_12", "outer_23")
    stages["solver_feedback"], H3, L31 = agent_stage("solver", [S0, S1], L23, "outer_23", "outer_31")
    stages["planner_round2"], H4, L12b = agent_stage("planner", [F0, F1], L31, "outer_31", "outer_12")

    cfg, w = models["solver"]
    ids, gaps, logits0 = greedy(cfg, w, torch.cat([embed(w, S0), L23, embed(w, S1)], dim=0))
    stages["solver_decode"] = {
        "model": MODELS["solver"], "segments": [S0, S1], "latents_in_from": "outer_23", "latents_in": b64(L23),
        "shapes": {"latents_in": list(L23.shape), "logits0": list(logits0.shape)},
        "generated_ids": ids, "top2_gap": gaps, "logits0": b64(logits0),
    }

    out = {
        "format": "see scripts/golden/tiny_mas.py docstring; b64 = little-endian float64, row-major",
        "m": M,
        "links": link_json,
        "stages": stages,
    }
    path = os.path.join(OUT, "rollout.json")
    with open(path, "w") as fh:
        fh.write(dump(out) + "\n")

    for name, (kind, d_in, d_out) in LINKS.items():
        print(f"link {name:14s} {kind} {d_in}->{d_out}")
    for name, H, L in [("planner", H1, L12), ("critic", H2, L23), ("solver_feedback", H3, L31),
                       ("planner_round2", H4, L12b)]:
        print(f"{name:16s} H {list(H.shape)} |H|max={H.abs().max():.4f}  L {list(L.shape)} |L|max={L.abs().max():.4f}")
    print(f"solver_decode    ids={ids} min top2 gap={min(gaps):.4f} |logits0|max={logits0.abs().max():.4f}")
    total = 0
    for f in sorted(os.listdir(OUT)):
        data = open(os.path.join(OUT, f), "rb").read()
        total += len(data)
        print(f"  {f:18s} {len(data):7d} B  sha256 {hashlib.sha256(data).hexdigest()[:16]}")
    print(f"  total {total} B")


if __name__ == "__main__":
    main()
