/**
 * Device memory of one training step of the links (a sample's forwards on one tape, then its backward), as
 * this engine spends it: the frozen agents' weights, the links' FlatParams, what the autograd tape records in
 * each forward, the scored agent's logits, and the transient peak while backward runs. Pure arithmetic on
 * DecoderConfig (no backend): `rmas plan-memory` prints it before a job is started on a card that is too small.
 *
 * The activation figures are the tensors decoder.ts's ops record (autograd/ops: every output, attention's
 * logsumexp, cross-entropy's row statistics), all f32 or i32; the backward figures follow Tape.propagate's
 * order (a node's input gradients are made before its output gradients are freed, fan-out gradients are
 * summed into a new tensor). memory.test.ts checks both against a CPU tape's bytes and allocation peak.
 * Not counted: the links' own activations (a few [rows, hidden] per hand-off), allocator fragmentation and
 * the CUDA context.
 */
import { InvalidArgument } from '../errors';
import type { HalfGemm } from '../kernels/kernel';
import { type DecoderConfig, convChannels } from '../model/config';
import { weightSpecs } from '../model/weights';

/** Activations, gradients, positions and labels are f32 or i32. */
const ELEM = 4;
/**
 * FlatParams of a trained link: data, grad, AdamW m and v and the decay mask, f32 each. A frozen link only
 * ever allocates its data (the others come with their first use).
 */
export const FLAT_PARAM_BUFFERS = 5;
/** cuBLASLt's workspace (native/cuda/src/gemm_lt.cu kLtWorkspace), allocated once per device. */
export const CUBLASLT_WORKSPACE_BYTES = 32 * 2 ** 20;

export type RecomputeMode = 'none' | 'all' | 'auto';

/** One forward of an agent in a training step; list them in the order they run. */
export interface AgentForward {
  /** The agent; its weights count once however many of the listed forwards it runs. */
  name: string;
  config: DecoderConfig;
  /** Bytes per weight on the device: 2 for bf16 or f16, 4 for f32 (biases are f32 whatever this says). */
  weightBytesPerParam: number;
  /** Which half type 2-byte weights are (HalfGemm 'split' keeps 3 bf16 or 2 f16 parts); default config.savedDtype's, else bf16. */
  halfType?: 'bf16' | 'f16';
  /** Positions the forward sees (prompt pieces, latents and target). */
  tokens: number;
  /** On the tape: the forward reads latents that require grad (outer.ts runs the others under noGrad). */
  recorded: boolean;
  /** Rows projected to logits and scored with cross-entropy; 0 (default) when the forward is not scored. */
  logitRows?: number;
}

export interface LinkParams {
  name: string;
  /** Elements of the link's FlatParams buffers (alignment padding included). */
  params: number;
  /** Trained in this step (default true): backward also makes a gradient per parameter before gatherGrads. */
  trainable?: boolean;
}

export interface MemoryPlanInput {
  agents: readonly AgentForward[];
  links: readonly LinkParams[];
  /** 'auto': recompute the fewest agents, largest saving first, that bring the peak under the budget. */
  recompute: RecomputeMode;
  budgetBytes: number;
  /** How cuda's half-weight products carry the f32 operand: 'split' keeps up to three half copies of it (default 'round'). */
  halfGemm?: HalfGemm;
}

/** One forward's figures, in bytes. */
export interface ForwardMemory {
  name: string;
  tokens: number;
  recorded: boolean;
  logitRows: number;
  /** The tape's share without recomputation: every layer's recorded outputs, the final norm, the positions. */
  activationsFull: number;
  /** With recomputation: each layer's input [T, hidden] only, the final norm, the positions. */
  activationsRecompute: number;
  /** The inputs embeddings the tape keeps: the embedded prompt pieces with the latents, and their concatenation. */
  inputs: number;
  /** Whether this plan recomputes the forward's layers. */
  recompute: boolean;
  /** What the tape holds in this plan: the activation figure in use plus inputs; 0 when not recorded. */
  held: number;
  /** Logits [rows, vocab], the selected rows and their ids, cross-entropy's row logsumexp and the labels. */
  logits: number;
  /** Peak of gradients in flight while backward runs through this forward, plus, recomputing, one layer's activations. */
  backwardTransient: number;
  /** A forward off the tape: one layer's intermediates at a time (each layer's tidy frees them), or its logits at the end. */
  forwardTransient: number;
}

