#!/usr/bin/python3
"""Golden inner- and outer-loop training steps on the tiny models, for the TypeScript trainer tests.

Run (Debian's torch 1.13; from anywhere):   /usr/bin/python3 scripts/golden/tiny_train.py
writes test/golden/tiny-train.json. Reads models/tiny/* and the links in test/golden/tiny-mas/*.pt (written
by tiny_mas.py). Everything is float64: bf16 weights widened exactly, no rounding anywhere. One CPU thread.

Shared definitions
- Model forward: tiny_models.forward (batch 1, positions 0..T-1, post-final-norm hidden + logits, no padding).
  embed(ids) = rows of model.embed_tokens.weight. Base models are frozen (plain tensors, no grad).
- Links: tiny_mas.InnerLink / OuterLink (docs/method.md §2), state dicts from the .pt files widened to f64.
- clip_grad_norm_(params, 1.0) (torch 1.13): gn = sqrt(Σ_p ||g_p||²) (pre-clip, recorded);
  every grad *= min(1, 1.0 / (gn + 1e-6)).
- AdamW (torch 1.13, foreach=False, amsgrad off), per parameter, step count n starting at 1:
  p *= 1 − lr·wd;  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²;
  p −= (lr / (1 − β1ⁿ)) · m / (sqrt(v) / sqrt(1 − β2ⁿ) + eps).   (runs even when lr = 0: m, v, n advance)
- LambdaLR factor, transformers' get_cosine_schedule_with_warmup (num_cycles 0.5), k = 0 at the first step:
  k < warmup: k / max(1, warmup); else max(0, 0.5·(1 + cos(π · 2 · 0.5 · (k − warmup) / max(1, total − warmup)))).
  lr of step k = base_lr · factor(k). Order per step: zero_grad, backward, clip, optimizer.step, scheduler.step.

A. Inner loop (planner = qwen3-tiny, d 48; link initialised from planner-inner.pt, trainable)
- 4 samples (ids, loss_mask); step k uses samples 2k mod 4, 2k+1 mod 4 (batch 2, no accumulation), 3 steps.
- Per sample: Hs = hidden of a no-grad forward over ids [T, d]; Es = embed(ids). For t = 0..T-2:
  pred_t = Inner(Hs[t]), target_t = Es[t+1], m_t = loss_mask[t+1];
  cos_t = 1 − F.cosine_similarity(pred_t, target_t, dim=-1) (torch 1.13, eps 1e-8: w12 / sqrt(max(w1·w2, eps²)));
  mse_t = mean over d of (pred_t − target_t)².
- loss = w_cos · Σ m·cos / Σ m + w_mse · Σ m·mse / Σ m, sums over all pairs of both samples of the batch;
  w_cos 1.0, w_mse 0.1.
- AdamW groups: decay = proj1.weight, proj2.weight (wd 0.01); no-decay = biases and LayerNorm params (wd 0).
  betas (0.9, 0.95), eps 1e-8, base lr 5e-3, warmup 1, total 3 (lrs 0, 5e-3, 2.5e-3). Clip over all 8 params.

B. Outer loop, sequential style (planner qwen3-tiny 48 → critic llama-tiny 64 → solver qwen2-tiny 32)
- Inner links {planner,critic,solver}-inner.pt frozen (requires_grad False, gradients still flow to their
  inputs); outer links outer_12 (48→64), outer_23 (64→32), outer_31 (32→48) trainable. R = 2, trim = 5 rows.
- Per sample, per round r = 0..R-1 (⊕ = concatenation of rows; "last n rows" of the hidden states):
  1. planner: r = 0: hidden of embed(P ⊕ TP) without grad; r > 0: hidden of embed(F0) ⊕ Fb ⊕ embed(F1) ⊕ embed(TP)
     with grad through Fb. Hp = last len(TP) rows. L12 = Outer12(InnerP(Hp))[:5].
  2. critic: embed(C0) ⊕ L12 ⊕ embed(C1) ⊕ embed(TC); Hr = last len(TC) rows; L23 = Outer23(InnerC(Hr))[:5].
  3. solver: embed(S0) ⊕ L23 ⊕ embed(S1) ⊕ embed(TS); labels −100 except the TS positions (TS ids);
     CE_r = F.cross_entropy(logits[:-1], labels[1:], ignore_index=−100) (mean over the len(TS) tokens).
     If r < R−1: Hs = last len(TS) rows; Fb = Outer31(InnerS(Hs))[:5].
- config1 (supervise_final_only 1): sample loss = CE_{R−1}. config2 (supervise_final_only 0,
  non_last_loss_weight 0.1): sample loss = CE_{R−1} + 0.1 · mean(CE_0..CE_{R−2}).
  Each sample backpropagates loss / 2 (batch 2 = both samples); recorded "loss" = mean of the sample losses.
  Clip over all params of the three outer links (in the order outer_12, outer_23, outer_31), one AdamW group:
  betas (0.9, 0.95), eps 1e-8, wd 0, base lr 1e-2, warmup 0, total 3 (lrs 1e-2, 7.5e-3).
  config1: 2 steps on the same batch; config2: 1 step's loss / gn / gradients from the same initial weights.

JSON layout (b64 = base64 of little-endian float64, row-major; ints and scalars plain JSON)
  "format", "torch"
  "inner": {"model": "qwen3-tiny", "link": "planner-inner", "link_file", "hyper": {...},
            "samples": [{"ids": [T], "loss_mask": [T]}] × 4,
            "shapes": {key: shape} (the 8 InnerLink keys, in state-dict order),
            "grad0": {key: b64} dLoss/dparam of step 0, pre-clip,
            "steps": [{"batch": [i, j], "lr", "loss", "grad_norm", "state": {key: b64} after the step}] × 3}
  "outer": {"models": {role: folder}, "inner_links": {role: file}, "outer_links": {name: {"file", "d_in", "d_out"}},
            "hyper": {...}, "samples": [{"P","TP","F0","F1","C0","C1","TC","S0","S1","TS": [ids]}] × 2,
            "shapes": {link: {key: shape}},
            "probe": how tensors are summarised (outer link tensors are too many for the size budget):
               every tensor → {"data": b64, "wsum": Σ_i x_i · sin(0.37·i + 0.1), "sumsq": Σ_i x_i²}
               (i = flat row-major index); vectors: data = the whole vector;
               matrices [r, c]: also "rows": [0, r−1], data = those two rows [2, c].
            "config1": {"supervise_final_only": 1, "grad0": {link: {key: probe}} (step 0, pre-clip),
                        "steps": [{"batch": [0, 1], "lr", "loss", "grad_norm", "ce": [[CE_0, CE_1] per sample],
                                   "state": {link: {key: probe}} after the step}] × 2},
            "config2": {"supervise_final_only": 0, "non_last_loss_weight": 0.1, "lr", "loss", "grad_norm",
                        "ce": [[CE_0, CE_1] per sample], "grad": {link: {key: probe}} pre-clip}}
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from goldenjson import dump  # noqa: E402
from tiny_mas import InnerLink, OuterLink, embed, load_model  # noqa: E402
from tiny_models import b64, forward  # noqa: E402

f64 = torch.float64
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LINK_DIR = os.path.join(ROOT, "test", "golden", "tiny-mas")
OUT = os.path.join(ROOT, "test", "golden", "tiny-train.json")


def sample(prompt, target):
    """ids = prompt ⊕ target; loss_mask 0 over the prompt, 1 over the target (assistant span)."""
    return {"ids": prompt + target, "loss_mask": [0] * len(prompt) + [1] * len(target)}


INNER_SAMPLES = [
    sample([457, 117, 115, 268, 10, 50, 43, 51, 63, 458, 10, 457], [97, 32, 53, 458]),      # T 16, 4 ones
    sample([457, 117, 115, 268, 10, 72, 105], [33, 32, 104, 101, 108, 108, 111]),          # T 14, 7 ones
    sample([89, 284, 359, 258, 32], [256, 108, 112, 102, 117]),                             # T 10, 5 ones
    sample([457, 80, 308, 58, 32, 55, 42], [54, 61, 52, 50, 458, 10]),                     # T 13, 6 ones
]
INNER_HYPER = {"w_cos": 1.0, "w_mse": 0.1, "lr": 5e-3, "betas": [0.9, 0.95], "eps": 1e-8,
               "weight_decay": 0.01, "decay_keys": ["proj1.weight", "proj2.weight"], "max_grad_norm": 1.0,
               "warmup": 1, "total": 3, "steps": 3, "batch_size": 2, "cos_eps": 1e-8}

OUTER_SAMPLES = [
    {"P": [457, 117, 115, 268, 10, 50, 43, 51, 63], "TP": [65, 100, 100, 32, 50, 32, 51, 46],
     "F0": [457, 82, 284, 110, 100, 58, 10], "F1": [10, 458, 10, 457, 97],
     "C0": [457, 377, 278, 105, 290, 58, 10], "C1": [10, 458, 10, 457, 97], "TC": [79, 75, 32, 53, 46, 10, 458],
     "S0": [457, 82, 101, 102, 58, 10], "S1": [10, 381, 58, 32, 458], "TS": [53, 46, 32, 68, 111, 110, 101, 458]},
    {"P": [457, 72, 111, 119, 32, 55, 42, 56, 63, 458, 10], "TP": [77, 117, 108, 116, 32, 53, 54],
     "F0": [457, 70, 101, 101, 100, 98, 327, 107, 58, 10, 32], "F1": [10, 458, 10, 457, 97],
     "C0": [457, 67, 104, 101, 99, 107, 58], "C1": [10, 458, 10, 457, 97, 115, 115], "TC": [89, 101, 115, 32, 53, 54, 46, 458, 10],
     "S0": [457, 83, 111, 108, 118, 101], "S1": [10, 63, 458, 10, 457, 97, 115, 115, 437, 116, 281, 116], "TS": [53, 54, 458, 10, 32, 46]},
]
OUTER_HYPER = {"rounds": 2, "max_latent_tokens": 5, "lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8,
               "weight_decay": 0.0, "max_grad_norm": 1.0, "warmup": 0, "total": 3, "batch_size": 2,
               "steps_config1": 2, "non_last_loss_weight": 0.1}
MODELS = {"planner": "qwen3-tiny", "critic": "llama-tiny", "solver": "qwen2-tiny"}
OUTER = {"outer_12": (48, 64), "outer_23": (64, 32), "outer_31": (32, 48)}


def cosine_factor(k, warmup, total):
    """transformers' get_cosine_schedule_with_warmup lambda, num_cycles 0.5."""
    if k < warmup:
        return k / max(1, warmup)
    progress = (k - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))


