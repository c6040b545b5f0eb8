#!/usr/bin/python3
"""Golden ids path of Gemma 3 (token ids -> hidden states and logits) at hidden sizes whose square root is not exact in
bf16, for test/gemma3-golden.test.ts and test/gemma3-golden.gpu.test.ts.

Run (Debian's torch 1.13; no transformers or safetensors package needed):
    /usr/bin/python3 scripts/golden/gemma3_ids.py
writes test/golden/gemma3-ids.json.

Why its own golden: Gemma scales the embedding rows by sqrt(hidden). transformers loaded with dtype=float32 holds that
scale as a float32 tensor and multiplies in float32; an engine that rounds the scale (or the scaled rows) to the
checkpoint's bf16 moves every input by up to 2e-3 of itself, and the ids path by 2-5e-3 of the logit peak. A golden
can only see that when sqrt(hidden) is not a bf16 value: hidden 48 (sqrt 6.928..., bf16 6.9375) and 40 (6.3246...,
bf16 6.3125) here, 56 in models/tiny/gemma3-tiny (its golden is tiny_models.py's).

Two random models, seeded, with bf16-exact weights written into the JSON as bf16 bits:
- `text`: a text-only Gemma3ForCausalLM (model_type gemma3_text), tensors under model.*;
- `image-text`: the decoder of a Gemma3ForConditionalGeneration (model_type gemma3, the decoder under text_config,
  the rest from Gemma3TextConfig's defaults), tensors under model.language_model.* (transformers >= 4.52; the older
  language_model.model.* spelling is models/tiny/gemma3-tiny's); no vision tower, which the ids path never reads.
The forward is tiny_models.gemma3_forward (float64, from modeling_gemma3). Its input embeddings are the rows times
float32(sqrt(hidden)), the product kept in f64: transformers in float32 rounds that product to f32 too, which is
rounding (6e-8), not a convention. `bf16_rule` records how far the old rule (scale and product rounded to bf16) lands
from this golden, so that the test log can show the golden sees it.

Per case: `config` (config.json), `ids` (7 token ids, positions 0..6), `tensors` {name: {shape, bf16: base64 of the
little-endian bf16 bits}}, and base64 little-endian float64 row-major arrays
  embeds  [T, d]  the input embeddings of ids,
  hidden  [T, d]  post-final-norm hidden states,
  logits  [T, V]  every row.
"""
import base64
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from goldenjson import dump  # noqa: E402
from tiny_models import GEMMA3_DEFAULTS, ROOT, b64, gemma3_forward  # noqa: E402

f64 = torch.float64

LAYERS = dict(intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
              sliding_window=3, sliding_window_pattern=2, rope_scaling={"rope_type": "linear", "factor": 8}, vocab_size=64,
              max_position_embeddings=256)

CASES = {
    "text": {
        "seed": 35,
        "prefix": "model.",
        "ids": [2, 61, 17, 40, 5, 33, 58],
        "config": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 48, **LAYERS,
                   "query_pre_attn_scalar": 12, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rms_norm_eps": 1e-6,
                   "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None, "tie_word_embeddings": True,
                   "torch_dtype": "bfloat16"},
    },
    "image-text": {
        "seed": 36,
        "prefix": "model.language_model.",
        "ids": [2, 9, 50, 23, 63, 11, 47],
        "config": {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                   "text_config": {"model_type": "gemma3_text", "hidden_size": 40, **LAYERS, "query_pre_attn_scalar": 16},
                   "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8, "image_size": 8, "intermediate_size": 16,
                                     "num_attention_heads": 2, "num_hidden_layers": 1, "patch_size": 2},
                   "mm_tokens_per_image": 4, "torch_dtype": "bfloat16"},
    },
}


def text_config(cfg):
    """The decoder's config as modeling_gemma3 sees it (what parseDecoderConfig reads the same way)."""
    inner = cfg.get("text_config", cfg)
    return {**GEMMA3_DEFAULTS, **inner}


