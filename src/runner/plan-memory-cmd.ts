/**
 * `rmas plan-memory`: the device memory of one train-outer step (src/train/memory.ts) from the agents'
 * config.json files, before any weight is read: weights, what the tape holds per forward, the scored agent's
 * logits, the backward's transient peak, the links and the CUDA matmul workspace, the peak against
 * --budget_gb, and with --gradient_checkpointing auto which agents to recompute. With --devices N the agents
 * are placed over N GPUs as `rmas train-outer --devices` places them (role i on device i mod N) and each GPU
 * is planned on its own. Exit 1 when it does not fit.
 */
import { TrainingMemoryExceeded, UnsafeModelFile, UsageError } from '../errors';
import { readModelFile } from '../formats/model-file';
import { innerLinkShapes, outerLinkShapes, resolveInnerLinkType, resolveOuterLinkType } from '../mas/links';
import { DEFAULT_ROUNDS, getStyle, schedule } from '../mas/styles';
import { type DecoderConfig, parseDecoderConfig } from '../model/config';
import { VIEW_ALIGN } from '../tensor/backend';
import { halfGemmFromEnv } from '../tensor/cuda';
import {
  type AgentForward,
  type DeviceMemoryPlan,
  type LinkParams,
  type MemoryPlan,
  type MemoryPlanInput,
  type RecomputeMode,
  formatBytes as fmt,
  planPlacedMemory,
  planTrainingMemory,
} from '../train/memory';
import { numberFlag, type Values } from './args';
import { placeRoles } from './devices';

const s = { type: 'string' } as const;

export const PLAN_MEMORY_OPTIONS = {
  agent: { type: 'string', multiple: true },
  style: s, max_length: s, answer_tokens: s, gradient_checkpointing: s, budget_gb: s, num_recursive_rounds: s,
  outer_type: s, adapter_type: s, weights_dtype: s, devices: s,
  json: { type: 'boolean' },
} as const;

type PlanArgs = Values<typeof PLAN_MEMORY_OPTIONS>;

export const PLAN_MEMORY_USAGE = `  rmas plan-memory --agent NAME=DIR [--agent NAME=DIR …] [--max_length 4096] [--answer_tokens 1024]
                   [--gradient_checkpointing 0|1|auto] [--budget_gb 80] [--num_recursive_rounds R] [--style STYLE]
                   [--outer_type outer_ln_res_adapter] [--adapter_type ln_res_adapter] [--weights_dtype bf16|f16|f32]
                   [--devices N] [--json]
      device memory of one train-outer step from each DIR's config.json (no weights read): weights, what the tape
      holds per forward, logits, the backward's transient peak, links, CUDA workspace; the peak against --budget_gb
      (GiB); exit 1 when it does not fit. Agents run in the order given, each forward at --max_length positions
      and recorded, the last agent scored on --answer_tokens rows, R rounds (default 1), outer links in a ring;
      --style takes the style's roles, links and schedule instead (round 0's first stages run off the tape,
      the style's decoder is scored; R defaults to train-outer's 3). Weights default to config.json's dtype.
      --devices N: the agents over N GPUs of --budget_gb each, as train-outer --devices places them (agent i on
      GPU i mod N, each outer link with its sender), each GPU planned on its own; on one GPU that does not fit,
      the verdict also gives the peak with one agent per GPU.`;

const int = (a: PlanArgs, k: 'max_length' | 'answer_tokens' | 'num_recursive_rounds' | 'devices', def: number, min: number): number =>
  numberFlag(k, a[k], { integer: true, min }) ?? def;

function recomputeMode(v: string | undefined): RecomputeMode {
  if (v === undefined || v === '0' || v === 'false') return 'none';
  if (v === '1' || v === 'true') return 'all';
  if (v === 'auto') return 'auto';
  throw new UsageError(`--gradient_checkpointing ${v}: expected 0, 1 or auto`);
}

const DTYPE_BYTES: Record<string, number> = { bf16: 2, bfloat16: 2, f16: 2, float16: 2, f32: 4, float32: 4 };

function weightBytes(flag: string | undefined, c: DecoderConfig): number {
  if (flag !== undefined) {
    const b = DTYPE_BYTES[flag.toLowerCase()];
    if (!b) throw new UsageError(`--weights_dtype ${flag}: expected bf16, f16 or f32`);
    return b;
  }
  // the engine keeps the weights in the dtype they were saved in
  return DTYPE_BYTES[c.savedDtype ?? ''] ?? 2;
}

