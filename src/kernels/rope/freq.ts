/**
 * RoPE inverse frequencies, computed on the host in f64 and rounded once to f32, so that the CPU
 * reference and every GPU kernel rotate by identical frequencies. Mirrors Hugging Face's
 * modeling_rope_utils: `_compute_default_rope_parameters`, `_compute_linear_scaling_rope_parameters`
 * and `_compute_llama3_parameters` (HF evaluates in f32 torch ops; results agree to about 1 ulp).
 */
import { InvalidArgument } from '../../errors';

/** A model config's `rope_scaling` as it appears in config.json (`type` is the older spelling of `rope_type`). */
export interface RopeScaling {
  rope_type?: string;
  type?: string;
  factor?: number;
  low_freq_factor?: number;
  high_freq_factor?: number;
  original_max_position_embeddings?: number;
}

export interface RopeConfig {
  /** rope_theta (10000 for Llama 2, 500000 for Llama 3, 1000000 for Qwen3). */
  theta: number;
  headDim: number;
  /** Rotated dims per head; default trunc(headDim · partialRotaryFactor), HF's `dim`. */
  rotaryDim?: number;
  partialRotaryFactor?: number;
  /** config.json's rope_scaling; null/undefined or rope_type 'default' for none. */
  scaling?: RopeScaling | null;
}

/** rotaryDim / 2 frequencies: theta^(−2i/rotaryDim), then the configured scaling. */
export function ropeInvFreq(config: RopeConfig): Float32Array {
  const { theta, headDim } = config;
  const dim = config.rotaryDim ?? Math.trunc(headDim * (config.partialRotaryFactor ?? 1));
  if (!(theta > 0)) throw new InvalidArgument(`ropeInvFreq: rope_theta must be positive, got ${theta}`);
  if (!Number.isInteger(dim) || dim < 2 || dim % 2 || dim > headDim) {
    throw new InvalidArgument(`ropeInvFreq: the rotary dimension must be an even integer in [2, head_dim = ${headDim}], got ${dim}`);
  }
  const inv = Array.from({ length: dim / 2 }, (_, i) => 1 / theta ** ((2 * i) / dim));
  const s = config.scaling;
  const type = s ? s.rope_type ?? s.type ?? 'default' : 'default';
  const need = (k: keyof RopeScaling): number => {
    const v = s?.[k];
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      throw new InvalidArgument(`ropeInvFreq: rope_scaling of type '${type}' needs a numeric '${k}' (got ${JSON.stringify(v)})`);
    }
    return v;
  };
  switch (type) {
    case 'default':
      break;
    case 'linear': {
      const factor = need('factor');
      for (let i = 0; i < inv.length; i++) inv[i] /= factor;
      break;
    }
    case 'llama3': {
      const factor = need('factor');
      const low = need('low_freq_factor');
      const high = need('high_freq_factor');
      const oldLen = need('original_max_position_embeddings');
      if (!(high > low))
        throw new InvalidArgument(`ropeInvFreq: llama3 scaling needs high_freq_factor > low_freq_factor, got ${high} and ${low}`);
      const lowWavelen = oldLen / low;
      const highWavelen = oldLen / high;
      for (let i = 0; i < inv.length; i++) {
        const wavelen = (2 * Math.PI) / inv[i];
        if (wavelen > lowWavelen) inv[i] /= factor; // long wavelengths: interpolate fully
        else if (!(wavelen < highWavelen)) {
          // the band in between: blend smoothly from f/factor to f
          const smooth = (oldLen / wavelen - low) / (high - low);
          inv[i] = ((1 - smooth) * inv[i]) / factor + smooth * inv[i];
        }
      }
      break;
    }
    default:
      throw new InvalidArgument(
        `ropeInvFreq: rope_scaling type '${type}' is not supported (supported: default, linear, llama3); pick a model without it or add the scaling here`,
      );
  }
  return Float32Array.from(inv);
}
