#!/usr/bin/python3
"""Golden forward and input gradient of the committed tiny models (models/tiny/*) for test/tiny-golden.gpu.test.ts.

Run (Debian's torch 1.13; no transformers or safetensors package needed):
    /usr/bin/python3 scripts/golden/tiny_models.py
writes test/golden/tiny-{qwen3,llama,qwen2,mistral,gemma3,qwen3_5,qwen3_5-tied}-tiny.json.

An independent float64 forward written from Hugging Face's modeling_llama / modeling_qwen2 / modeling_qwen3 /
modeling_mistral (transformers 4.51): RMSNorm, q/k/v projections (+ bias for qwen2), Qwen3's per-head q/k RMSNorm before RoPE,
rotate_half RoPE (default or Llama-3 scaled inv_freq, reimplemented from `_compute_llama3_parameters`), GQA
repeat_kv, causal softmax attention (Mistral's sliding window: a query sees the last sliding_window keys), o_proj, SwiGLU MLP,
final norm, tied or untied lm_head. The checkpoint is read by hand (header length, JSON header, bf16 bits placed in the high
half of an f32), so bf16 weights are exact in f64.

Deliberate numerical choices (as in scripts/golden/decoder.py):
- inv_freq is computed with f32 torch ops as HF does, and the angle pos * inv_freq is rounded to f32 like
  HF's f32 `inv_freq @ position_ids`; cos/sin of that f32 angle are taken in f64 (HF takes them in f32, a
  rounding that is not a convention);
- RMSNorm and softmax stay in f64 (HF upcasts to f32 only, which for an f64 model is again rounding).

Gemma 3 (gemma3_forward) from modeling_gemma3 (transformers 4.50), its inputs_embeds the embedding rows times the
float32 sqrt(hidden) (gemma3_inputs; no bf16 rounding, as transformers loaded in float32).

Qwen3.5 (qwen3_5_forward) from modeling_qwen3_5: Gated DeltaNet layers run the delta rule as the plain recurrence
(transformers' torch_recurrent_gated_delta_rule, which its chunked prefill equals up to rounding), written here with
torch ops over the whole state so that autograd gives the input gradient; gated attention layers with partial RoPE.

Per model: `ids` (7 token ids, positions 0..6), `inputs_embeds` = the model's input embeddings of those ids
(the embedding rows; Gemma 3's scaled rows) (requires grad), and
  hidden  [T, d]  post-final-norm hidden states,
  logits  [T, V]  every row,
  grad    [T, d]  dL/d inputs_embeds of L = sum(hidden * R) + sum(logits[:, :16] * R2) with
                  R[t, j]  = sin(0.37 * (t * d + j) + 0.1)     (flat index over [T, d])
                  R2[t, j] = cos(0.23 * (t * 16 + j))          (flat index over [T, 16])
Arrays are base64 of little-endian float64, row-major; `loss` is L.
"""
import base64
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from goldenjson import dump  # noqa: E402
from hf_rope import default_inv_freq, llama3_inv_freq  # noqa: E402

f64 = torch.float64
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LOGIT_COLS = 16

IDS = {
    "qwen3-tiny": [456, 17, 203, 98, 311, 5, 460],
    "llama-tiny": [456, 42, 7, 399, 128, 250, 13],
    "qwen2-tiny": [3, 77, 458, 160, 91, 222, 300],
    "mistral-tiny": [456, 12, 345, 67, 89, 401, 23],
    "gemma3-tiny": [456, 33, 210, 99, 5, 377, 141],
    "qwen3_5-tiny": [456, 61, 302, 14, 188, 77, 420],
    "qwen3_5-tied-tiny": [456, 120, 9, 333, 57, 264, 402],
}

# Gemma3TextConfig's defaults (transformers 4.50), for what a released text_config leaves out
GEMMA3_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None, "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "sliding_window_pattern": 6, "final_logit_softcapping": None, "tie_word_embeddings": True,
}
GEMMA3_PREFIX = "language_model."
QWEN3_5_PREFIX = "model.language_model."


