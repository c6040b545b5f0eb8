/**
 * RecursiveLink modules (docs/method.md §2). The inner link maps an agent's last hidden state
 * to its next input embedding (d → d); the outer link carries latents from one agent into another's
 * embedding space (d_in → d_out). Both keep upstream's exact parameter names so that state dicts move
 * between this project and PyTorch unchanged, and both are written in F.* ops so that backward runs
 * through the tape on every backend.
 *
 * Variants follow upstream `train/model.py` (`Adapter`, `CrossModelAdapter`) as the spec describes them:
 * inner `linear_adapter` · `linear_res_adapter` · `adapter` · `res_adapter` · `ln_res_adapter` (released);
 * outer `outer_linear_adapter` · `outer_linear_res_adapter` · `outer_adapter` · `outer_res_adapter`
 * (hidden width d_out, no LN) · `outer_ln_adapter` (width 2·d_out, LNs, no residual) ·
 * `outer_ln_res_adapter` (released). Outer "residual" is always `residual_proj` (W3·x + b3), never an
 * identity, even when d_in == d_out.
 */
import { F, FlatParams, type ParamSpec, currentTape } from '../autograd';
import { fusedGemvKernel } from '../kernels/fused';
import { CorruptCheckpoint, InvalidArgument, ShapeMismatch } from '../errors';
import { Rng } from '../util/rng';
import type { Backend } from '../tensor/backend';
import type { Tensor } from '../tensor/tensor';

/** PyTorch nn.LayerNorm default eps, used by every link. */
export const LINK_LN_EPS = 1e-5;

/** One entry of a link state dict: row-major values with the PyTorch shape. */
export interface LinkTensor {
  shape: readonly number[];
  data: ArrayLike<number>;
}
export type LinkStateDict = ReadonlyMap<string, LinkTensor>;

interface Variant {
  /** A single `proj1` instead of proj1 → GELU → proj2. */
  linear: boolean;
  /** Inner: `x +` the branch. Outer: `+ residual_proj(x)`. */
  residual: boolean;
  /** Inner: pre_ln / post_ln. Outer: ln_source / ln_target and a 2·d_out hidden width. */
  ln: boolean;
}

const v = (linear: boolean, residual: boolean, ln: boolean): Variant => ({ linear, residual, ln });

export const INNER_LINK_TYPES = {
  linear_adapter: v(true, false, false),
  linear_res_adapter: v(true, true, false),
  adapter: v(false, false, false),
  res_adapter: v(false, true, false),
  ln_res_adapter: v(false, true, true),
} as const;
export const OUTER_LINK_TYPES = {
  outer_linear_adapter: v(true, false, false),
  outer_linear_res_adapter: v(true, true, false),
  outer_adapter: v(false, false, false),
  outer_res_adapter: v(false, true, false),
  outer_ln_adapter: v(false, false, true),
  outer_ln_res_adapter: v(false, true, true),
} as const;
export type InnerLinkType = keyof typeof INNER_LINK_TYPES;
export type OuterLinkType = keyof typeof OUTER_LINK_TYPES;

/** Upstream's `--adapter_type` aliases (INNER_/OUTER_ADAPTER_ALIASES). */
const INNER_ALIASES: Record<string, InnerLinkType> = {
  '1layer': 'linear_adapter',
  '1layer_res': 'linear_res_adapter',
  '2layer': 'adapter',
  '2layer_res': 'res_adapter',
  '2layer_ln_res': 'ln_res_adapter',
};
const OUTER_ALIASES: Record<string, OuterLinkType> = {
  '1layer': 'outer_linear_adapter',
  '1layer_res': 'outer_linear_res_adapter',
  '2layer': 'outer_adapter',
  '2layer_res': 'outer_res_adapter',
  '2layer_ln_res': 'outer_ln_res_adapter',
};