async function readConfig(spec: string): Promise<{ name: string; dir: string; config: DecoderConfig }> {
  const eq = spec.indexOf('=');
  if (eq < 1 || eq === spec.length - 1) throw new UsageError(`--agent ${spec}: expected NAME=DIR, e.g. --agent expert=models/Qwen3-8B`);
  const [name, dir] = [spec.slice(0, eq), spec.slice(eq + 1)];
  const file = `${dir.replace(/\/+$/, '')}/config.json`;
  let text: string;
  try {
    text = await readModelFile(file);
  } catch (e) {
    if (e instanceof UnsafeModelFile) throw e;
    throw new UsageError(`--agent ${spec}: cannot read ${file} (${(e as Error).message}); give a Hugging Face model folder`);
  }
  return { name, dir, config: parseDecoderConfig(text, file) };
}

/** Elements of a FlatParams over these shapes: each tensor starts at a VIEW_ALIGN boundary. */
const flatSize = (shapes: [string, number[]][]) =>
  Math.max(1, shapes.reduce((n, [, sh]) => n + Math.ceil(sh.reduce((a, b) => a * b, 1) / VIEW_ALIGN) * VIEW_ALIGN, 0));

export interface PlanMemoryResult {
  /** The whole step on one device. */
  plan: MemoryPlan;
  /** With --devices N > 1: each GPU's plan (agent i on GPU i mod N). */
  devices?: DeviceMemoryPlan[];
  /** On one GPU that does not fit, with two agents or more: the plans with one agent per GPU. */
  spread?: DeviceMemoryPlan[];
  agents: { name: string; dir: string; family: string; layers: number; hidden: number; weightBytesPerParam: number }[];
  links: LinkParams[];
  settings: {
    maxLength: number;
    answerTokens: number;
    rounds: number;
    recompute: RecomputeMode;
    budgetGb: number;
    style: string | null;
    devices: number;
  };
}

/** The agents (in order) over `n` devices as --devices places roles, each link with its sender (`from`) or agent. */
function placed(input: MemoryPlanInput, names: readonly string[], n: number, linkAgent: ReadonlyMap<string, string>): DeviceMemoryPlan[] {
  const agentDevice = placeRoles(names, Array.from({ length: n }, (_, i) => i));
  const linkDevice = Object.fromEntries([...linkAgent].map(([link, agent]) => [link, agentDevice[agent]]));
  return planPlacedMemory(input, agentDevice, linkDevice);
}

/** Whether the run fits: on one device, or on every device of --devices. */
export const planFits = (r: PlanMemoryResult): boolean => (r.devices ? r.devices.every((d) => d.plan.fits) : r.plan.fits);

