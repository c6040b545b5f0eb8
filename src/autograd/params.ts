/**
 * FlatParams: every trainable parameter of a module set in one f32 buffer with an offset table
 * (llm.c style), so that gradient gathering, clipping, AdamW and checkpointing are single passes.
 * Each parameter is a view of the buffer that requires grad; the tape accumulates its `.grad`, and
 * gatherGrads() copies those into the flat gradient buffer in place. The AdamW moments m and v and
 * the per-element weight-decay mask live here too, all on the parameters' backend. Only the values are
 * allocated up front: the gradient, moments and mask come with their first use, so a frozen module
 * (an inner link during outer training, every link at inference) holds one buffer, not five.
 *
 *   const fp = new FlatParams(backend, specs);
 *   ... tape.run(() => link(fp.get('proj1.weight'), ...)); await tape.backward(loss); tape.dispose();
 *   opt.gather(); const norm = opt.step(lr);   // F.AdamW (autograd/ops/optim.ts): gatherGrads -> clip -> adamw
 */
import { InvalidArgument } from '../errors';
import { assignKernel, fillKernel } from '../kernels/adamw';
import { type Backend, VIEW_ALIGN } from '../tensor/backend';
import type { Tensor } from '../tensor/tensor';

export interface ParamSpec {
  name: string;
  shape: readonly number[];
  /** Initial values, row-major, one per element. */
  init: ArrayLike<number>;
  /** Overrides the decay rule for this parameter. */
  decay?: boolean;
}

export interface ParamEntry {
  name: string;
  shape: readonly number[];
  /** First element in the flat buffers (a multiple of VIEW_ALIGN). */
  offset: number;
  numel: number;
  decay: boolean;
}

/** Which flat buffer export/import address. */
export type ParamPart = 'data' | 'grad' | 'm' | 'v';

/**
 * Upstream's two AdamW groups: matrices decay; biases and LayerNorm/RMSNorm parameters (rank 1, or
 * named `*bias`, `ln_*`, `*_ln`, `*norm*`) do not.
 */
export function defaultDecay(name: string, shape: readonly number[]): boolean {
  if (shape.length < 2 || /bias$/i.test(name)) return false;
  return !name.split('.').some((seg) => /norm/i.test(seg) || seg.split('_').some((tok) => tok.toLowerCase() === 'ln'));
}

const alignUp = (n: number) => Math.ceil(n / VIEW_ALIGN) * VIEW_ALIGN;
const numelOf = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

export class FlatParams {
  readonly entries: readonly ParamEntry[];
  /** Elements in each flat buffer, alignment padding included. */
  readonly size: number;
  readonly data: Tensor;
  private readonly views: Tensor[];
  private lazy: { grad?: Tensor; m?: Tensor; v?: Tensor; decayMask?: Tensor; gradViews?: Tensor[] } = {};
  private readonly byName = new Map<string, number>();

  constructor(
    readonly backend: Backend,
    specs: readonly ParamSpec[],
    opts: { decay?: (name: string, shape: readonly number[]) => boolean } = {},
  ) {
    const rule = opts.decay ?? defaultDecay;
    let at = 0;
    const entries: ParamEntry[] = specs.map((s, i) => {
      if (this.byName.has(s.name)) throw new InvalidArgument(`FlatParams: parameter '${s.name}' is listed twice; names must be unique`);
      this.byName.set(s.name, i);
      const numel = numelOf(s.shape);
      if (s.init.length !== numel) {
        throw new InvalidArgument(`FlatParams: '${s.name}' has shape [${s.shape}] (${numel} elements) but ${s.init.length} initial values`);
      }
      const e = { name: s.name, shape: [...s.shape], offset: at, numel, decay: s.decay ?? rule(s.name, s.shape) };
      at = alignUp(at + numel);
      return e;
    });
    this.entries = entries;
    this.size = Math.max(at, 1);
    const init = new Float32Array(this.size);
    specs.forEach((s, i) => init.set(s.init, entries[i].offset));
    this.data = backend.fromValues(init, [this.size]);
    this.views = entries.map((e) => {
      const t = this.data.view(e.offset, e.shape);
      t.requiresGrad = true;
      return t;
    });
  }

  /** The flat gradient buffer (zeros when first used). */
  get grad(): Tensor {
    return (this.lazy.grad ??= this.backend.zeros([this.size]));
  }

  /** AdamW's first moment (zeros when first used). */
  get m(): Tensor {
    return (this.lazy.m ??= this.backend.zeros([this.size]));
  }

  /** AdamW's second moment (zeros when first used). */
  get v(): Tensor {
    return (this.lazy.v ??= this.backend.zeros([this.size]));
  }

  /** 1 where weight decay applies, 0 elsewhere (padding included). */
  get decayMask(): Tensor {
    if (!this.lazy.decayMask) {
      const mask = new Float32Array(this.size);
      for (const e of this.entries) if (e.decay) mask.fill(1, e.offset, e.offset + e.numel);
      this.lazy.decayMask = this.backend.fromValues(mask, [this.size]);
    }
    return this.lazy.decayMask;
  }