function resolveType<T extends string>(kind: string, name: string, types: Record<T, Variant>, aliases: Record<string, T>): T {
  const n = name.trim().toLowerCase();
  if (Object.hasOwn(types, n)) return n as T;
  if (Object.hasOwn(aliases, n)) return aliases[n];
  const known = [...Object.keys(types), ...Object.entries(aliases).map(([a, t]) => `${a} (= ${t})`)];
  throw new InvalidArgument(`unknown ${kind} link type '${name}'; known: ${known.join(', ')}`);
}
export const resolveInnerLinkType = (name: string) => resolveType('inner', name, INNER_LINK_TYPES, INNER_ALIASES);
export const resolveOuterLinkType = (name: string) => resolveType('outer', name, OUTER_LINK_TYPES, OUTER_ALIASES);

type Shapes = [name: string, shape: number[]][];

/** Parameter names and shapes of an inner link of width d, in upstream's table order. */
export function innerLinkShapes(type: InnerLinkType, d: number): Shapes {
  const t = INNER_LINK_TYPES[type];
  const s: Shapes = [];
  if (t.ln) s.push(['pre_ln.weight', [d]], ['pre_ln.bias', [d]]);
  s.push(['proj1.weight', [d, d]], ['proj1.bias', [d]]);
  if (!t.linear) s.push(['proj2.weight', [d, d]], ['proj2.bias', [d]]);
  if (t.ln) s.push(['post_ln.weight', [d]], ['post_ln.bias', [d]]);
  return s;
}

/** Parameter names and shapes of an outer link d_in → d_out (hidden 2·d_out for the LN variants). */
export function outerLinkShapes(type: OuterLinkType, dIn: number, dOut: number): Shapes {
  const t = OUTER_LINK_TYPES[type];
  const h = t.ln ? 2 * dOut : dOut;
  const s: Shapes = [];
  if (t.ln) s.push(['ln_source.weight', [dIn]], ['ln_source.bias', [dIn]]);
  if (t.linear) s.push(['proj1.weight', [dOut, dIn]], ['proj1.bias', [dOut]]);
  else s.push(['proj1.weight', [h, dIn]], ['proj1.bias', [h]], ['proj2.weight', [dOut, h]], ['proj2.bias', [dOut]]);
  if (t.residual) s.push(['residual_proj.weight', [dOut, dIn]], ['residual_proj.bias', [dOut]]);
  if (t.ln) s.push(['ln_target.weight', [dOut]], ['ln_target.bias', [dOut]]);
  return s;
}

const count = (s: Shapes) => s.reduce((n, [, shape]) => n + shape.reduce((a, b) => a * b, 1), 0);
/** Parameter counts without allocating (2d² + 6d for ln_res_adapter). */
export const innerLinkParamCount = (d: number, type: InnerLinkType = 'ln_res_adapter') => count(innerLinkShapes(type, d));
/** 3·d_in·d_out + 2·d_out² + 2·d_in + 6·d_out for outer_ln_res_adapter. */
export const outerLinkParamCount = (dIn: number, dOut: number, type: OuterLinkType = 'outer_ln_res_adapter') =>
  count(outerLinkShapes(type, dIn, dOut));

/**
 * PyTorch defaults: nn.Linear weight and bias ~ U(−1/√fan_in, 1/√fan_in) (kaiming_uniform with a = √5
 * reduces to this bound), LayerNorm γ = 1, β = 0. Values come from our Rng, so they match PyTorch's
 * distribution, not its random stream.
 */
function defaultInit(shapes: Shapes, fanIn: (name: string) => number, rng: Rng): ParamSpec[] {
  return shapes.map(([name, shape]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    if (/(^|\.)(pre_ln|post_ln|ln_source|ln_target)\./.test(name)) {
      return { name, shape, init: new Float32Array(n).fill(name.endsWith('.weight') ? 1 : 0) };
    }
    const bound = 1 / Math.sqrt(fanIn(name));
    return { name, shape, init: rng.uniforms(n, -bound, bound) };
  });
}

function checkDim(what: string, n: number) {
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgument(`${what} must be a positive integer, got ${n}`);
}

/**
 * Specs from a state dict, validated against the shapes the type implies: missing or extra keys are a
 * CorruptCheckpoint (a file of another link type, or a truncated one); a shape that disagrees is a
 * ShapeMismatch that names the link, the key and both sizes.
 */