export interface MemoryPlan {
  forwards: ForwardMemory[];
  /** Frozen weights per agent name (weightBytes). */
  weights: Record<string, number>;
  weightsTotal: number;
  /** The links' FlatParams: a trained link's FLAT_PARAM_BUFFERS and per-parameter gradients, a frozen link's values only (4 bytes per element each). */
  links: number;
  /** Sum of `held` over the recorded forwards. */
  activations: number;
  /** Sum of `logits` over the recorded forwards. */
  logits: number;
  /** The largest backward transient of any recorded forward. */
  transient: number;
  /** Index in `forwards` of the forward that sets `transient` (-1: nothing recorded). */
  transientForward: number;
  /** CUDA's matmul scratch: cuBLASLt's workspace and the bf16/f16 copy of the largest f32 operand of a half-weight GEMM. */
  workspace: number;
  /** weights + links + workspace + the larger of the backward phase (activations + logits + transient) and any unrecorded forward. */
  peak: number;
  /** null when the backward sets the peak, else the index of the unrecorded forward whose intermediates do. */
  peakForward: number | null;
  budget: number;
  fits: boolean;
  /** Agent names whose recorded forwards recompute their layers. */
  recomputed: string[];
  /** What to change when it does not fit; null when it fits. */
  advice: string | null;
}

const qDim = (c: DecoderConfig) => c.heads * c.headDim;
const kvDim = (c: DecoderConfig) => c.kvHeads * c.headDim;

/** Parameters of the decoder's weight tensors (weightSpecs). */
export function weightParamCount(c: DecoderConfig): number {
  return weightSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** Bytes of the loaded weights: every tensor at `bytesPerParam`, except biases, which loadDecoderWeights widens to f32. */
export function weightBytes(c: DecoderConfig, bytesPerParam: number): number {
  return weightSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1) * (s.kind === 'bias' ? ELEM : bytesPerParam), 0);
}

/**
 * f32 elements one attention layer records per token: the input norm (h), q, k, v projections, q and k after
 * RoPE, attention's output (q) and logsumexp (heads), the o projection, the residual sum and the second norm
 * (h each), gate, up and their SwiGLU (I each), the down projection and the residual sum (h each); Qwen3's
 * head norms add q + k. Reshapes are views of the same storage. Biases add nothing (fused into the matmul).
 * Qwen3.5's output gate adds the taller q_proj output (q), its query and gate parts, the gate's sigmoid and the
 * gated output (q each).
 */
export function layerActivationFloats(c: DecoderConfig): number {
  const h = c.hidden;
  const [q, k] = [qDim(c), kvDim(c)];
  // Gemma's sandwich norms add the attention output's and the MLP output's norms (h each)
  return 6 * h + 3 * q + 3 * k + c.heads + 3 * c.intermediate + (c.qkNorm ? q + k : 0) + (c.sandwichNorms ? 2 * h : 0) +
    (c.attnOutputGate ? 5 * q : 0);
}

/**
 * f32 elements a Gated DeltaNet layer records per token: the input norm (h), the q|k|v projection, the conv, its
 * SiLU and the split parts (C each), q and k normalised (2·nk·dk), b, its sigmoid, a, a + dt_bias, its softplus and
 * the decay (nv each), the delta rule's output and saved v − Sᵀk, the gated norm, z, SiLU(z) and their product
 * (nv·dv each), then out_proj, the residual, the second norm, the MLP (3I) and its residual as an attention layer.
 */
function deltaNetActivationFloats(c: DecoderConfig): number {
  const d = c.deltaNet!;
  return (
    6 * c.hidden + 4 * convChannels(d) + 2 * d.keyHeads * d.keyDim + 6 * d.valueHeads + 6 * d.valueHeads * d.valueDim + 3 * c.intermediate
  );
}

