#!/usr/bin/python3
"""The PyTorch CPU peer of `npm run bench:realsize`: greedy decoding of a Hugging Face model folder (config.json +
model.safetensors) with a KV cache, in float32 from the checkpoint's bf16/f16/f32 weights, as upstream's `--device cpu`
runs a model through transformers' eager path. Debian's torch 1.13 has no transformers package, so the decoder is
written here from modeling_llama / modeling_qwen3 / modeling_gemma3 / modeling_qwen3_5 (the conventions of
scripts/golden/tiny_models.py, whose float64 forwards the engine's goldens come from): Llama 3 (scaled RoPE), Qwen3
(per-head q/k norms), Gemma 3 (sliding and global layers, (1 + w) norms, sandwich norms, gelu_tanh, the embedding
scale), Qwen3.5's text decoder (Gated DeltaNet layers carrying their conv rows and state from step to step, gated
attention layers with partial RoPE, (1 + w) norms).

Run:
    /usr/bin/python3 scripts/peer/torch_decode.py MODEL_DIR --ids 1,2,3 --new 8 [--threads N]
prints one JSON object: the generated ids (greedy, EOS ignored), load_s, prefill_s (the prompt's forward and the first
id), decode_s (the ids after it), their tokens/s, threads, torch's version.
"""
import argparse
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
from hf_rope import default_inv_freq, llama3_inv_freq  # noqa: E402


def read_weights(path):
    """The safetensors file as float32 tensors (bf16 bits placed in the high half of an f32: exact)."""
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[a:b]
        if info["dtype"] == "BF16":
            arr = (buf.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] == "F16":
            arr = buf.view("<f2").astype(np.float32)
        elif info["dtype"] == "F32":
            arr = np.array(buf.view("<f4"))
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        out[name] = torch.from_numpy(arr.reshape(info["shape"]))
    return out


def rms_norm(t, weight, eps):
    return weight * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat([-t[..., h:], t[..., :h]], dim=-1)