function specsFromState(link: string, type: string, shapes: Shapes, state: LinkStateDict): ParamSpec[] {
  const want = new Set(shapes.map(([n]) => n));
  const missing = shapes.map(([n]) => n).filter((n) => !state.has(n));
  const extra = [...state.keys()].filter((n) => !want.has(n));
  if (missing.length || extra.length) {
    throw new CorruptCheckpoint(
      `link ${link} (${type}): state dict ` +
        [missing.length ? `lacks ${missing.join(', ')}` : '', extra.length ? `has unexpected ${extra.join(', ')}` : '']
          .filter(Boolean)
          .join(' and ') +
        `; expected exactly ${[...want].join(', ')}. If the file is another link type, pass that type.`,
    );
  }
  return shapes.map(([name, shape]) => {
    const t = state.get(name)!;
    if (t.shape.join() !== shape.join()) {
      throw new ShapeMismatch(`link ${link} (${type}): '${name}' has shape [${t.shape}] but the link's sizes need [${shape}]`);
    }
    const n = shape.reduce((a, b) => a * b, 1);
    if (t.data.length !== n)
      throw new CorruptCheckpoint(`link ${link}: '${name}' holds ${t.data.length} values for shape [${shape}] (${n})`);
    return { name, shape, init: t.data };
  });
}

function dimOf(link: string, state: LinkStateDict, keys: string[], axis: number): number {
  for (const k of keys) {
    const t = state.get(k);
    if (t && t.shape.length > axis) return t.shape[axis];
  }
  throw new CorruptCheckpoint(`link ${link}: cannot read its size: none of ${keys.join(', ')} is in the state dict`);
}

function expectDim(link: string, what: string, got: number, want: number | undefined) {
  if (want !== undefined && got !== want) {
    throw new ShapeMismatch(`link ${link}: its ${what} size is ${got} but the agent it connects has hidden size ${want}`);
  }
}

export interface LinkOptions {
  /** For messages (e.g. 'outer_12', 'planner inner'). */
  name?: string;
}

/** What the inner and outer links share: parameters, freezing, export. */
abstract class Link {
  abstract readonly dIn: number;
  abstract readonly dOut: number;
  constructor(
    readonly params: FlatParams,
    readonly type: string,
    readonly name: string,
  ) {}

  /** Total trainable elements (alignment padding excluded). */
  get numParams(): number {
    return this.params.entries.reduce((n, e) => n + e.numel, 0);
  }

  get backend(): Backend {
    return this.params.backend;
  }

  protected p(key: string): Tensor {
    return this.params.get(key);
  }

  protected checkInput(x: Tensor) {
    if (x.rank < 1 || x.shape[x.rank - 1] !== this.dIn) {
      throw new ShapeMismatch(
        `link ${this.name} (${this.type}) takes [T, ${this.dIn}], got [${x.shape}]: last size ${x.shape[x.rank - 1]} vs ${this.dIn}`,
      );
    }
  }

  /**
   * Parameters stop requiring gradients: the link still passes gradients through to its input (a
   * frozen inner link between trainable outer links, as in outer training), but gets none itself.
   */
  freeze(): this {
    for (const t of this.params.list()) t.requiresGrad = false;
    return this;
  }

  unfreeze(): this {
    for (const t of this.params.list()) t.requiresGrad = true;
    return this;
  }

  get frozen(): boolean {
    return this.params.list().every((t) => !t.requiresGrad);
  }

  /** Values under upstream's key names (f32), with their shapes. */
  async stateDict(): Promise<Map<string, LinkTensor & { data: Float32Array }>> {
    const values = await this.params.export();
    return new Map(this.params.entries.map((e) => [e.name, { shape: [...e.shape], data: values.get(e.name)! }]));
  }

  /** Overwrites the values from a state dict of the same type and sizes (validated first). */
  load(state: LinkStateDict) {
    const specs = specsFromState(this.name, this.type, this.params.entries.map((e) => [e.name, [...e.shape]]), state);
    this.params.import(new Map(specs.map((s) => [s.name, s.init])));
  }

  abstract forward(x: Tensor): Tensor;

  dispose() {
    this.params.dispose();
  }
}

export interface InnerLinkInit extends LinkOptions {
  type?: InnerLinkType | string;
  /** Seed of the default init's Rng (ignored when `rng` is given). */
  seed?: number;
  rng?: Rng;
}