/**
 * What a Gated DeltaNet layer records once per sequence: the rule's final state (nv·dk·dv), and the constants the
 * tape takes over, the decay rate −exp(A_log) (nv) and the conv weights' [C, K] view.
 */
function deltaNetSequenceFloats(c: DecoderConfig): number {
  const d = c.deltaNet!;
  return d.valueHeads * d.keyDim * d.valueDim + d.valueHeads + convChannels(d) * d.convKernel;
}

/** f32 elements every layer records for T tokens: per layer its kind's per-token floats, and a DeltaNet's per-sequence ones. */
export function layersActivationFloats(c: DecoderConfig, T: number): number {
  let n = 0;
  for (let l = 0; l < c.layers; l++)
    n += c.linearLayers[l] ? T * deltaNetActivationFloats(c) + deltaNetSequenceFloats(c) : T * layerActivationFloats(c);
  return n;
}

/**
 * Peak f32 elements per token of gradients alive during one layer's backward (frozen weights: input
 * gradients only), entered with the output's gradient. Walking Tape.propagate through the layer, the widest
 * moments are SwiGLU's backward (g_x1, g_act, g_gate, g_up: h + 3I), k_proj's gradient summed with v_proj's
 * (g_x, g_q and three g_h: 4h + q), and attention's backward (g_x, g_attn, di [heads, T], dq, dk, dv:
 * h + 2q + 2k + heads), which Qwen3's q head norm outgrows by its row stats (+ heads). Every other step is
 * narrower than one of these for any shape (kv width ≤ q width). `pinned`: the layer runs inside a
 * recomputing checkpoint, whose output gradient (h) stays alive until the layer's backward returns.
 */
export function layerBackwardFloats(c: DecoderConfig, pinned = false): number {
  const { hidden: h, intermediate: I, heads } = c;
  const [q, k] = [qDim(c), kvDim(c)];
  // a Gated DeltaNet's backward: the conv input's and output's gradients (C each), the rule's per-column and
  // per-row parts (dv and v's part, q's and k's parts per value head) and the gradients of q, k, v they sum to
  const d = c.deltaNet;
  const deltaNet = d ? h + 4 * (2 * d.keyHeads * d.keyDim + d.valueHeads * d.valueDim) + 2 * d.valueHeads * (d.valueDim + d.keyDim) : 0;
  return (
    (pinned ? h : 0) + Math.max(h + 3 * I, 4 * h + q * (c.attnOutputGate ? 2 : 1), h + 2 * q + 2 * k + (c.qkNorm ? 2 : 1) * heads, deltaNet)
  );
}

/** Elements the decoder keeps outside its layers while recording: the final norm [T, h] and positions [T] (i32). */
const finalFloats = (c: DecoderConfig, T: number) => T * c.hidden + T;

/** Logits, the gathered rows and their ids (when not every row), cross-entropy's loss, logsumexp, scale and labels. */
function logitFloats(c: DecoderConfig, T: number, R: number): number {
  if (!R) return 0;
  const gather = R < T ? R + R * c.hidden : 0;
  return gather + R * c.vocabSize + 1 + R + 1 + R;
}

/**
 * Peak gradients (elements) between the loss and the last layer: dlogits [R, V] and the lm_head's input
 * gradient [R, h]. The later steps (scattering the rows back, the final norm) are narrower than a layer's backward.
 */
const headBackwardFloats = (c: DecoderConfig, R: number) => R * (c.vocabSize + c.hidden);