/** Builds the planner's input from the flags (the forwards in run order, the links) and plans. */
export async function planFromArgs(a: PlanArgs): Promise<PlanMemoryResult> {
  const specs = a.agent ?? [];
  if (!specs.length) throw new UsageError('give at least one --agent NAME=DIR');
  const agents = await Promise.all(specs.map(readConfig));
  const byName = new Map(agents.map((x) => [x.name, x]));
  if (byName.size !== agents.length) throw new UsageError('each --agent needs its own NAME');
  const maxLength = int(a, 'max_length', 4096, 1);
  const answerTokens = int(a, 'answer_tokens', 1024, 0);
  if (answerTokens > maxLength) throw new UsageError(`--answer_tokens ${answerTokens} exceeds --max_length ${maxLength}`);
  const style = a.style === undefined ? null : getStyle(a.style);
  const rounds = int(a, 'num_recursive_rounds', style ? DEFAULT_ROUNDS : 1, 1);
  const budgetGb = numberFlag('budget_gb', a.budget_gb) ?? 80;
  if (budgetGb <= 0) throw new UsageError(`--budget_gb ${a.budget_gb}: expected a positive number (GiB)`);
  const recompute = recomputeMode(a.gradient_checkpointing);
  const nDevices = int(a, 'devices', 1, 1);
  const innerType = resolveInnerLinkType(a.adapter_type ?? 'ln_res_adapter');
  const outerType = resolveOuterLinkType(a.outer_type ?? 'outer_ln_res_adapter');
  const bytes = new Map(agents.map((x) => [x.name, weightBytes(a.weights_dtype, x.config)]));
  // --weights_dtype names the half type for every agent; without it each config.json's dtype does
  const halfType =
    a.weights_dtype && /^(f16|float16)$/i.test(a.weights_dtype) ? ('f16' as const) : a.weights_dtype ? ('bf16' as const) : undefined;

  const forward = (name: string, recorded: boolean, scored: boolean): AgentForward => ({
    name,
    config: byName.get(name)!.config,
    weightBytesPerParam: bytes.get(name)!,
    ...(halfType ? { halfType } : {}),
    tokens: maxLength,
    recorded,
    logitRows: scored ? answerTokens : 0,
  });
  let forwards: AgentForward[];
  let pairs: [string, string, string][];
  if (style) {
    const roles = style.roles.map((r) => r.key);
    const missing = roles.filter((r) => !byName.has(r));
    const extra = agents.filter((x) => !roles.includes(x.name)).map((x) => x.name);
    if (missing.length || extra.length) {
      throw new UsageError(`--style ${style.name} has the roles ${roles.join(', ')}; name each --agent after one` +
        `${missing.length ? ` (missing: ${missing.join(', ')})` : ''}${extra.length ? ` (unknown: ${extra.join(', ')})` : ''}`);
    }
    // as outer.ts runs them: a stage with no latents coming in runs off the tape; the style's decoder is scored every round
    forwards = schedule(style, rounds).map((st) => forward(st.role, st.fill.length > 0, st.role === style.decoder));
    pairs = style.links.map((l) => [l.key, l.from, l.to]);
  } else {
    const names = agents.map((x) => x.name);
    forwards = Array.from({ length: rounds }, () => names.map((n, i) => forward(n, true, i === names.length - 1))).flat();
    pairs = names.length < 2 ? [] : names.map((n, i) => [`outer_${n}_${names[(i + 1) % names.length]}`, n, names[(i + 1) % names.length]]);
  }
  const links: LinkParams[] = [
    ...pairs.map(([name, from, to]) => ({
      name, params: flatSize(outerLinkShapes(outerType, byName.get(from)!.config.hidden, byName.get(to)!.config.hidden)), trainable: true,
    })),
    // the inner links are frozen in outer training, but each still is a FlatParams with its optimizer buffers
    ...agents.map((x) => ({ name: `inner_${x.name}`, params: flatSize(innerLinkShapes(innerType, x.config.hidden)), trainable: false })),
  ];
  // the cuda runner's half-weight products follow RMAS_CUDA_HALF_GEMM; 'split' keeps 3 (bf16) or 2 (f16) copies of the operand
  const input: MemoryPlanInput = {
    agents: forwards,
    links,
    recompute,
    budgetBytes: Math.floor(budgetGb * GIB),
    halfGemm: halfGemmFromEnv(),
  };
  const plan = planTrainingMemory(input);
  const names = style ? style.roles.map((r) => r.key) : agents.map((x) => x.name);
  const linkAgent = new Map<string, string>([
    ...pairs.map(([name, from]) => [name, from] as [string, string]),
    ...agents.map((x) => [`inner_${x.name}`, x.name] as [string, string]),
  ]);
  const devices = nDevices > 1 ? placed(input, names, nDevices, linkAgent) : undefined;
  const spread = nDevices === 1 && !plan.fits && names.length > 1 ? placed(input, names, names.length, linkAgent) : undefined;
  return {
    plan,
    links,
    ...(devices ? { devices } : {}),
    ...(spread ? { spread } : {}),
    agents: agents.map((x) => ({
      name: x.name,
      dir: x.dir,
      family: x.config.family,
      layers: x.config.layers,
      hidden: x.config.hidden,
      weightBytesPerParam: bytes.get(x.name)!,
    })),
    settings: { maxLength, answerTokens, rounds, recompute, budgetGb, style: style?.name ?? null, devices: nDevices },
  };
}

const GIB = 2 ** 30;

/** Columns padded to their widest cell; `align` has one letter per column, l(eft) or r(ight). */
function table(rows: string[][], align: string): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => (align[i] === 'r' ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd()).join('\n');
}

const FLAG: Record<RecomputeMode, string> = { none: '0', all: '1', auto: 'auto' };