/** Inner link d → d; `ln_res_adapter`: y = LN_post(x + W2·GELU(W1·LN_pre(x) + b1) + b2). */
export class InnerLink extends Link {
  readonly variant: Variant;
  declare readonly type: InnerLinkType;

  private constructor(
    params: FlatParams,
    type: InnerLinkType,
    name: string,
    readonly d: number,
  ) {
    super(params, type, name);
    this.variant = INNER_LINK_TYPES[type];
  }

  get dIn() {
    return this.d;
  }
  get dOut() {
    return this.d;
  }

  /** A freshly initialised link (PyTorch defaults) of width d. */
  static create(backend: Backend, d: number, opts: InnerLinkInit = {}): InnerLink {
    checkDim('inner link size d', d);
    const type = resolveInnerLinkType(opts.type ?? 'ln_res_adapter');
    const specs = defaultInit(innerLinkShapes(type, d), () => d, opts.rng ?? new Rng(opts.seed ?? 1));
    return new InnerLink(new FlatParams(backend, specs), type, opts.name ?? 'inner', d);
  }

  /**
   * A link from an upstream state dict. `d` (the agent's hidden size), when given, must match the file.
   * The type is not inferred: `adapter` and `res_adapter` have the same keys, so the caller passes the
   * type from adapter_config.json (default: the released `ln_res_adapter`).
   */
  static fromStateDict(backend: Backend, state: LinkStateDict, opts: LinkOptions & { type?: string; d?: number } = {}): InnerLink {
    const type = resolveInnerLinkType(opts.type ?? 'ln_res_adapter');
    const name = opts.name ?? 'inner';
    const d = dimOf(name, state, ['proj1.weight'], 1);
    expectDim(name, 'd', d, opts.d);
    const specs = specsFromState(name, type, innerLinkShapes(type, d), state);
    return new InnerLink(new FlatParams(backend, specs), type, name, d);
  }

  forward(x: Tensor): Tensor {
    this.checkInput(x);
    if (this.fusable(x)) return this.fusedForward(x);
    const { linear, residual, ln } = this.variant;
    const h = ln ? F.layerNorm(x, this.p('pre_ln.weight'), this.p('pre_ln.bias'), LINK_LN_EPS) : x;
    const a = F.linear(h, this.p('proj1.weight'), this.p('proj1.bias'));
    const branch = linear ? a : F.linear(F.gelu(a), this.p('proj2.weight'), this.p('proj2.bias'));
    const sum = residual ? F.add(x, branch) : branch;
    return ln ? F.layerNorm(sum, this.p('post_ln.weight'), this.p('post_ln.bias'), LINK_LN_EPS) : sum;
  }

  /**
   * Whether forward takes the fused path: nothing records, on WebGPU (where dispatches cost; `fusedSteps` off keeps
   * the plain ops, as the decoder's option does). Any number of rows: each row's result does not depend on the others
   * (a batch of latent steps gives each question what it gets alone).
   */
  fusable(x: Tensor): boolean {
    return this.fusedSteps && !currentTape() && x.rank === 2;
  }

  /** On by default on WebGPU. */
  fusedSteps = this.backend.kind === 'webgpu';

  /**
   * The same function in at most 3 dispatches: LN folded into the first product with its bias and GELU, the second
   * product with its bias and the residual, then the last LN (plain ops: up to 6).
   */
  fusedForward(x: Tensor): Tensor {
    const { linear, residual, ln } = this.variant;
    const b = this.backend;
    const pre = ln ? [this.p('pre_ln.weight'), this.p('pre_ln.bias')] : [];
    const norm = ln ? { kind: 'layer' as const, eps: LINK_LN_EPS } : undefined;
    const res = residual ? [x] : [];
    let sum: Tensor;
    if (linear) {
      [sum] = b.run(fusedGemvKernel, [x, ...pre, this.p('proj1.weight'), this.p('proj1.bias'), ...res], {
        norm,
        weights: 1,
        bias: true,
        residual,
      });
    } else {
      const [a] = b.run(fusedGemvKernel, [x, ...pre, this.p('proj1.weight'), this.p('proj1.bias')], {
        norm,
        weights: 1,
        bias: true,
        act: 'gelu',
      });
      [sum] = b.run(fusedGemvKernel, [a, this.p('proj2.weight'), this.p('proj2.bias'), ...res], { weights: 1, bias: true, residual });
      a.dispose();
    }
    if (!ln) return sum;
    const out = F.layerNorm(sum, this.p('post_ln.weight'), this.p('post_ln.bias'), LINK_LN_EPS);
    sum.dispose();
    return out;
  }
}