def load_link(name, mod, trainable):
    sd = {k: t.to(f64) for k, t in torch.load(os.path.join(LINK_DIR, f"{name}.pt")).items()}
    mod = mod.to(f64)
    mod.load_state_dict(sd)
    for p in mod.parameters():
        p.requires_grad_(trainable)
    return mod


def probe(t):
    t = t.detach().to(f64)
    flat = t.flatten()
    R = torch.sin(0.37 * torch.arange(flat.numel(), dtype=f64) + 0.1)
    out = {}
    if t.dim() == 2:
        rows = [0, t.shape[0] - 1]
        out["rows"] = rows
        out["data"] = b64(t[rows])
    else:
        out["data"] = b64(t)
    out["wsum"] = float((flat * R).sum())
    out["sumsq"] = float((flat * flat).sum())
    return out


# ---------------------------------------------------------------- A. inner loop

def inner_loop():
    cfg, w = load_model(MODELS["planner"])
    link = load_link("planner-inner", InnerLink(cfg["hidden_size"]), True)
    h = INNER_HYPER
    named = dict(link.named_parameters())
    decay = [named[k] for k in h["decay_keys"]]
    rest = [p for k, p in named.items() if k not in h["decay_keys"]]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": h["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=h["lr"], betas=tuple(h["betas"]), eps=h["eps"], foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: cosine_factor(k, h["warmup"], h["total"]))

    cached = []
    for s in INNER_SAMPLES:
        with torch.no_grad():
            hs, _ = forward(cfg, w, embed(w, s["ids"]))
        cached.append((hs, embed(w, s["ids"]), torch.tensor(s["loss_mask"][1:], dtype=f64)))

    steps, grad0 = [], None
    for k in range(h["steps"]):
        batch = [(2 * k) % 4, (2 * k + 1) % 4]
        lr = opt.param_groups[0]["lr"]
        opt.zero_grad()
        cos_sum, mse_sum, m_sum = 0.0, 0.0, 0.0
        for i in batch:
            hs, es, m = cached[i]
            pred, target = link(hs[:-1]), es[1:]
            cos = 1 - F.cosine_similarity(pred, target, dim=-1)
            mse = ((pred - target) ** 2).mean(dim=-1)
            cos_sum = cos_sum + (m * cos).sum()
            mse_sum = mse_sum + (m * mse).sum()
            m_sum = m_sum + m.sum()
        loss = h["w_cos"] * cos_sum / m_sum + h["w_mse"] * mse_sum / m_sum
        loss.backward()
        if k == 0:
            grad0 = {key: b64(p.grad) for key, p in link.named_parameters()}
        gn = torch.nn.utils.clip_grad_norm_(list(link.parameters()), h["max_grad_norm"])
        opt.step()
        sched.step()
        steps.append({"batch": batch, "lr": lr, "loss": loss.item(), "grad_norm": gn.item(),
                      "state": {key: b64(t) for key, t in link.state_dict().items()}})
        print(f"inner step {k}: batch {batch} lr {lr:.6g} loss {loss.item():.12f} gn {gn.item():.12f}")
    return {
        "model": MODELS["planner"], "link": "planner-inner", "link_file": "test/golden/tiny-mas/planner-inner.pt",
        "hyper": h, "samples": INNER_SAMPLES,
        "shapes": {key: list(t.shape) for key, t in link.state_dict().items()},
        "grad0": grad0, "steps": steps,
    }


