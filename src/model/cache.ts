/**
 * The decoder's caches. A KVCache holds one sequence: per attention layer k and v [maxLen, Hkv, D] and a length; per
 * Gated DeltaNet layer the last K − 1 rows its conv saw and the delta rule's state. A BatchCache holds B sequences for
 * batched one-token steps (the fused path): each layer's k and v stacked in one tensor [B·stride, Hkv, D] (sequence b
 * from row b·stride), the DeltaNet's conv rows as rings [B·K, C] and its states [B·nv, dk, dv], a length per sequence.
 */
import { F } from '../autograd';
import { InvalidArgument } from '../errors';
import { VIEW_ALIGN } from '../tensor/backend';
import type { Backend } from '../tensor/backend';
import type { Tensor } from '../tensor/tensor';
import type { WebGpuBackend } from '../tensor/webgpu';
import type { DecoderConfig } from './config';

/** The dtype of k and v in a cache: f32, or f16 (half the memory and the bytes attention reads; WebGPU with shader-f16, and the CPU). */
export type KvDType = 'f32' | 'f16';

/**
 * The cache dtype a decoder starts with on `backend`: f16 on a WebGPU device with shader-f16 (half the bytes each
 * decode step's attention reads, values rounded to f16 as written), f32 elsewhere: the CPU backend is the f32
 * reference and CUDA keeps f32 caches. A decoder's `kvDtype` (the runner's --kv_dtype) overrides it.
 */
export function defaultKvDtype(backend: Backend): KvDType {
  return backend.kind === 'webgpu' && (backend as WebGpuBackend).ctx.hasFeature('shader-f16') ? 'f16' : 'f32';
}

export class KVCache {
  length = 0;
  /** Per Gated DeltaNet layer: the last K − 1 rows its conv saw [K − 1, channels]; null before the first forward. */
  readonly conv: (Tensor | null)[];
  /** Per Gated DeltaNet layer: the delta rule's state [valueHeads, keyDim, valueDim]; null before the first forward. */
  readonly ssm: (Tensor | null)[];
  /** The length at which the DeltaNet states were written (they cannot be rewound as k and v rows can). */
  stateLength = 0;

  /** `k` and `v` per layer ([maxLen, Hkv, D]; null for a Gated DeltaNet layer). */
  constructor(
    readonly k: (Tensor | null)[],
    readonly v: (Tensor | null)[],
    readonly maxLen: number,
  ) {
    this.conv = k.map(() => null);
    this.ssm = k.map(() => null);
  }

  /** Starts a new sequence; the buffers are reused (rows past `length` are never read), the DeltaNet states dropped. */
  reset() {
    this.length = 0;
    this.stateLength = 0;
    this.dropStates();
  }

  /** Replaces layer `l`'s DeltaNet states. */
  setStates(l: number, conv: Tensor, ssm: Tensor) {
    this.conv[l]?.dispose();
    this.ssm[l]?.dispose();
    this.conv[l] = conv;
    this.ssm[l] = ssm;
  }

  /** Layer `l`'s conv rows replaced and its delta-rule state kept (updated in place by the fused step). */
  advanceStates(l: number, conv: Tensor, ssm: Tensor) {
    if (this.conv[l] !== conv) this.conv[l]?.dispose();
    if (this.ssm[l] !== ssm) this.ssm[l]?.dispose();
    this.conv[l] = conv;
    this.ssm[l] = ssm;
  }

  private dropStates() {
    for (let l = 0; l < this.conv.length; l++) {
      this.conv[l]?.dispose();
      this.ssm[l]?.dispose();
      this.conv[l] = this.ssm[l] = null;
    }
  }

  dispose() {
    [...this.k, ...this.v].forEach((t) => t?.dispose());
    this.dropStates();
  }
}

/**
 * B sequences' caches in stacked tensors (see the file comment). A sequence is prefilled through rowCache(b), a
 * KVCache over its rows (the plain forward writes k and v there), then takeStates(b, …) moves its DeltaNet states in.
 */
export class BatchCache {
  /** Tokens cached per sequence. */
  readonly lengths: number[];

  constructor(
    readonly config: DecoderConfig,
    readonly backend: Backend,
    /** Sequences. */
    readonly rows: number,
    /** Positions one sequence may hold. */
    readonly maxLen: number,
    /** Rows of the stacked k/v between two sequences: maxLen rounded up so that each sequence's rows can be a view. */
    readonly stride: number,
    readonly k: (Tensor | null)[],
    readonly v: (Tensor | null)[],
    readonly conv: (Tensor | null)[],
    readonly ssm: (Tensor | null)[],
  ) {
    this.lengths = new Array<number>(rows).fill(0);
  }