export interface OuterLinkInit extends LinkOptions {
  type?: OuterLinkType | string;
  seed?: number;
  rng?: Rng;
}

/** Outer link d_in → d_out; `outer_ln_res_adapter`: y = LN_tgt(W2·GELU(W1·LN_src(x) + b1) + b2 + W3·x + b3). */
export class OuterLink extends Link {
  readonly variant: Variant;
  declare readonly type: OuterLinkType;

  private constructor(
    params: FlatParams,
    type: OuterLinkType,
    name: string,
    readonly dIn: number,
    readonly dOut: number,
  ) {
    super(params, type, name);
    this.variant = OUTER_LINK_TYPES[type];
  }

  /** Width of the MLP branch: 2·d_out with the LNs, d_out without. */
  get hidden(): number {
    return this.variant.ln ? 2 * this.dOut : this.dOut;
  }

  static create(backend: Backend, dIn: number, dOut: number, opts: OuterLinkInit = {}): OuterLink {
    checkDim('outer link d_in', dIn);
    checkDim('outer link d_out', dOut);
    const type = resolveOuterLinkType(opts.type ?? 'outer_ln_res_adapter');
    const h = OUTER_LINK_TYPES[type].ln ? 2 * dOut : dOut;
    const fanIn = (n: string) => (n.startsWith('proj2.') ? h : dIn);
    const specs = defaultInit(outerLinkShapes(type, dIn, dOut), fanIn, opts.rng ?? new Rng(opts.seed ?? 1));
    return new OuterLink(new FlatParams(backend, specs), type, opts.name ?? 'outer', dIn, dOut);
  }

  /**
   * From an upstream state dict; `dIn` / `dOut` (the source and target agents' hidden sizes), when
   * given, must match. d_out is read like upstream's loader (first of proj2.bias, residual_proj.bias,
   * ln_target.weight, else proj1.bias of a linear variant), d_in from proj1.weight.
   */
  static fromStateDict(
    backend: Backend,
    state: LinkStateDict,
    opts: LinkOptions & { type?: string; dIn?: number; dOut?: number } = {},
  ): OuterLink {
    const type = resolveOuterLinkType(opts.type ?? 'outer_ln_res_adapter');
    const name = opts.name ?? 'outer';
    const dIn = dimOf(name, state, ['proj1.weight', 'residual_proj.weight', 'ln_source.weight'], 1);
    const dOut = dimOf(name, state, ['proj2.bias', 'residual_proj.bias', 'ln_target.weight', 'proj1.bias'], 0);
    expectDim(name, 'input (d_in)', dIn, opts.dIn);
    expectDim(name, 'output (d_out)', dOut, opts.dOut);
    const specs = specsFromState(name, type, outerLinkShapes(type, dIn, dOut), state);
    return new OuterLink(new FlatParams(backend, specs), type, name, dIn, dOut);
  }

  forward(x: Tensor): Tensor {
    this.checkInput(x);
    const { linear, residual, ln } = this.variant;
    const h = ln ? F.layerNorm(x, this.p('ln_source.weight'), this.p('ln_source.bias'), LINK_LN_EPS) : x;
    const a = F.linear(h, this.p('proj1.weight'), this.p('proj1.bias'));
    const branch = linear ? a : F.linear(F.gelu(a), this.p('proj2.weight'), this.p('proj2.bias'));
    const sum = residual ? F.add(branch, F.linear(x, this.p('residual_proj.weight'), this.p('residual_proj.bias'))) : branch;
    return ln ? F.layerNorm(sum, this.p('ln_target.weight'), this.p('ln_target.bias'), LINK_LN_EPS) : sum;
  }
}