function forwardFigures(f: AgentForward, recompute: boolean): ForwardMemory {
  const c = f.config;
  const T = f.tokens;
  const R = f.logitRows ?? 0;
  const A = layerActivationFloats(c);
  const full = layersActivationFloats(c, T) + finalFloats(c, T);
  const re = c.layers * T * c.hidden + finalFloats(c, T);
  const inputs = 2 * T * c.hidden;
  const rec = f.recorded && recompute;
  let layerBack = rec ? T * (A + layerBackwardFloats(c, true)) : T * layerBackwardFloats(c);
  // recomputing a Gated DeltaNet layer holds its own intermediates, per token and per sequence, during its backward
  if (rec && c.deltaNet && c.linearLayers.some(Boolean)) {
    layerBack = Math.max(layerBack, T * (deltaNetActivationFloats(c) + layerBackwardFloats(c, true)) + deltaNetSequenceFloats(c));
  }
  // off the tape each layer's intermediates go when it returns (attention's logsumexp at once): the peak is
  // one layer's, with the positions and, after the first layer, the previous layer's output; or the end,
  // the last layer's output with the final norm and the logits
  // a Gated DeltaNet layer's intermediates: its recorded ones, the per-sequence ones and exp(A_log) (nv)
  const own = c.deltaNet && c.linearLayers.some(Boolean)
    ? Math.max(T * (A - c.heads), T * deltaNetActivationFloats(c) + deltaNetSequenceFloats(c) + c.deltaNet.valueHeads)
    : T * (A - c.heads);
  const layerPeak = own + T + (c.layers > 1 ? T * c.hidden : 0);
  const endPeak = T * c.hidden + finalFloats(c, T) + (R ? (R < T ? R + R * c.hidden : 0) + R * c.vocabSize : 0);
  const offTape = Math.max(layerPeak, endPeak);
  return {
    name: f.name, tokens: T, recorded: f.recorded, logitRows: R,
    activationsFull: ELEM * full,
    activationsRecompute: ELEM * re,
    inputs: ELEM * inputs,
    recompute: rec,
    held: f.recorded ? ELEM * ((rec ? re : full) + inputs) : 0,
    logits: f.recorded ? ELEM * logitFloats(c, T, R) : 0,
    backwardTransient: f.recorded ? ELEM * Math.max(headBackwardFloats(c, R), layerBack) : 0,
    forwardTransient: f.recorded ? 0 : ELEM * (offTape + inputs),
  };
}

/**
 * The bf16/f16 copy gemm_lt makes of the f32 operand A: the largest A of any half-weight GEMM, kept at its largest;
 * with HalfGemm 'split', one copy per part, each 256-byte aligned: three for bf16 weights, two for f16
 * (native/cuda/src/gemm_lt.cu).
 */
function convertBytes(f: AgentForward, halfGemm: HalfGemm): number {
  if (f.weightBytesPerParam !== 2) return 0;
  const c = f.config;
  const T = f.tokens;
  const R = f.logitRows ?? 0;
  // forward: x into q/k/v/gate/up [T, h], attention output into o_proj [T, q], SwiGLU into down_proj [T, I], rows into lm_head;
  // backward (dA = dC·W): q/k/v/o/gate/up/down output gradients (no wider than the forward's) and dlogits [R, V]
  const fwd = T * Math.max(c.hidden, qDim(c), c.intermediate);
  const half = 2 * Math.max(fwd, f.recorded && R ? R * c.vocabSize : 0);
  const f16 = (f.halfType ?? (/^(f16|float16)$/i.test(c.savedDtype ?? '') ? 'f16' : 'bf16')) === 'f16';
  return halfGemm === 'split' ? (f16 ? 2 : 3) * Math.ceil(half / 256) * 256 : half;
}

