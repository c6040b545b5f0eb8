"""RoPE inverse frequencies as Hugging Face computes them (f32), shared by the golden scripts."""
import math

import torch


def default_inv_freq(base, dim):
    # HF _compute_default_rope_parameters (f32)
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))


def llama3_inv_freq(base, dim, s):
    # HF _compute_llama3_parameters, reimplemented (transformers is not installed); all f32
    inv_freq = default_inv_freq(base, dim)
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)
