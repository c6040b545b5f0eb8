import {
  type AttentionAttrs, attentionBackwardKVKernel, attentionBackwardQKernel, attentionKernel, attentionRowDotKernel, kvAppendKernel,
} from '../../kernels/attention';
import type { Tensor } from '../../tensor/tensor';
import { runOp, runOp1 } from './op';

export interface AttentionOptions {
  /** multiplies q·k; default 1/√D */
  scale?: number;
  /** sliding window in positions (a query sees itself and the window − 1 before it); default none */
  window?: number;
  /** valid rows of k and v when they are cache tensors [maxS, Hkv, D]; default S */
  kvLen?: number;
}

/**
 * Causal scaled-dot-product attention with grouped kv heads. q [T, Hq, D]; k, v [S, Hkv, D] whose first
 * kvLen rows are valid; query t sits at position kvLen − T + t, so prefill (kvLen = T), chunked prefill
 * and decode (T = 1 against a cache) are the same call. Returns [T, Hq, D].
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const attrs: AttentionAttrs = { scale: opts.scale, window: opts.window, kvLen: opts.kvLen };
  let saved = false;
  const [o, lse] = runOp(attentionKernel, [q, k, v], attrs, ([o, lse]) => {
    saved = true;
    return {
      saved: [lse],
      backward: ([g], [nq, nk, nv]) => {
        const ins = (di: Tensor) => [q, k, v, lse, di, g!];
        const di = runOp1(attentionRowDotKernel, [o, g!], attrs);
        const dq = nq ? runOp1(attentionBackwardQKernel, ins(di), attrs) : null;
        let dk: Tensor | null = null;
        let dv: Tensor | null = null;
        if (nk || nv) {
          [dk, dv] = runOp(attentionBackwardKVKernel, ins(di), attrs);
          if (!nk) dk = (dk.dispose(), null);
          if (!nv) dv = (dv.dispose(), null);
        }
        di.dispose();
        return [dq, dk, dv];
      },
    };
  });
  // Without a recording tape nobody needs the logsumexp.
  if (!saved) lse.dispose();
  return o;
}

/** Writes rows [T, Hkv, D] into cache [maxS, Hkv, D] at row `at`, in place (not differentiable). */
export function kvAppend(cache: Tensor, rows: Tensor, at: number): void {
  cache.backend.run(kvAppendKernel, [cache, rows], { at });
}