function check(input: MemoryPlanInput) {
  const pos = (x: number) => Number.isFinite(x) && x > 0;
  if (!input.agents.length) throw new InvalidArgument('planTrainingMemory: no agents');
  if (!pos(input.budgetBytes)) throw new InvalidArgument(`planTrainingMemory: budgetBytes must be positive, got ${input.budgetBytes}`);
  if (input.halfGemm !== undefined && input.halfGemm !== 'round' && input.halfGemm !== 'split') {
    throw new InvalidArgument(`planTrainingMemory: halfGemm must be 'round' or 'split', got ${JSON.stringify(input.halfGemm)}`);
  }
  if (!['none', 'all', 'auto'].includes(input.recompute)) {
    throw new InvalidArgument(`planTrainingMemory: recompute must be 'none', 'all' or 'auto', got ${JSON.stringify(input.recompute)}`);
  }
  const configs = new Map<string, AgentForward>();
  for (const f of input.agents) {
    if (!Number.isInteger(f.tokens) || f.tokens < 1)
      throw new InvalidArgument(`${f.name}: tokens must be a positive integer, got ${f.tokens}`);
    const R = f.logitRows ?? 0;
    if (!Number.isInteger(R) || R < 0 || R > f.tokens)
      throw new InvalidArgument(`${f.name}: logitRows must be an integer in [0, ${f.tokens}], got ${R}`);
    if (!pos(f.weightBytesPerParam))
      throw new InvalidArgument(`${f.name}: weightBytesPerParam must be positive, got ${f.weightBytesPerParam}`);
    const seen = configs.get(f.name);
    const sameConfig = seen?.config === f.config || JSON.stringify(seen?.config) === JSON.stringify(f.config);
    if (seen && (!sameConfig || seen.weightBytesPerParam !== f.weightBytesPerParam)) {
      throw new InvalidArgument(`${f.name} is listed twice with different configs or weight sizes; give each agent its own name`);
    }
    configs.set(f.name, f);
  }
  for (const l of input.links) {
    if (!Number.isInteger(l.params) || l.params < 0)
      throw new InvalidArgument(`link ${l.name}: params must be a non-negative integer, got ${l.params}`);
  }
}

function evaluate(input: MemoryPlanInput, recomputed: ReadonlySet<string>): Omit<MemoryPlan, 'advice'> {
  const forwards = input.agents.map((f) => forwardFigures(f, recomputed.has(f.name)));
  const weights: Record<string, number> = {};
  for (const f of input.agents) weights[f.name] ??= weightBytes(f.config, f.weightBytesPerParam);
  const weightsTotal = Object.values(weights).reduce((a, b) => a + b, 0);
  const links = input.links.reduce((n, l) => n + l.params * ELEM * (l.trainable === false ? 1 : FLAT_PARAM_BUFFERS + 1), 0);
  const activations = forwards.reduce((n, f) => n + f.held, 0);
  const logits = forwards.reduce((n, f) => n + f.logits, 0);
  let transient = 0;
  let transientForward = -1;
  forwards.forEach((f, i) => {
    if (f.backwardTransient > transient) [transient, transientForward] = [f.backwardTransient, i];
  });
  // the links' f32 GEMMs go through cuBLASLt whatever the agents' weights are
  const workspace = CUBLASLT_WORKSPACE_BYTES + Math.max(0, ...input.agents.map((f) => convertBytes(f, input.halfGemm ?? 'round')));
  // an unrecorded forward peaks with what the tape already holds from the forwards before it
  let phase = activations + logits + transient;
  let peakForward: number | null = null;
  let onTape = 0;
  forwards.forEach((f, i) => {
    if (!f.recorded && onTape + f.forwardTransient > phase) [phase, peakForward] = [onTape + f.forwardTransient, i];
    onTape += f.held + f.logits;
  });
  const peak = weightsTotal + links + workspace + phase;
  return {
    forwards, weights, weightsTotal, links, activations, logits, transient, transientForward, workspace, peak, peakForward,
    budget: input.budgetBytes, fits: peak <= input.budgetBytes,
    recomputed: [...new Set(input.agents.map((f) => f.name))].filter((n) => recomputed.has(n)),
  };
}

/** Bytes in the largest binary unit that keeps the figure at or above 1 (B, KiB, MiB, GiB). */
export function formatBytes(b: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (i < units.length - 1 && Math.abs(b) >= 1024 ** (i + 1)) i++;
  return i ? `${(b / 1024 ** i).toFixed(2)} ${units[i]}` : `${b} B`;
}

/**
 * The step's memory for the agents' forwards, links and recomputation mode against a budget. 'auto' turns
 * recomputation on for recorded agents one at a time, largest activation saving first, until the peak fits
 * (none when it already does).
 */