export function formatPlan(r: PlanMemoryResult): string {
  const { plan, settings: st } = r;
  const head = `plan-memory: ${st.style ? `style ${st.style}, ` : ''}${st.rounds} round(s), max_length ${st.maxLength}, ` +
    `answer_tokens ${st.answerTokens}, gradient_checkpointing ${FLAG[st.recompute]}, budget ${fmt(plan.budget)}`;
  const agents = table(
    [
      ['agent', 'model', 'bytes/weight', 'weights'],
      ...r.agents.map((x) => [
        x.name,
        `${x.family}, ${x.layers} layers, hidden ${x.hidden}`,
        String(x.weightBytesPerParam),
        fmt(plan.weights[x.name]),
      ]),
    ],
    'llrr',
  );
  const dash = (on: boolean, b: number) => (on ? fmt(b) : '-');
  const forwards = table([
    ['forward', 'tokens', 'rows', 'tape', 'activations', 'recomputing', 'inputs', 'logits', 'backward transient', 'off-tape peak'],
    ...plan.forwards.map((f, i) => [
      `${i + 1} ${f.name}`, String(f.tokens), String(f.logitRows), f.recorded ? (f.recompute ? 'recompute' : 'recorded') : 'off',
      dash(f.recorded, f.activationsFull), dash(f.recorded, f.activationsRecompute), fmt(f.inputs), dash(f.logits > 0, f.logits),
      dash(f.recorded, f.backwardTransient), dash(!f.recorded, f.forwardTransient),
    ]),
  ], 'lrrlrrrrrr');
  const trained = r.links.filter((l) => l.trainable !== false).length;
  const from = (i: number | null) => (i === null || i < 0 ? '' : ` (forward ${i + 1} ${plan.forwards[i].name})`);
  const totals = table([
    ['weights', fmt(plan.weightsTotal)],
    [`links (${trained} trained, ${r.links.length - trained} frozen)`, fmt(plan.links)],
    ['held on the tape', fmt(plan.activations)],
    ['logits and cross-entropy', fmt(plan.logits)],
    [`backward transient${from(plan.transientForward)}`, fmt(plan.transient)],
    ['CUDA matmul workspace', fmt(plan.workspace)],
    [`peak${plan.peakForward === null ? ' (backward)' : from(plan.peakForward)}`, fmt(plan.peak)],
  ], 'lr');
  const fitsLine = (p: MemoryPlan) => (p.fits
    ? `fits: ${fmt(p.budget - p.peak)} to spare; recompute ${p.recomputed.length ? p.recomputed.join(', ') : 'nothing'}`
    : `does not fit: ${p.advice}`);
  if (r.devices) {
    const per = r.devices.map(
      (d) => `GPU ${d.device} (${d.agents.join(', ')}): weights ${fmt(d.plan.weightsTotal)}, peak ${fmt(d.plan.peak)}; ${fitsLine(d.plan)}`,
    );
    return `${head}, ${st.devices} GPUs\n\n${agents}\n\n${forwards}\n\non one GPU: peak ${fmt(plan.peak)}\n${per.join('\n')}\n`;
  }
  let verdict = fitsLine(plan);
  if (r.spread) {
    const worst = r.spread.reduce((a, b) => (b.plan.peak > a.plan.peak ? b : a));
    const fit = r.spread.every((d) => d.plan.fits);
    verdict +=
      `\none agent per GPU (--devices ${r.spread.length}): the largest GPU peak is ${fmt(worst.plan.peak)} on GPU ${worst.device} (${worst.agents.join(', ')}); ` +
      `${fit ? `fits, with recompute ${r.spread.flatMap((d) => d.plan.recomputed).join(', ') || 'nothing'}` : 'does not fit either'}`;
  }
  return `${head}\n\n${agents}\n\n${forwards}\n\n${totals}\n${verdict}\n`;
}

/** Runs the command; writes the table (or JSON) to `out` and throws TrainingMemoryExceeded when the peak is over the budget. */
export async function planMemoryCmd(a: PlanArgs, out: (s: string) => void): Promise<void> {
  const r = await planFromArgs(a);
  out(a.json ? `${JSON.stringify(r, null, 2)}\n` : formatPlan(r));
  if (!planFits(r)) {
    const over = r.devices
      ? r.devices
          .filter((d) => !d.plan.fits)
          .map((d) => `GPU ${d.device} (${d.agents.join(', ')}): ${d.plan.advice}`)
          .join('; ')
      : r.plan.advice!;
    throw new TrainingMemoryExceeded(over);
  }
}