  /** Which of the buffers beyond the values exist yet (memory accounting, tests). */
  get allocated(): ('grad' | 'm' | 'v' | 'decayMask')[] {
    return (['grad', 'm', 'v', 'decayMask'] as const).filter((k) => this.lazy[k]);
  }

  private get gradViews(): Tensor[] {
    return (this.lazy.gradViews ??= this.entries.map((e) => this.grad.view(e.offset, e.shape)));
  }

  /** The trainable view of one parameter. */
  get(name: string): Tensor {
    const i = this.byName.get(name);
    if (i === undefined)
      throw new InvalidArgument(`FlatParams: no parameter '${name}'; known: ${this.entries.map((e) => e.name).join(', ')}`);
    return this.views[i];
  }

  /** Every parameter view, in the order of the specs. */
  list(): Tensor[] {
    return [...this.views];
  }

  /**
   * Moves each parameter's `.grad` into the flat gradient buffer (copy, or add with `accumulate`)
   * and disposes it. Parameters without a gradient get zeros unless accumulating.
   */
  gatherGrads({ accumulate = false } = {}) {
    this.views.forEach((p, i) => {
      if (p.grad) {
        this.backend.run(assignKernel, [this.gradViews[i], p.grad], { add: accumulate });
        p.grad.dispose();
        p.grad = null;
      } else if (!accumulate) {
        this.backend.run(fillKernel, [this.gradViews[i]], { value: 0 });
      }
    });
  }

  /** Zeroes the flat gradients and drops any per-parameter gradient not gathered yet. */
  zeroGrad() {
    for (const p of this.views) {
      p.grad?.dispose();
      p.grad = null;
    }
    if (this.lazy.grad) this.backend.run(fillKernel, [this.lazy.grad], { value: 0 });
  }

  /** Zeroes the AdamW moments (a fresh optimizer over the same parameters). */
  resetOptimizerState() {
    for (const t of [this.lazy.m, this.lazy.v]) if (t) this.backend.run(fillKernel, [t], { value: 0 });
  }

  private buffer(part: ParamPart): Tensor {
    return { data: this.data, grad: this.grad, m: this.m, v: this.v }[part];
  }

  /** Values per parameter name (one readback), for checkpoints. */
  async export(part: ParamPart = 'data'): Promise<Map<string, Float32Array>> {
    const all = await this.buffer(part).read();
    return new Map(this.entries.map((e) => [e.name, all.slice(e.offset, e.offset + e.numel)]));
  }

  /** One whole flat buffer (padding included), one readback: what a collective sends. */
  readFlat(part: ParamPart = 'data'): Promise<Float32Array> {
    return this.buffer(part).read();
  }

  /** Overwrites one whole flat buffer (padding included) with `values`, as readFlat gave them. */
  writeFlat(part: ParamPart, values: Float32Array) {
    if (values.length !== this.size)
      throw new InvalidArgument(`FlatParams.writeFlat: ${values.length} values for a buffer of ${this.size}`);
    const src = this.backend.fromValues(values, [this.size]);
    this.backend.run(assignKernel, [this.buffer(part), src], { add: false });
    src.dispose();
  }

  /**
   * Writes values per parameter name. Everything is validated before anything is written, so a bad
   * checkpoint leaves the parameters as they were. Missing names are an error unless `partial`.
   */
  import(values: ReadonlyMap<string, ArrayLike<number>>, { part = 'data', partial = false }: { part?: ParamPart; partial?: boolean } = {}) {
    for (const [name, v] of values) {
      const i = this.byName.get(name);
      if (i === undefined)
        throw new InvalidArgument(`FlatParams.import: unknown parameter '${name}'; known: ${this.entries.map((e) => e.name).join(', ')}`);
      const e = this.entries[i];
      if (v.length !== e.numel)
        throw new InvalidArgument(`FlatParams.import: '${name}' has ${v.length} values, expected ${e.numel} for shape [${e.shape}]`);
    }
    if (!partial) {
      const missing = this.entries.filter((e) => !values.has(e.name)).map((e) => e.name);
      if (missing.length)
        throw new InvalidArgument(`FlatParams.import: missing ${missing.join(', ')}; pass { partial: true } to load a subset`);
    }
    const target = this.buffer(part);
    for (const [name, v] of values) {
      const e = this.entries[this.byName.get(name)!];
      const src = this.backend.fromValues(v, e.shape);
      const dst = target.view(e.offset, e.shape);
      this.backend.run(assignKernel, [dst, src], { add: false });
      src.dispose();
      dst.dispose();
    }
  }

  dispose() {
    const { grad, m, v, decayMask, gradViews = [] } = this.lazy;
    for (const t of [...this.views, ...gradViews, this.data, grad, m, v, decayMask]) t?.dispose();
    this.lazy = {};
  }
}