# ---------------------------------------------------------------- B. outer loop

class OuterRig:
    def __init__(self):
        self.models = {role: load_model(name) for role, name in MODELS.items()}
        self.inner = {role: load_link(f"{role}-inner", InnerLink(self.models[role][0]["hidden_size"]), False)
                      for role in MODELS}
        self.outer = {name: load_link(name, OuterLink(a, b), True) for name, (a, b) in OUTER.items()}

    def params(self):
        return [p for name in OUTER for p in self.outer[name].parameters()]

    def run_sample(self, s, rounds, trim):
        """Returns [CE_0, ..., CE_{R-1}] as tensors (graph kept)."""
        (cp, wp), (cc, wc), (cs, ws) = (self.models[r] for r in MODELS)
        fb, ces = None, []
        for r in range(rounds):
            if r == 0:
                with torch.no_grad():
                    hid, _ = forward(cp, wp, embed(wp, s["P"] + s["TP"]))
            else:
                hid, _ = forward(cp, wp, torch.cat([embed(wp, s["F0"]), fb, embed(wp, s["F1"]), embed(wp, s["TP"])]))
            l12 = self.outer["outer_12"](self.inner["planner"](hid[-len(s["TP"]):]))[:trim]
            hid, _ = forward(cc, wc, torch.cat([embed(wc, s["C0"]), l12, embed(wc, s["C1"]), embed(wc, s["TC"])]))
            l23 = self.outer["outer_23"](self.inner["critic"](hid[-len(s["TC"]):]))[:trim]
            x = torch.cat([embed(ws, s["S0"]), l23, embed(ws, s["S1"]), embed(ws, s["TS"])])
            hid, logits = forward(cs, ws, x)
            T, n = x.shape[0], len(s["TS"])
            labels = torch.full((T,), -100, dtype=torch.long)
            labels[T - n:] = torch.tensor(s["TS"])
            ces.append(F.cross_entropy(logits[:-1], labels[1:], ignore_index=-100))
            if r < rounds - 1:
                fb = self.outer["outer_31"](self.inner["solver"](hid[-n:]))[:trim]
        return ces