  static create(config: DecoderConfig, backend: Backend, rows: number, maxLen: number, kvDtype: KvDType = 'f32'): BatchCache {
    if (!Number.isInteger(rows) || rows < 1) throw new InvalidArgument(`batch cache: rows must be a positive integer, got ${rows}`);
    if (!Number.isInteger(maxLen) || maxLen < 1) throw new InvalidArgument(`batch cache: maxLen must be a positive integer, got ${maxLen}`);
    const { layers, kvHeads, headDim, linearLayers, deltaNet: d } = config;
    const per = kvHeads * headDim;
    // a view of sequence b starts at element b·stride·per, which must sit at a multiple of 256 bytes (VIEW_ALIGN f32)
    const align = kvDtype === 'f16' ? 2 * VIEW_ALIGN : VIEW_ALIGN;
    let stride = maxLen;
    while ((stride * per) % align !== 0) stride++;
    const kv = () =>
      Array.from({ length: layers }, (_, l) => (linearLayers[l] ? null : backend.zeros([rows * stride, kvHeads, headDim], kvDtype)));
    const C = d ? 2 * d.keyHeads * d.keyDim + d.valueHeads * d.valueDim : 0;
    const conv = Array.from({ length: layers }, (_, l) => (linearLayers[l] && d ? backend.zeros([rows * d.convKernel, C]) : null));
    const ssm = Array.from({ length: layers }, (_, l) =>
      linearLayers[l] && d ? backend.zeros([rows * d.valueHeads, d.keyDim, d.valueDim]) : null,
    );
    return new BatchCache(config, backend, rows, maxLen, stride, kv(), kv(), conv, ssm);
  }

  private checkRow(b: number) {
    if (!Number.isInteger(b) || b < 0 || b >= this.rows)
      throw new InvalidArgument(`batch cache: sequence ${b} is not one of its ${this.rows}`);
  }

  /** Sequence b's k/v rows as a KVCache (views: what the plain forward writes there lands here), empty DeltaNet states. */
  rowCache(b: number): KVCache {
    this.checkRow(b);
    const { kvHeads, headDim } = this.config;
    const view = (t: Tensor | null) =>
      t ? this.backend.view(t, b * this.stride * kvHeads * headDim, [this.maxLen, kvHeads, headDim]) : null;
    const c = new KVCache(this.k.map(view), this.v.map(view), this.maxLen);
    c.length = c.stateLength = this.lengths[b];
    return c;
  }

  /**
   * After a prefill through rowCache(b): its DeltaNet states go into the rings and stacked states (conv row j, position
   * length − K + 1 + j, into slot (length + 1 + j) mod K), and sequence b's length becomes the row cache's.
   */
  takeStates(b: number, row: KVCache) {
    this.checkRow(b);
    const d = this.config.deltaNet;
    const len = row.length;
    if (len > this.maxLen) throw new InvalidArgument(`batch cache: sequence ${b} holds ${len} positions, more than ${this.maxLen}`);
    for (let l = 0; l < this.config.layers; l++) {
      if (!this.conv[l] || !d) continue;
      const K = d.convKernel;
      const C = this.conv[l]!.shape[1];
      const conv = row.conv[l];
      const ssm = row.ssm[l];
      if (!conv || !ssm) throw new InvalidArgument(`batch cache: sequence ${b} was not prefilled (layer ${l} has no DeltaNet state)`);
      const rings = this.conv[l]!.reshape([this.rows * K, 1, C]);
      for (let j = 0; j < K - 1; j++) {
        const r = F.sliceRows(conv, j, 1);
        F.kvAppend(rings, r.reshape([1, 1, C]), b * K + ((len + 1 + j) % K));
        r.dispose();
      }
      rings.dispose();
      const n = d.keyDim * d.valueDim;
      const states = this.ssm[l]!.reshape([this.rows * d.valueHeads, 1, n]);
      const own = ssm.reshape([d.valueHeads, 1, n]);
      F.kvAppend(states, own, b * d.valueHeads);
      [states, own].forEach((t) => t.dispose());
    }
    this.lengths[b] = len;
  }

  dispose() {
    [...this.k, ...this.v, ...this.conv, ...this.ssm].forEach((t) => t?.dispose());
  }
}
