import { ropeKernel } from '../../kernels/rope';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

export { ropeInvFreq, type RopeConfig, type RopeScaling } from '../../kernels/rope';

export interface RopeOptions {
  /** Multiplies cos and sin: HF's attention_scaling (1 for default, linear and llama3 RoPE). */
  scale?: number;
}

/**
 * Rotary embedding in the half-split (GPT-NeoX / HF Llama, Qwen) layout.
 * - x: [tokens, heads, head_dim] f32 (fold a batch into tokens);
 * - positions: [tokens] i32, any values (e.g. pastLength + t while decoding);
 * - invFreq: ropeInvFreq(config), R/2 values for R ≤ head_dim rotated dims (the rest pass through).
 *   Pass a Tensor uploaded once per model; a Float32Array is uploaded on every call.
 * The gradient flows to x only (rotation by −θ).
 */
export function rope(x: Tensor, positions: Tensor, invFreq: Tensor | Float32Array, opts: RopeOptions = {}): Tensor {
  const scale = opts.scale ?? 1;
  const owned = invFreq instanceof Float32Array ? x.backend.fromValues(invFreq, [invFreq.length]) : null;
  const freq = owned ?? (invFreq as Tensor);
  let recorded = false;
  try {
    return runOp1(ropeKernel, [x, positions, freq], { inverse: false, scale }, () => {
      recorded = true;
      return {
        // the tape owns an uploaded frequency tensor from here on and disposes it with the tape
        saved: owned ? [owned] : [],
        backward: ([g]) => [runOp1(ropeKernel, [g!, positions, freq], { inverse: true, scale }), null, null],
      };
    });
  } finally {
    if (owned && !recorded) owned.dispose();
  }
}