class Decoder:
    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w
        self.type = cfg["model_type"]
        if self.type not in ("llama", "qwen3", "gemma3", "gemma3_text", "qwen3_5_text"):
            raise SystemExit(f"torch_decode.py: model_type {self.type} is not written here (llama, qwen3, gemma3, qwen3_5_text)")
        self.gemma = self.type.startswith("gemma3")
        self.qwen35 = self.type == "qwen3_5_text"
        self.L = cfg["num_hidden_layers"]
        self.Hq, self.Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.D = cfg.get("head_dim") or cfg["hidden_size"] // self.Hq
        self.eps = cfg["rms_norm_eps"]
        scaling = cfg.get("rope_scaling")
        if self.qwen35:
            rope = cfg["rope_parameters"]
            self.rotary = int(self.D * rope["partial_rotary_factor"])
            self.inv_global = default_inv_freq(rope["rope_theta"], self.rotary)
            interval = cfg.get("full_attention_interval", 4)
            self.types = cfg.get("layer_types") or ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                                                    for i in range(self.L)]
            self.sliding = [False] * self.L
            self.window = None
            self.scale = self.D ** -0.5
        elif self.gemma:
            self.inv_global = default_inv_freq(cfg["rope_theta"], self.D)
            if scaling:
                self.inv_global = self.inv_global / scaling["factor"]
            self.inv_local = default_inv_freq(cfg["rope_local_base_freq"], self.D)
            pattern = cfg.get("sliding_window_pattern", 6)
            self.sliding = [bool((i + 1) % pattern) for i in range(self.L)]
            self.window = cfg["sliding_window"]
            self.scale = cfg["query_pre_attn_scalar"] ** -0.5
        else:
            kind = scaling and scaling.get("rope_type", scaling.get("type"))
            self.inv_global = llama3_inv_freq(cfg["rope_theta"], self.D, scaling) if kind == "llama3" else \
                default_inv_freq(cfg["rope_theta"], self.D)
            self.sliding = [False] * self.L
            self.window = None
            self.scale = self.D ** -0.5
        self.inv_global = self.inv_global.float()
        if self.gemma:
            self.inv_local = self.inv_local.float()
        tied = cfg.get("tie_word_embeddings", True)
        self.head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
        self.cache = [None] * self.L

    def norm(self, t, weight):
        return rms_norm(t, 1.0 + weight if self.gemma or self.qwen35 else weight, self.eps)

    def rope(self, t, pos, inv):
        angle = pos[:, None].float() * inv[None, :]
        emb = torch.cat([angle, angle], dim=-1)
        return t * emb.cos()[:, None, :] + rotate_half(t) * emb.sin()[:, None, :]

    def attend(self, l, q, k, v, pos):
        """Causal GQA attention of q over layer l's cache with k and v appended (positions pos), within the window on a
        sliding layer: [T, Hq * D]."""
        if self.cache[l] is not None:
            k = torch.cat([self.cache[l][0], k])
            v = torch.cat([self.cache[l][1], v])
        self.cache[l] = (k, v)
        rep = self.Hq // self.Hkv
        scores = torch.einsum("thd,shd->hts", q, k.repeat_interleave(rep, dim=1)) * self.scale
        t_idx, s_idx = pos[:, None], torch.arange(k.shape[0])[None, :]
        mask = s_idx <= t_idx
        if self.sliding[l]:
            mask = mask & (t_idx - s_idx < self.window)
        scores = scores.masked_fill(~mask, float("-inf"))
        return torch.einsum("hts,shd->thd", torch.softmax(scores, dim=-1), v.repeat_interleave(rep, dim=1)).reshape(len(pos), -1)

    def qwen35_layer(self, l, x, pos):
        """One Qwen3.5 layer on T new tokens: a Gated DeltaNet carrying its last K - 1 conv rows and its state S from
        the previous call (zeros before the sequence), or gated attention on the KV cache; then the SwiGLU MLP."""
        w, cfg, T = self.w, self.cfg, x.shape[0]
        p = f"model.layers.{l}."
        h = self.norm(x, w[p + "input_layernorm.weight"])
        if self.types[l] == "linear_attention":
            a = p + "linear_attn."
            nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
            dk, dv, K = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"]
            mixed = F.linear(h, w[a + "in_proj_qkv.weight"])
            C = mixed.shape[1]
            rows, S = self.cache[l] or (torch.zeros(K - 1, C), torch.zeros(nv, dk, dv))
            seq = torch.cat([rows, mixed])
            conv = F.silu(F.conv1d(seq.t()[None], w[a + "conv1d.weight"], groups=C)[0].t())
            q = conv[:, : nk * dk].reshape(T, nk, dk)
            k = conv[:, nk * dk: 2 * nk * dk].reshape(T, nk, dk)
            v = conv[:, 2 * nk * dk:].reshape(T, nv, dv)
            l2 = lambda t: t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)  # noqa: E731
            q, k = l2(q) * dk ** -0.5, l2(k)
            q, k = q.repeat_interleave(nv // nk, dim=1), k.repeat_interleave(nv // nk, dim=1)
            beta = torch.sigmoid(F.linear(h, w[a + "in_proj_b.weight"]))
            g = -torch.exp(w[a + "A_log"]) * F.softplus(F.linear(h, w[a + "in_proj_a.weight"]) + w[a + "dt_bias"])
            outs = []
            for t in range(T):
                S = S * torch.exp(g[t])[:, None, None]
                delta = beta[t][:, None] * (v[t] - torch.einsum("hij,hi->hj", S, k[t]))
                S = S + k[t][:, :, None] * delta[:, None, :]
                outs.append(torch.einsum("hij,hi->hj", S, q[t]))
            self.cache[l] = (seq[-(K - 1):], S)
            z = F.linear(h, w[a + "in_proj_z.weight"]).view(T, nv, dv)
            y = rms_norm(torch.stack(outs), w[a + "norm.weight"], self.eps) * F.silu(z)
            x = x + F.linear(y.reshape(T, nv * dv), w[a + "out_proj.weight"])
        else:
            a = p + "self_attn."
            qg = F.linear(h, w[a + "q_proj.weight"]).view(T, self.Hq, 2 * self.D)
            q, gate = qg[..., : self.D], qg[..., self.D:].reshape(T, self.Hq * self.D)
            k = F.linear(h, w[a + "k_proj.weight"]).view(T, self.Hkv, self.D)
            v = F.linear(h, w[a + "v_proj.weight"]).view(T, self.Hkv, self.D)
            q, k = self.norm(q, w[a + "q_norm.weight"]), self.norm(k, w[a + "k_norm.weight"])
            R = self.rotary
            q = torch.cat([self.rope(q[..., :R], pos, self.inv_global), q[..., R:]], dim=-1)
            k = torch.cat([self.rope(k[..., :R], pos, self.inv_global), k[..., R:]], dim=-1)
            o = self.attend(l, q, k, v, pos)
            x = x + F.linear(o * torch.sigmoid(gate), w[a + "o_proj.weight"])
        m = p + "mlp."
        h = self.norm(x, w[p + "post_attention_layernorm.weight"])
        act = F.silu(F.linear(h, w[m + "gate_proj.weight"])) * F.linear(h, w[m + "up_proj.weight"])
        return x + F.linear(act, w[m + "down_proj.weight"])

    @torch.no_grad()
    def forward(self, ids, start):
        w, cfg = self.w, self.cfg
        T = len(ids)
        x = w["model.embed_tokens.weight"][torch.tensor(ids)]
        if self.gemma:
            x = x * torch.tensor(math.sqrt(cfg["hidden_size"]), dtype=torch.float32)
        pos = torch.arange(start, start + T)
        for l in range(self.L):
            p = f"model.layers.{l}."
            if self.qwen35:
                x = self.qwen35_layer(l, x, pos)
                continue
            a = p + "self_attn."
            h = self.norm(x, w[p + "input_layernorm.weight"])
            q = F.linear(h, w[a + "q_proj.weight"], w.get(a + "q_proj.bias")).view(T, self.Hq, self.D)
            k = F.linear(h, w[a + "k_proj.weight"], w.get(a + "k_proj.bias")).view(T, self.Hkv, self.D)
            v = F.linear(h, w[a + "v_proj.weight"], w.get(a + "v_proj.bias")).view(T, self.Hkv, self.D)
            if a + "q_norm.weight" in w:
                q, k = self.norm(q, w[a + "q_norm.weight"]), self.norm(k, w[a + "k_norm.weight"])
            inv = self.inv_local if self.sliding[l] else self.inv_global
            q, k = self.rope(q, pos, inv), self.rope(k, pos, inv)
            o = F.linear(self.attend(l, q, k, v, pos), w[a + "o_proj.weight"])
            m = p + "mlp."
            if self.gemma:
                x = x + self.norm(o, w[p + "post_attention_layernorm.weight"])
                h = self.norm(x, w[p + "pre_feedforward_layernorm.weight"])
                act = F.gelu(F.linear(h, w[m + "gate_proj.weight"]), approximate="tanh")
                x = x + self.norm(F.linear(act * F.linear(h, w[m + "up_proj.weight"]), w[m + "down_proj.weight"]),
                                  w[p + "post_feedforward_layernorm.weight"])
            else:
                x = x + o
                h = self.norm(x, w[p + "post_attention_layernorm.weight"])
                act = F.silu(F.linear(h, w[m + "gate_proj.weight"]))
                x = x + F.linear(act * F.linear(h, w[m + "up_proj.weight"]), w[m + "down_proj.weight"])
        hidden = self.norm(x[-1:], w["model.norm.weight"])
        logits = F.linear(hidden, self.head)[0]
        cap = cfg.get("final_logit_softcapping")
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--new", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--logits", action="store_true", help="also print the prompt's last-position logits")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    with open(os.path.join(a.model, "config.json")) as fh:
        cfg = json.load(fh)
    cfg = cfg.get("text_config", cfg) if cfg.get("model_type") == "gemma3" and "text_config" in cfg else cfg
    dec = Decoder(cfg, read_weights(os.path.join(a.model, "model.safetensors")))
    load_s = time.perf_counter() - t0
    ids = [int(x) for x in a.ids.split(",")]
    t1 = time.perf_counter()
    first = dec.forward(ids, 0)
    out = [int(torch.argmax(first))]
    t2 = time.perf_counter()
    for _ in range(a.new - 1):
        out.append(int(torch.argmax(dec.forward(out[-1:], len(ids) + len(out) - 1))))
    t3 = time.perf_counter()
    print(json.dumps({
        "ids": out, "load_s": load_s, "prefill_s": t2 - t1, "decode_s": t3 - t2,
        "prefill_tokens_per_s": len(ids) / (t2 - t1), "decode_tokens_per_s": (a.new - 1) / (t3 - t2) if a.new > 1 else None,
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **({"logits": first.tolist()} if a.logits else {}),
    }))


if __name__ == "__main__":
    main()
