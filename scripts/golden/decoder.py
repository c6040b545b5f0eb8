#!/usr/bin/python3
"""Golden numbers for test/golden.test.ts: a tiny Llama/Qwen decoder layer and an inner RecursiveLink,
written by hand in torch 1.13 (Debian python3-torch) float64 with Hugging Face's conventions.

Run: /usr/bin/python3 scripts/golden/decoder.py > test/golden/decoder.json

Encoding (keeps the file under 200 KB):
- inputs (weights, x, h, targets) are small integers `q` with a power-of-two `scale` per tensor
  (value = q * scale), exact in f32, so the f32 backends see exactly the inputs torch saw;
- results (outputs, losses, gradients) are base64 of little-endian float64 (full precision).

One layer covers both families: Qwen2's q/k/v biases and Qwen3's per-head q/k RMSNorm (before RoPE),
plus Llama-3 RoPE scaling. Deliberate numerical choices, matching what our kernels do:
- inv_freq is computed like HF (f32 torch ops) and the angle pos * inv_freq is rounded to f32 like HF's
  f32 `inv_freq @ position_ids`; cos/sin of that angle are then taken in f64 (HF takes them in f32 and
  casts, a 3e-8 rounding that would swamp the f64 comparison and is not a convention);
- softmax in f64 (HF eager attention upcasts to f32 only, which for an f64 model is again rounding).
"""
import base64
import os
import sys
import math
import struct

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_rope import default_inv_freq, llama3_inv_freq  # noqa: E402

torch.manual_seed(0)
f64 = torch.float64
gen = torch.Generator().manual_seed(2024)


def b64(t):
    v = t.detach().to(f64).flatten().tolist()
    return base64.b64encode(struct.pack(f"<{len(v)}d", *v)).decode()


def qtensor(shape, lo, hi, scale, offset=0):
    """Uniform integers in [lo, hi] (+ offset) times a power-of-two scale."""
    q = torch.randint(lo, hi + 1, shape, generator=gen) + offset
    return q, q.to(f64) * scale


inputs = {}  # name -> (q, scale, shape)


def param(name, shape, lo, hi, scale, offset=0, grad=True):
    q, v = qtensor(shape, lo, hi, scale, offset)
    inputs[name] = {"shape": list(shape), "scale": scale, "q": q.flatten().tolist()}
    return v.requires_grad_(grad)


# ---------------------------------------------------------------- decoder layer
T, d, Hq, Hkv, D, I, V = 6, 32, 4, 2, 8, 48, 40
EPS = 1e-6
W = 2.0 ** -9  # linear weights in about ±0.18 like nn.Linear's U(±1/sqrt(32))
N = 2.0 ** -6  # norm weights near 1

x = param("x", (T, d), -64, 64, 2.0 ** -6)
w = {
    "input_norm": param("input_norm", (d,), -16, 16, N, offset=64),
    "q_proj.weight": param("q_proj.weight", (Hq * D, d), -90, 90, W),
    "q_proj.bias": param("q_proj.bias", (Hq * D,), -64, 64, W),
    "k_proj.weight": param("k_proj.weight", (Hkv * D, d), -90, 90, W),
    "k_proj.bias": param("k_proj.bias", (Hkv * D,), -64, 64, W),
    "v_proj.weight": param("v_proj.weight", (Hkv * D, d), -90, 90, W),
    "v_proj.bias": param("v_proj.bias", (Hkv * D,), -64, 64, W),
    "q_norm": param("q_norm", (D,), -16, 16, N, offset=64),
    "k_norm": param("k_norm", (D,), -16, 16, N, offset=64),
    "o_proj.weight": param("o_proj.weight", (d, Hq * D), -90, 90, W),
    "post_norm": param("post_norm", (d,), -16, 16, N, offset=64),
    "gate_proj.weight": param("gate_proj.weight", (I, d), -90, 90, W),
    "up_proj.weight": param("up_proj.weight", (I, d), -90, 90, W),
    "down_proj.weight": param("down_proj.weight", (d, I), -74, 74, W),
    "final_norm": param("final_norm", (d,), -16, 16, N, offset=64),
    "lm_head.weight": param("lm_head.weight", (V, d), -90, 90, W),
}
positions = torch.arange(100, 100 + T)
labels = torch.tensor([-100, 7, 23, -100, 39, 0])

# Llama-3 scaling with a small original_max so that head_dim 8's four frequencies fall in all three
# bands: wavelengths 2π·{1, 10, 100, 1000} against high 1024/4 = 256 and low 1024/1 = 1024.
rope_theta = 10000.0
rope_scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 1024}




inv_default = default_inv_freq(rope_theta, D)
inv_freq = llama3_inv_freq(rope_theta, D, rope_scaling)
wavelen = 2 * math.pi / inv_default
bands = ["high (kept)" if wl < 256 else "low (/factor)" if wl > 1024 else "medium (blended)" for wl in wavelen.tolist()]
assert sorted(set(bands)) == ["high (kept)", "low (/factor)", "medium (blended)"], bands

angle = (inv_freq[None, :] * positions.to(torch.float)[:, None]).to(f64)  # [T, D/2], f32-rounded
emb = torch.cat([angle, angle], dim=-1)
cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]  # [T, 1, D] broadcast over heads