def b64(t):
    v = t.detach().to(f64).flatten().tolist()
    return base64.b64encode(struct.pack(f"<{len(v)}d", *v)).decode()


def read_safetensors(path):
    with open(path, "rb") as fh:
        raw = fh.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = data[a:b]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] == "F32":
            arr = np.frombuffer(buf, dtype="<f4")
        elif info["dtype"] == "F16":
            arr = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        out[name] = torch.from_numpy(arr.astype(np.float64).reshape(info["shape"]))
    return out




def rotate_half(t):
    t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
    return torch.cat([-t2, t1], dim=-1)


def rms_norm(t, weight, eps):
    return weight * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps))


def repeat_kv(t, n_rep):
    # [S, Hkv, D] -> [S, Hkv * n_rep, D]: query head h reads kv head h // n_rep
    return t[:, :, None, :].expand(t.shape[0], t.shape[1], n_rep, t.shape[2]).reshape(t.shape[0], -1, t.shape[2])


def forward(cfg, w, x):
    T = x.shape[0]
    d = cfg["hidden_size"]
    Hq, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or d // Hq
    eps = cfg["rms_norm_eps"]
    scaling = cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
        inv_freq = llama3_inv_freq(cfg["rope_theta"], D, scaling)
    elif scaling:
        raise ValueError(f"unsupported rope_scaling {scaling}")
    else:
        inv_freq = default_inv_freq(cfg["rope_theta"], D)
    angle = (inv_freq[None, :] * torch.arange(T).to(torch.float)[:, None]).to(f64)  # f32-rounded, as HF
    emb = torch.cat([angle, angle], dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    qk_norm = cfg["model_type"] == "qwen3"
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    # Mistral: every layer sees only the last sliding_window keys, the query's own included (t - s < W)
    window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
    if window is not None:
        t_idx, s_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
        causal = causal & (t_idx - s_idx < window)

    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = F.linear(h, w[a + "q_proj.weight"], w.get(a + "q_proj.bias")).view(T, Hq, D)
        k = F.linear(h, w[a + "k_proj.weight"], w.get(a + "k_proj.bias")).view(T, Hkv, D)
        v = F.linear(h, w[a + "v_proj.weight"], w.get(a + "v_proj.bias")).view(T, Hkv, D)
        if qk_norm:  # Qwen3: per head, before RoPE
            q, k = rms_norm(q, w[a + "q_norm.weight"], eps), rms_norm(k, w[a + "k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, Hq // Hkv), repeat_kv(v, Hq // Hkv)
        scores = torch.einsum("thd,shd->hts", q, k) * D ** -0.5
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        o = torch.einsum("hts,shd->thd", probs, v).reshape(T, Hq * D)
        x = x + F.linear(o, w[a + "o_proj.weight"])
        m = p + "mlp."
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + F.linear(F.silu(F.linear(h, w[m + "gate_proj.weight"])) * F.linear(h, w[m + "up_proj.weight"]),
                         w[m + "down_proj.weight"])
    hidden = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return hidden, F.linear(hidden, head)


def gemma3_forward(cfg, w, x):
    """Gemma3ForCausalLM's text decoder in f64: (1 + w) RMSNorms, q/k norms before RoPE, the attention scale
    query_pre_attn_scalar ** -0.5, sliding layers (every layer but each sliding_window_pattern-th) that see the last
    sliding_window keys and rotate with rope_local_base_freq (unscaled), global layers with rope_theta and the
    rope scaling (linear: inv_freq / factor), the post-attention norm on the attention output, the MLP
    gelu_tanh(gate) * up between pre- and post-feedforward norms, the final norm, tied lm_head, optional
    final-logit soft-capping."""
    T = x.shape[0]
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    Hq, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    W = cfg["sliding_window"]
    sliding = [bool((i + 1) % cfg["sliding_window_pattern"]) for i in range(L)]

    def norm(t, weight):
        return rms_norm(t, 1.0 + weight, eps)

    def angles(inv_freq):
        angle = (inv_freq[None, :] * torch.arange(T).to(torch.float)[:, None]).to(f64)  # f32-rounded, as HF
        emb = torch.cat([angle, angle], dim=-1)
        return emb.cos()[:, None, :], emb.sin()[:, None, :]

    scaling = cfg.get("rope_scaling")
    inv_global = default_inv_freq(cfg["rope_theta"], D)
    if scaling:
        if scaling.get("rope_type", scaling.get("type")) != "linear":
            raise ValueError(f"unsupported rope_scaling {scaling}")
        inv_global = inv_global / scaling["factor"]  # HF _compute_linear_scaling_rope_parameters, f32
    rope_global = angles(inv_global)
    rope_local = angles(default_inv_freq(cfg["rope_local_base_freq"], D))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    t_idx, s_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
    window_mask = causal & (t_idx - s_idx < W)

    for l in range(L):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        h = norm(x, w[p + "input_layernorm.weight"])
        q = F.linear(h, w[a + "q_proj.weight"]).view(T, Hq, D)
        k = F.linear(h, w[a + "k_proj.weight"]).view(T, Hkv, D)
        v = F.linear(h, w[a + "v_proj.weight"]).view(T, Hkv, D)
        q, k = norm(q, w[a + "q_norm.weight"]), norm(k, w[a + "k_norm.weight"])
        cos, sin = rope_local if sliding[l] else rope_global
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, Hq // Hkv), repeat_kv(v, Hq // Hkv)
        scores = torch.einsum("thd,shd->hts", q, k) * cfg["query_pre_attn_scalar"] ** -0.5
        scores = scores.masked_fill(~(window_mask if sliding[l] else causal), float("-inf"))
        o = torch.einsum("hts,shd->thd", torch.softmax(scores, dim=-1), v).reshape(T, Hq * D)
        x = x + norm(F.linear(o, w[a + "o_proj.weight"]), w[p + "post_attention_layernorm.weight"])
        m = p + "mlp."
        h = norm(x, w[p + "pre_feedforward_layernorm.weight"])
        mlp = F.linear(F.gelu(F.linear(h, w[m + "gate_proj.weight"]), approximate="tanh") * F.linear(h, w[m + "up_proj.weight"]),
                       w[m + "down_proj.weight"])
        x = x + norm(mlp, w[p + "post_feedforward_layernorm.weight"])
    hidden = norm(x, w["model.norm.weight"])
    logits = F.linear(hidden, w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"])
    cap = cfg.get("final_logit_softcapping")
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return hidden, logits


def qwen3_5_forward(cfg, w, x):
    """Qwen3_5ForCausalLM's text decoder in f64. Zero-centred (1 + w) RMSNorms everywhere but the DeltaNet's gated
    norm (plain w). Layers of layer_types "linear_attention" are Gated DeltaNets: in_proj_qkv, a causal depthwise
    conv (kernel K, zeros before the sequence, w[:, 0, K-1] on the current token) and SiLU over q|k|v; q and k
    L2-normalised (x / sqrt(sum x^2 + 1e-6)), q times dk^-0.5; beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias);
    value head h reads key head h // (nv / nk); per head S <- exp(g) S, delta = beta (v - S^T k), S <- S + k delta^T,
    o = S^T q; then rms_norm(o) * w * silu(z) per value head and out_proj. "full_attention" layers: q_proj gives per
    head [query | gate], q/k norms before a rotate_half RoPE over the first partial_rotary_factor of head_dim,
    causal GQA attention, the output times sigmoid(gate) before o_proj. Dense SwiGLU MLP in every layer."""
    T = x.shape[0]
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    Hq, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, K = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"]
    rope = cfg["rope_parameters"]
    R = int(D * rope["partial_rotary_factor"])
    inv_freq = default_inv_freq(rope["rope_theta"], R)
    angle = (inv_freq[None, :] * torch.arange(T).to(torch.float)[:, None]).to(f64)  # f32-rounded, as HF
    emb = torch.cat([angle, angle], dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    causal = torch.ones(T, T, dtype=torch.bool).tril()

    def norm(t, weight):
        return rms_norm(t, 1.0 + weight, eps)

    def rot(t):
        r, rest = t[..., :R], t[..., R:]
        return torch.cat([r * cos + rotate_half(r) * sin, rest], dim=-1)

    def l2(t):
        return t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)

    # layer_types, else every full_attention_interval-th layer attends (Qwen3_5TextConfig's default 4)
    types = cfg.get("layer_types") or ["full_attention" if (i + 1) % cfg.get("full_attention_interval", 4) == 0 else "linear_attention"
                                       for i in range(L)]
    for l in range(L):
        p = f"model.layers.{l}."
        h = norm(x, w[p + "input_layernorm.weight"])
        if types[l] == "linear_attention":
            a = p + "linear_attn."
            mixed = F.linear(h, w[a + "in_proj_qkv.weight"])  # [T, C]
            C = mixed.shape[1]
            conv = F.conv1d(mixed.t()[None], w[a + "conv1d.weight"], groups=C, padding=K - 1)[0, :, :T].t()
            conv = F.silu(conv)
            q = conv[:, : nk * dk].reshape(T, nk, dk)
            k = conv[:, nk * dk: 2 * nk * dk].reshape(T, nk, dk)
            v = conv[:, 2 * nk * dk:].reshape(T, nv, dv)
            q, k = l2(q) * dk ** -0.5, l2(k)
            rep = nv // nk
            q, k = q.repeat_interleave(rep, dim=1), k.repeat_interleave(rep, dim=1)  # value head h -> key head h // rep
            beta = torch.sigmoid(F.linear(h, w[a + "in_proj_b.weight"]))
            g = -torch.exp(w[a + "A_log"]) * F.softplus(F.linear(h, w[a + "in_proj_a.weight"]) + w[a + "dt_bias"])
            S = torch.zeros(nv, dk, dv, dtype=f64)
            outs = []
            for t in range(T):
                S = S * torch.exp(g[t])[:, None, None]
                m = torch.einsum("hij,hi->hj", S, k[t])
                delta = beta[t][:, None] * (v[t] - m)
                S = S + k[t][:, :, None] * delta[:, None, :]
                outs.append(torch.einsum("hij,hi->hj", S, q[t]))
            o = torch.stack(outs)  # [T, nv, dv]
            z = F.linear(h, w[a + "in_proj_z.weight"]).view(T, nv, dv)
            y = rms_norm(o, w[a + "norm.weight"], eps) * F.silu(z)
            x = x + F.linear(y.reshape(T, nv * dv), w[a + "out_proj.weight"])
        else:
            a = p + "self_attn."
            qg = F.linear(h, w[a + "q_proj.weight"]).view(T, Hq, 2 * D)
            q, gate = qg[..., :D], qg[..., D:].reshape(T, Hq * D)
            k = F.linear(h, w[a + "k_proj.weight"]).view(T, Hkv, D)
            v = F.linear(h, w[a + "v_proj.weight"]).view(T, Hkv, D)
            q, k = rot(norm(q, w[a + "q_norm.weight"])), rot(norm(k, w[a + "k_norm.weight"]))
            k, v = repeat_kv(k, Hq // Hkv), repeat_kv(v, Hq // Hkv)
            scores = torch.einsum("thd,shd->hts", q, k) * D ** -0.5
            scores = scores.masked_fill(~causal, float("-inf"))
            o = torch.einsum("hts,shd->thd", torch.softmax(scores, dim=-1), v).reshape(T, Hq * D)
            x = x + F.linear(o * torch.sigmoid(gate), w[a + "o_proj.weight"])
        m = p + "mlp."
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        x = x + F.linear(F.silu(F.linear(h, w[m + "gate_proj.weight"])) * F.linear(h, w[m + "up_proj.weight"]), w[m + "down_proj.weight"])
    hidden = norm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return hidden, F.linear(hidden, head)


def gemma3_inputs(cfg, w, ids):
    """Gemma3TextScaledWordEmbedding as transformers loaded in float32 runs it: the rows times sqrt(hidden) as a float32
    scalar, nothing rounded to the checkpoint's bf16 (the product kept in f64; f32 would be rounding, not a convention)."""
    rows = w["model.embed_tokens.weight"][torch.tensor(ids)]
    return rows * torch.tensor(cfg["hidden_size"] ** 0.5, dtype=torch.float32).to(f64)


def seeds(T, d):
    R = torch.tensor([math.sin(0.37 * i + 0.1) for i in range(T * d)], dtype=f64).view(T, d)
    R2 = torch.tensor([math.cos(0.23 * i) for i in range(T * LOGIT_COLS)], dtype=f64).view(T, LOGIT_COLS)
    return R, R2


def main():
    for name, ids in IDS.items():
        folder = os.path.join(ROOT, "models", "tiny", name)
        with open(os.path.join(folder, "config.json")) as fh:
            cfg = json.load(fh)
        w = read_safetensors(os.path.join(folder, "model.safetensors"))
        if cfg["model_type"] == "gemma3":
            # the decoder's config and tensors inside the image-text checkpoint; the vision tower is left unread
            cfg = {**GEMMA3_DEFAULTS, **{k: cfg[k] for k in ("tie_word_embeddings",) if k in cfg}, **cfg["text_config"]}
            w = {n[len(GEMMA3_PREFIX):]: t for n, t in w.items() if n.startswith(GEMMA3_PREFIX)}
            x = gemma3_inputs(cfg, w, ids).clone().requires_grad_(True)
            hidden, logits = gemma3_forward(cfg, w, x)
        elif cfg["model_type"] == "qwen3_5":
            # the decoder under model.language_model.*, lm_head at the top; model.visual.* and mtp.* left unread
            cfg = {**cfg["text_config"], "tie_word_embeddings": cfg["tie_word_embeddings"]}
            w = {("model." + n[len(QWEN3_5_PREFIX):] if n.startswith(QWEN3_5_PREFIX) else n): t for n, t in w.items()
                 if n.startswith(QWEN3_5_PREFIX) or n == "lm_head.weight"}
            x = w["model.embed_tokens.weight"][torch.tensor(ids)].clone().requires_grad_(True)
            hidden, logits = qwen3_5_forward(cfg, w, x)
        else:
            x = w["model.embed_tokens.weight"][torch.tensor(ids)].clone().requires_grad_(True)
            hidden, logits = forward(cfg, w, x)
        if cfg.get("tie_word_embeddings") and "lm_head.weight" in w:
            raise ValueError(f"{name}: tied embeddings but the checkpoint has lm_head.weight")
        T, d = hidden.shape
        R, R2 = seeds(T, d)
        loss = (hidden * R).sum() + (logits[:, :LOGIT_COLS] * R2).sum()
        loss.backward()
        out = {
            "model": f"models/tiny/{name}",
            "ids": ids,
            "dims": {"T": T, "hidden": d, "vocab": logits.shape[1], "logit_cols": LOGIT_COLS},
            "seeds": {"R": "sin(0.37 * i + 0.1), i flat over [T, hidden]", "R2": "cos(0.23 * i), i flat over [T, logit_cols]"},
            "hidden": b64(hidden), "logits": b64(logits), "loss": loss.item(), "grad": b64(x.grad),
        }
        path = os.path.join(ROOT, "test", "golden", f"tiny-{name}.json")
        with open(path, "w") as fh:
            fh.write(dump(out) + "\n")
        print(f"{path}: T={T} d={d} V={logits.shape[1]} loss={loss.item():.6f} |hidden|max={hidden.abs().max():.3f} "
              f"|logits|max={logits.abs().max():.3f} |grad|max={x.grad.abs().max():.3e}")


if __name__ == "__main__":
    main()