export function planTrainingMemory(input: MemoryPlanInput): MemoryPlan {
  check(input);
  const recordedNames = [...new Set(input.agents.filter((f) => f.recorded).map((f) => f.name))];
  let chosen = new Set<string>(input.recompute === 'all' ? recordedNames : []);
  let plan = evaluate(input, chosen);
  if (input.recompute === 'auto' && !plan.fits) {
    const saving = (name: string) => plan.forwards.filter((f) => f.name === name && f.recorded)
      .reduce((n, f) => n + f.activationsFull - f.activationsRecompute, 0);
    const order = [...recordedNames].sort((a, b) => saving(b) - saving(a));
    for (const name of order) {
      chosen = new Set([...chosen, name]);
      plan = evaluate(input, chosen);
      if (plan.fits) break;
    }
  }
  return { ...plan, advice: plan.fits ? null : advise(input, plan) };
}

function advise(input: MemoryPlanInput, plan: Omit<MemoryPlan, 'advice'>): string {
  const over = `needs ${formatBytes(plan.peak)}, ${formatBytes(plan.peak - plan.budget)} over the ${formatBytes(plan.budget)} budget`;
  const allRe = input.recompute === 'all' ? plan : evaluate(input, new Set(input.agents.filter((f) => f.recorded).map((f) => f.name)));
  if (allRe.fits) {
    return `${over}; turn on activation recomputation (--gradient_checkpointing 1 or auto): with every recorded agent recomputing the peak is ${formatBytes(allRe.peak)}`;
  }
  const terms = [
    ['weights', allRe.weightsTotal], ['activations', allRe.activations], ['logits', allRe.logits],
    ['backward transient', allRe.transient], ['links', allRe.links], ['workspace', allRe.workspace],
  ] as const;
  const big = [...terms].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([n, b]) => `${n} ${formatBytes(b)}`).join(', ');
  const i = allRe.peakForward;
  const offTape = i === null ? '' : `; the peak comes while forward ${i + 1} (${allRe.forwards[i].name}) runs off the tape, holding all ` +
    `its layers' intermediates (${formatBytes(allRe.forwards[i].forwardTransient)}) until it returns, which recomputation does not change`;
  return `${over}, and ${formatBytes(allRe.peak)} even with every recorded agent recomputing (largest: ${big}${offTape}); ` +
    'shorten --max_length (activations grow with it), score fewer answer tokens (logits are rows × vocab × 4 bytes), ' +
    'use smaller or quantized agents, or a card with more memory';
}

/** One device's share of a system placed over several (one role per GPU): its agents and its plan. */
export interface DeviceMemoryPlan {
  device: number;
  agents: string[];
  plan: MemoryPlan;
}

/**
 * The plans of a step whose agents live on different devices: each device holds its agents' weights, the
 * links placed on it (an outer link on its sender's device, an inner link on its agent's), what its forwards
 * record, and its own backward transient and workspace; each is planned against the budget on its own, with
 * the recomputation mode applied per device ('auto' chooses per device). The latents that cross devices
 * (a few [rows, hidden] per hand-off) are not counted, as the links' own activations are not. Devices with
 * nothing placed on them are left out; every agent and link must be placed.
 */
export function planPlacedMemory(
  input: MemoryPlanInput, agentDevice: Readonly<Record<string, number>>, linkDevice: Readonly<Record<string, number>>,
  /** A device's own budget where it differs from input.budgetBytes (each GPU's free memory). */
  budgets: Readonly<Record<number, number>> = {},
): DeviceMemoryPlan[] {
  check(input);
  for (const f of input.agents) {
    if (agentDevice[f.name] === undefined) throw new InvalidArgument(`planPlacedMemory: agent ${f.name} is not placed on a device`);
  }
  for (const l of input.links) {
    if (linkDevice[l.name] === undefined) throw new InvalidArgument(`planPlacedMemory: link ${l.name} is not placed on a device`);
  }
  const devices = [...new Set(input.agents.map((f) => agentDevice[f.name]))].sort((a, b) => a - b);
  return devices.map((device) => {
    const agents = input.agents.filter((f) => agentDevice[f.name] === device);
    const plan = planTrainingMemory({
      ...input,
      agents,
      links: input.links.filter((l) => linkDevice[l.name] === device),
      budgetBytes: budgets[device] ?? input.budgetBytes,
    });
    return { device, agents: [...new Set(agents.map((f) => f.name))], plan };
  });
}