def random_weights(c, seed):
    """Engine-named bf16-exact tensors: embeddings std 1, projections 1/sqrt(fan_in), zero-centred norms std 0.2."""
    g = torch.Generator().manual_seed(seed)
    d, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    Hq, Hkv, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]

    def rand(shape, std):
        return (torch.randn(*shape, generator=g, dtype=f64) * std).to(torch.bfloat16).to(f64)

    def proj(out, inp):
        return rand((out, inp), inp ** -0.5)

    w = {"model.embed_tokens.weight": rand((V, d), 1.0)}
    for l in range(c["num_hidden_layers"]):
        p, a, m = f"model.layers.{l}.", f"model.layers.{l}.self_attn.", f"model.layers.{l}.mlp."
        w.update({
            a + "q_proj.weight": proj(Hq * D, d), a + "k_proj.weight": proj(Hkv * D, d), a + "v_proj.weight": proj(Hkv * D, d),
            a + "o_proj.weight": proj(d, Hq * D), a + "q_norm.weight": rand((D,), 0.2), a + "k_norm.weight": rand((D,), 0.2),
            m + "gate_proj.weight": proj(I, d), m + "up_proj.weight": proj(I, d), m + "down_proj.weight": proj(d, I),
        })
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            w[p + n + ".weight"] = rand((d,), 0.2)
    w["model.norm.weight"] = rand((d,), 0.2)
    return w


def bf16_b64(t):
    bits = (t.to(torch.float32).numpy().astype("<f4").view("<u4") >> 16).astype("<u2")
    return base64.b64encode(bits.tobytes()).decode()


def embeds(c, w, ids, rule):
    """Gemma3TextScaledWordEmbedding: rows times sqrt(hidden). 'f32': the float32 scale (transformers loaded in
    float32); 'bf16': scale and product rounded to bf16 (the old rule, kept only to measure what it costs)."""
    rows = w["model.embed_tokens.weight"][torch.tensor(ids)]
    if rule == "f32":
        return rows * torch.tensor(c["hidden_size"] ** 0.5, dtype=torch.float32).to(f64)
    scale = torch.tensor(c["hidden_size"] ** 0.5).to(torch.bfloat16)
    return (rows.to(torch.bfloat16) * scale).to(f64)


def scaled_error(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def main():
    out = {"torch": torch.__version__, "cases": {}}
    for name, case in CASES.items():
        c = text_config(case["config"])
        w = random_weights(c, case["seed"])
        with torch.no_grad():
            x = embeds(c, w, case["ids"], "f32")
            hidden, logits = gemma3_forward(c, w, x)
            x_old = embeds(c, w, case["ids"], "bf16")
            hidden_old, logits_old = gemma3_forward(c, w, x_old)
        old = {"embeds": scaled_error(x_old, x), "hidden": scaled_error(hidden_old, hidden), "logits": scaled_error(logits_old, logits)}
        stored = {case["prefix"] + n[len("model."):]: t for n, t in w.items()}
        out["cases"][name] = {
            "config": case["config"],
            "ids": case["ids"],
            "dims": {"T": len(case["ids"]), "hidden": c["hidden_size"], "vocab": c["vocab_size"]},
            "bf16_rule": old,
            "tensors": {n: {"shape": list(t.shape), "bf16": bf16_b64(t)} for n, t in stored.items()},
            "embeds": b64(x), "hidden": b64(hidden), "logits": b64(logits),
        }
        print(f"{name}: d={c['hidden_size']} sqrt={c['hidden_size'] ** 0.5:.6f} |logits|max={logits.abs().max():.3f}; "
              f"bf16 rule off by embeds {old['embeds']:.2e}, hidden {old['hidden']:.2e}, logits {old['logits']:.2e} of peak")
    path = os.path.join(ROOT, "test", "golden", "gemma3-ids.json")
    with open(path, "w") as fh:
        fh.write(dump(out) + "\n")
    print(path)


if __name__ == "__main__":
    main()