def outer_step(rig, opt, final_only):
    h = OUTER_HYPER
    opt.zero_grad()
    losses, ces = [], []
    for s in OUTER_SAMPLES:
        ce = rig.run_sample(s, h["rounds"], h["max_latent_tokens"])
        loss = ce[-1] if final_only else ce[-1] + h["non_last_loss_weight"] * torch.stack(ce[:-1]).mean()
        (loss / h["batch_size"]).backward()
        losses.append(loss.item())
        ces.append([c.item() for c in ce])
    grads = {name: {k: probe(p.grad) for k, p in rig.outer[name].named_parameters()} for name in OUTER}
    gn = torch.nn.utils.clip_grad_norm_(rig.params(), h["max_grad_norm"])
    return sum(losses) / len(losses), gn.item(), ces, grads


def make_opt(rig):
    h = OUTER_HYPER
    opt = torch.optim.AdamW(rig.params(), lr=h["lr"], betas=tuple(h["betas"]), eps=h["eps"],
                            weight_decay=h["weight_decay"], foreach=False)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda k: cosine_factor(k, h["warmup"], h["total"]))


def outer_loop():
    h = OUTER_HYPER
    rig = OuterRig()
    opt, sched = make_opt(rig)
    steps, grad0 = [], None
    for k in range(h["steps_config1"]):
        lr = opt.param_groups[0]["lr"]
        loss, gn, ces, grads = outer_step(rig, opt, True)
        if k == 0:
            grad0 = grads
        opt.step()
        sched.step()
        steps.append({"batch": [0, 1], "lr": lr, "loss": loss, "grad_norm": gn, "ce": ces,
                      "state": {name: {key: probe(t) for key, t in rig.outer[name].state_dict().items()}
                                for name in OUTER}})
        print(f"outer config1 step {k}: lr {lr:.6g} loss {loss:.12f} gn {gn:.12f} ce {ces}")

    rig2 = OuterRig()
    opt2, _ = make_opt(rig2)
    lr2 = opt2.param_groups[0]["lr"]
    loss2, gn2, ces2, grads2 = outer_step(rig2, opt2, False)
    print(f"outer config2: loss {loss2:.12f} gn {gn2:.12f} ce {ces2}")
    return {
        "models": MODELS,
        "inner_links": {role: f"test/golden/tiny-mas/{role}-inner.pt" for role in MODELS},
        "outer_links": {name: {"file": f"test/golden/tiny-mas/{name}.pt", "d_in": a, "d_out": b}
                        for name, (a, b) in OUTER.items()},
        "hyper": h, "samples": OUTER_SAMPLES,
        "shapes": {name: {k: list(t.shape) for k, t in rig.outer[name].state_dict().items()} for name in OUTER},
        "probe": "wsum = sum_i x_i*sin(0.37*i+0.1), sumsq = sum_i x_i^2 (i flat row-major); "
                 "vectors: data = whole vector; matrices: data = rows [0, r-1] as [2, c]",
        "config1": {"supervise_final_only": 1, "grad0": grad0, "steps": steps},
        "config2": {"supervise_final_only": 0, "non_last_loss_weight": h["non_last_loss_weight"], "lr": lr2,
                    "loss": loss2, "grad_norm": gn2, "ce": ces2, "grad": grads2},
    }


def main():
    torch.set_num_threads(1)
    out = {
        "format": "see scripts/golden/tiny_train.py docstring; b64 = little-endian float64, row-major",
        "torch": torch.__version__,
        "inner": inner_loop(),
        "outer": outer_loop(),
    }
    with open(OUT, "w") as fh:
        fh.write(dump(out) + "\n")
    print(f"{OUT}: {os.path.getsize(OUT)} B")


if __name__ == "__main__":
    main()
