"""A float32 PyTorch decoder with a KV cache in the interface transformers.js' decoder-only models run
(`onnx/model.onnx` of a Hugging Face repo exported by optimum), for scripts/peer/export_onnx.py:

    inputs   input_ids [B, T] i64, attention_mask [B, P+T] i64, position_ids [B, T] i64 (from 1 for Gemma 3,
             as transformers.js numbers them for that family),
             past_key_values.{i}.key / .value [B, Hkv, P, D] f32
    outputs  logits [B, T, V] f32, present.{i}.key / .value [B, Hkv, P+T, D] f32

The layer math is scripts/golden/tiny_models.py's forward (Hugging Face's modeling_llama / qwen2 / qwen3) and
gemma3_forward (modeling_gemma3's text decoder: (1 + w) norms, q/k norms, sandwich norms, gelu_tanh, the embedding
times a float32 sqrt(hidden), sliding layers with their own RoPE base), reused function by function, in float32 as
transformers runs it: RoPE angles and cos/sin in f32, RMSNorm and softmax in f32. What is new here is the cache and
the mask: a key is visible to a query when its position (cumsum of the attention mask, minus one) is at most the
query's position id and its mask entry is 1, and on a sliding layer less than sliding_window positions before it.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
from hf_rope import default_inv_freq, llama3_inv_freq  # noqa: E402
from tiny_models import rms_norm, rotate_half  # noqa: E402

FAMILIES = ("llama", "qwen2", "qwen3", "gemma3_text")


class UnsupportedPeerModel(ValueError):
    """A config this exporter does not cover; the message names the field and what is supported."""


def rope_inv_freq(cfg, head_dim):
    scaling = cfg.get("rope_scaling")
    kind = scaling and scaling.get("rope_type", scaling.get("type"))
    if kind == "llama3":
        return llama3_inv_freq(cfg["rope_theta"], head_dim, scaling)
    if kind == "linear":  # Gemma 3's global layers: HF _compute_linear_scaling_rope_parameters, f32
        return default_inv_freq(cfg["rope_theta"], head_dim) / scaling["factor"]
    if scaling:
        raise UnsupportedPeerModel(f"rope_scaling {scaling} is not supported (default, linear or llama3 only)")
    return default_inv_freq(cfg["rope_theta"], head_dim)


class CachedDecoder(torch.nn.Module):
    def __init__(self, cfg, weights):
        super().__init__()
        if cfg["model_type"] not in FAMILIES:
            raise UnsupportedPeerModel(f"model_type {cfg['model_type']!r}: the peer export covers {', '.join(FAMILIES)}")
        self.L = cfg["num_hidden_layers"]
        self.Hq, self.Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.D = cfg.get("head_dim") or cfg["hidden_size"] // self.Hq
        self.eps = cfg["rms_norm_eps"]
        self.gemma = cfg["model_type"] == "gemma3_text"
        self.qk_norm = cfg["model_type"] in ("qwen3", "gemma3_text")
        if self.gemma:
            pattern = cfg.get("sliding_window_pattern", 6)
            self.sliding = [bool((i + 1) % pattern) for i in range(self.L)]
            self.window = cfg["sliding_window"]
            self.scale = cfg["query_pre_attn_scalar"] ** -0.5
            self.embed_scale = cfg["hidden_size"] ** 0.5
            if cfg.get("attn_logit_softcapping") is not None:
                raise UnsupportedPeerModel("attn_logit_softcapping is not supported (Gemma 3 leaves it null)")
            self.cap = cfg.get("final_logit_softcapping")
        else:
            self.sliding = [False] * self.L
            self.scale = self.D ** -0.5
        # f32 copies; the bf16 checkpoint values are exact in f32. Buffers become ONNX initializers.
        self.names = {}
        for i, (name, t) in enumerate(sorted(weights.items())):
            key = f"w{i}"
            self.register_buffer(key, t.to(torch.float32).contiguous())
            self.names[name] = key
        tied = cfg.get("tie_word_embeddings", self.gemma) and "lm_head.weight" not in weights
        self.head = "model.embed_tokens.weight" if tied else "lm_head.weight"
        self.register_buffer("inv_freq", rope_inv_freq(cfg, self.D).to(torch.float32))
        if self.gemma:
            self.register_buffer("inv_local", default_inv_freq(cfg["rope_local_base_freq"], self.D).to(torch.float32))

    def w(self, name):
        return getattr(self, self.names[name]) if name in self.names else None

    def norm(self, t, name):
        """RMSNorm by the named weight; Gemma's scale is 1 + w, in f32 as Gemma3RMSNorm computes it."""
        return rms_norm(t, 1.0 + self.w(name) if self.gemma else self.w(name), self.eps)

    @staticmethod
    def rotation(position_ids, inv_freq):
        angle = position_ids.to(torch.float32)[:, :, None] * inv_freq[None, None, :]  # f32, as HF
        emb = torch.cat([angle, angle], dim=-1)
        return emb.cos()[:, None], emb.sin()[:, None]  # [B, 1, T, D]

    def forward(self, input_ids, attention_mask, position_ids, *past):
        B, T = input_ids.shape
        x = F.embedding(input_ids, self.w("model.embed_tokens.weight"))  # [B, T, d]
        if self.gemma:
            x = x * torch.tensor(self.embed_scale, dtype=torch.float32)
            # transformers.js numbers a Gemma 3 prompt's positions from 1 (create_position_ids' start_index)
            position_ids = position_ids - 1
        rot_global = self.rotation(position_ids, self.inv_freq)
        rot_local = self.rotation(position_ids, self.inv_local) if self.gemma else rot_global
        mask = attention_mask.to(torch.float32)
        key_pos = torch.cumsum(mask, dim=-1) - 1  # [B, S]
        query_pos = position_ids.to(torch.float32)
        visible = (key_pos[:, None, :] <= query_pos[:, :, None]) & (mask[:, None, :] > 0)  # [B, T, S]
        near = visible & (query_pos[:, :, None] - key_pos[:, None, :] < self.window) if self.gemma else visible
        visible, near = visible[:, None, None], near[:, None, None]  # [B, 1, 1, T, S] over (kv head, group, query, key)
        rep = self.Hq // self.Hkv
        present = []
        for l in range(self.L):
            p = f"model.layers.{l}."
            a = p + "self_attn."
            h = self.norm(x, p + "input_layernorm.weight")
            q = F.linear(h, self.w(a + "q_proj.weight"), self.w(a + "q_proj.bias")).view(B, T, self.Hq, self.D)
            k = F.linear(h, self.w(a + "k_proj.weight"), self.w(a + "k_proj.bias")).view(B, T, self.Hkv, self.D)
            v = F.linear(h, self.w(a + "v_proj.weight"), self.w(a + "v_proj.bias")).view(B, T, self.Hkv, self.D)
            if self.qk_norm:  # Qwen3, Gemma 3: per head, before RoPE
                q = self.norm(q, a + "q_norm.weight")
                k = self.norm(k, a + "k_norm.weight")
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, D]
            cos, sin = rot_local if self.sliding[l] else rot_global
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = torch.cat([past[2 * l], k], dim=2)
            v = torch.cat([past[2 * l + 1], v], dim=2)
            present += [k, v]
            # GQA by broadcasting: query head h reads kv head h // rep, as repeat_kv does
            qg = q.reshape(B, self.Hkv, rep, T, self.D)
            scores = torch.matmul(qg, k[:, :, None].transpose(-1, -2)) * self.scale  # [B, Hkv, rep, T, S]
            scores = scores.masked_fill(~(near if self.sliding[l] else visible), torch.finfo(torch.float32).min)
            o = torch.matmul(torch.softmax(scores, dim=-1), v[:, :, None])  # [B, Hkv, rep, T, D]
            o = o.reshape(B, self.Hq, T, self.D).transpose(1, 2).reshape(B, T, self.Hq * self.D)
            o = F.linear(o, self.w(a + "o_proj.weight"))
            m = p + "mlp."
            if self.gemma:
                x = x + self.norm(o, p + "post_attention_layernorm.weight")
                h = self.norm(x, p + "pre_feedforward_layernorm.weight")
                act = F.gelu(F.linear(h, self.w(m + "gate_proj.weight")), approximate="tanh")
                down = F.linear(act * F.linear(h, self.w(m + "up_proj.weight")), self.w(m + "down_proj.weight"))
                x = x + self.norm(down, p + "post_feedforward_layernorm.weight")
            else:
                x = x + o
                h = self.norm(x, p + "post_attention_layernorm.weight")
                act = F.silu(F.linear(h, self.w(m + "gate_proj.weight")))
                x = x + F.linear(act * F.linear(h, self.w(m + "up_proj.weight")), self.w(m + "down_proj.weight"))
        hidden = self.norm(x, "model.norm.weight")
        logits = F.linear(hidden, self.w(self.head))
        if self.gemma and self.cap is not None:
            logits = torch.tanh(logits / self.cap) * self.cap
        return (logits, *present)

    def positions(self, start, end):
        """position_ids [1, end - start] for the tokens start .. end - 1, numbered as transformers.js numbers them."""
        first = 1 if self.gemma else 0
        return torch.arange(start + first, end + first)[None]

    def empty_cache(self, batch=1):
        return [torch.zeros(batch, self.Hkv, 0, self.D) for _ in range(2 * self.L)]