def rotate_half(t):
    t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
    return torch.cat([-t2, t1], dim=-1)


def rms_norm(t, weight, eps=EPS):
    # HF LlamaRMSNorm / Qwen3RMSNorm
    return weight * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps))


def repeat_kv(t, n_rep):
    # [S, Hkv, D] -> [S, Hkv * n_rep, D]: query head h reads kv head h // n_rep
    return t[:, :, None, :].expand(t.shape[0], t.shape[1], n_rep, t.shape[2]).reshape(t.shape[0], -1, t.shape[2])


def decoder(x, w):
    h = rms_norm(x, w["input_norm"])
    q = F.linear(h, w["q_proj.weight"], w["q_proj.bias"]).view(T, Hq, D)
    k = F.linear(h, w["k_proj.weight"], w["k_proj.bias"]).view(T, Hkv, D)
    v = F.linear(h, w["v_proj.weight"], w["v_proj.bias"]).view(T, Hkv, D)
    q, k = rms_norm(q, w["q_norm"]), rms_norm(k, w["k_norm"])  # Qwen3: per head, before RoPE
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    k, v = repeat_kv(k, Hq // Hkv), repeat_kv(v, Hq // Hkv)
    scores = torch.einsum("thd,shd->hts", q, k) * D ** -0.5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    o = torch.einsum("hts,shd->thd", p, v).reshape(T, Hq * D)
    x = x + F.linear(o, w["o_proj.weight"])
    h = rms_norm(x, w["post_norm"])
    mlp = F.linear(F.silu(F.linear(h, w["gate_proj.weight"])) * F.linear(h, w["up_proj.weight"]), w["down_proj.weight"])
    x = x + mlp
    hidden = rms_norm(x, w["final_norm"])
    logits = F.linear(hidden, w["lm_head.weight"])
    # HF ForCausalLMLoss: pad labels with -100 and shift left, mean over labelled rows
    shift = F.pad(labels, (0, 1), value=-100)[1:]
    loss = F.cross_entropy(logits, shift, ignore_index=-100)
    return hidden, logits, loss


hidden, logits, loss = decoder(x, w)
loss.backward()
decoder_out = {
    "dims": {"T": T, "d": d, "Hq": Hq, "Hkv": Hkv, "head_dim": D, "intermediate": I, "vocab": V, "rms_eps": EPS},
    "rope": {"theta": rope_theta, "scaling": rope_scaling, "bands": bands,
             "inv_freq_default_f32": inv_default.tolist(), "inv_freq_f32": inv_freq.tolist()},
    "positions": positions.tolist(),
    "labels": labels.tolist(),
    "hidden": b64(hidden), "logits": b64(logits), "loss": loss.item(),
    "grads": {"x": b64(x.grad), **{k: b64(p.grad) for k, p in w.items()}},
}
decoder_inputs = dict(inputs)

# ---------------------------------------------------------------- inner RecursiveLink (ln_res_adapter)
inputs.clear()
R, dl = 5, 32
h = param("h", (R, dl), -96, 96, 2.0 ** -5)
target = param("target", (R, dl), -96, 96, 2.0 ** -5, grad=False)
lw = {
    "pre_ln.weight": param("pre_ln.weight", (dl,), -16, 16, N, offset=64),
    "pre_ln.bias": param("pre_ln.bias", (dl,), -16, 16, N),
    "proj1.weight": param("proj1.weight", (dl, dl), -90, 90, W),
    "proj1.bias": param("proj1.bias", (dl,), -90, 90, W),
    "proj2.weight": param("proj2.weight", (dl, dl), -90, 90, W),
    "proj2.bias": param("proj2.bias", (dl,), -90, 90, W),
    "post_ln.weight": param("post_ln.weight", (dl,), -16, 16, N, offset=64),
    "post_ln.bias": param("post_ln.bias", (dl,), -16, 16, N),
}
mask = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0], dtype=f64)


def link(x, p):
    ln = lambda t, k: F.layer_norm(t, (dl,), p[f"{k}.weight"], p[f"{k}.bias"], eps=1e-5)
    mid = F.gelu(F.linear(ln(x, "pre_ln"), p["proj1.weight"], p["proj1.bias"]))  # exact erf GELU
    return ln(x + F.linear(mid, p["proj2.weight"], p["proj2.bias"]), "post_ln")


y = link(h, lw)
link_loss = ((1 - F.cosine_similarity(y, target, dim=-1)) * mask).sum() / mask.sum()
link_loss.backward()
link_out = {
    "rows": R, "d": dl, "ln_eps": 1e-5, "mask": mask.tolist(),
    "y": b64(y), "loss": link_loss.item(),
    "grads": {"h": b64(h.grad), **{k: b64(p.grad) for k, p in lw.items()}},
}

out = {
    "torch": torch.__version__,
    "decoder": {"inputs": decoder_inputs, **decoder_out},
    "link": {"inputs": dict(inputs), **link_out},
}


def dump(o, ind=0):
    """JSON with one key per line and arrays/leaves on one line (readable diffs)."""
    import json
    if isinstance(o, dict) and ind < 3:
        pad = " " * (ind + 1)
        items = [f"{pad}{json.dumps(k)}: {dump(v, ind + 1)}" for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * ind + "}"
    return json.dumps(o, separators=(",", ":"))


print(dump(out))
