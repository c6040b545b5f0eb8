/**
 * One link-training run set up from one settings object: the links (fresh, or from weights the app found), the
 * job, the checkpoint's manifests and the loop's options. Both apps train through it: `rmas train-inner` /
 * `rmas train-outer` (src/runner/train-cmd.ts, models in folders) and the tab's trainer (workers/trainer.ts, models
 * by URL); they differ only in how models and links are found, which they pass in as loaders. The defaults
 * both apply live here, once (upstream's train/train_inner.py and train/train_outer.py).
 */
import { InnerLink, OuterLink, type LinkStateDict } from '../mas/links';
import type { PromptSet, TaskKind } from '../mas/prompts';
import { getStyle, type StyleSpec } from '../mas/styles';
import { outerManifests } from '../mas/upstream';
import type { Decoder } from '../model/decoder';
import { parseGenerationConfig, type GenerationDefaults } from '../model/generate';
import type { Agent as SystemAgent, MasSystem } from '../mas/system';
import type { Backend } from '../tensor/backend';
import type { Tokenizer } from '../tokenizer';
import { canonicalRole, type Row } from './data';
import { createInnerJob, createOuterJob, type TrainJob } from './jobs';
import type { LoopOptions } from './loop';
import type { OuterAgent, OuterLossOptions, OuterSample } from './outer';
import { TRAIN_DEFAULTS } from './defaults';
import { parseSchedulerType } from './schedule';

export { TRAIN_DEFAULTS };

/** Upstream's --mas_design / --style names → styles of the registry. */
const STYLE_ALIASES: Record<string, string> = {
  sequential: 'sequential_light',
  chain: 'sequential_light',
  mixture: 'mixture',
  hie: 'mixture',
  distillation: 'distillation',
  distill: 'distillation',
  deliberation: 'deliberation',
};

/** Upstream role spellings (data column names) → ours. */
const ROLE_ALIASES: Record<string, string> = {
  refiner: 'critic', distill_expert: 'expert', distill_learner: 'learner', hie_math_expert: 'math', hie_code_expert: 'code',
  hie_science_expert: 'science', hie_summarizer: 'summarizer', deliberation_reflector: 'reflector', deliberation_toolcaller: 'toolcaller',
};

/** The style a run trains, by our name or upstream's. */
export function trainingStyle(name: string): StyleSpec {
  const n = name.trim().toLowerCase();
  return getStyle(STYLE_ALIASES[n] ?? n);
}

/** The role an inner run trains, by our name or upstream's; InvalidArgument for one the style's shape does not train. */
export function trainingRole(style: StyleSpec, name: string): string {
  const n = name.trim().toLowerCase();
  return canonicalRole(style.shape, ROLE_ALIASES[n] ?? n);
}

/**
 * --gradient_checkpointing auto: the roles to recompute, planned once the job holds its tokenised samples (the
 * largest sizes the step), before any step.
 */
export type RecomputePlanner = (
  samples: readonly OuterSample[], loss: OuterLossOptions, agents: ReadonlyMap<string, OuterAgent>, outer: ReadonlyMap<string, OuterLink>,
) => readonly string[];

/** One run's settings; what is left out takes TRAIN_DEFAULTS. */
export interface TrainSettings {
  kind: 'inner' | 'outer';
  style: StyleSpec;
  /** Inner: the role whose link trains (trainingRole's name). */
  role?: string;
  /** Task of rows without a task_family column. */
  task?: TaskKind;
  prompts?: PromptSet;
  /** Recorded in the outer manifest; the loaders' tokenizers render with it. */
  thinking?: boolean;
  seed?: number;
  maxLength?: number;
  /**
   * Optimizer steps, or epochs over the usable samples: as the Hugging Face Trainer, ceil(epochs × updates per epoch), an
   * epoch being the full batches of the samples (at least one) divided by the accumulation steps.
   */
  steps: number | { epochs: number };
  batchSize?: number;
  gradAccumSteps?: number;
  lr?: number;
  scheduler?: string;
  warmupSteps?: number;
  shuffle?: boolean;
  /** A checkpoint every N steps (0: only the last). */
  saveSteps: number;
  weightDecay?: number;
  maxGradNorm?: number;
  inner?: { type?: string; cos?: number; mse?: number; ce?: number; recompute?: boolean };
  outer?: {
    type?: string;
    rounds?: number;
    maxLatentTokens?: number;
    superviseFinalOnly?: boolean;
    nonLastLossWeight?: number;
    latents?: 'teacher' | 'rollout';
    /** Score each target up to its agent's end-of-turn token only (ours; OuterJobConfig.untilEos). Default false. */
    untilEos?: boolean;
    recompute?: boolean | readonly string[] | RecomputePlanner;
    /** More keys for outer_adapter_config.json, after the loss settings (the runner's agentN paths, as upstream records them). */
    config?: Record<string, unknown>;
  };
}

/** How an app finds what a run loads: folders and repos in Node, URLs and bytes in the tab. */
export interface TrainLoaders {
  /** The backend of a role's agent, its inner link and the outer links it sends. */
  backend(role: string): Backend;
  decoder(role: string, backend: Backend): Promise<Decoder>;
  tokenizer(role: string): Promise<Tokenizer>;
  /** Inner: the starting weights of the role's link (null: a fresh one). Outer: the role's frozen inner link. */
  innerLink(role: string): Promise<LinkStateDict | null>;
  /** Outer: the starting weights of an outer link by key, with its type when known (null: a fresh one). */
  outerLink(key: string): Promise<{ state: LinkStateDict; type?: string } | null>;
  /**
   * Outer: a role's generation defaults (its generation_config.json), for the held-out questions the run asks;
   * absent: the end tokens of its config and tokenizer, greedy.
   */
  generation?(role: string, eos: readonly number[]): Promise<GenerationDefaults>;
  /**
   * Inner: the rest of the system the trained link belongs to (the other roles' frozen inner links and the outer
   * links), so that held-out questions can be asked of it between steps; absent: the run has no system.
   */
  system?: {
    innerLink(role: string): Promise<LinkStateDict>;
    outerLink(key: string): Promise<{ state: LinkStateDict; type?: string }>;
  };
}

export interface TrainSetup {
  job: TrainJob;
  /** The checkpoint's manifest files (adapter_config.json; outerlink_config.json and outer_adapter_config.json). */
  manifests: Record<string, unknown>;
  loop: LoopOptions;
  task: TaskKind;
  maxLength: number;
  /** Outer: the loss options the job trains with (with the roles --gradient_checkpointing auto planned). */
  outerLoss: OuterLossOptions | null;
  /**
   * The system being trained, as ask() runs it (the agents, their inner links and the outer links, the trained ones as
   * they stand): held-out questions go through it between steps (src/eval/held-out.ts). Outer runs always have one,
   * inner runs when TrainLoaders.system gives the rest. Its dispose() frees nothing (the setup's does).
   */
  system: MasSystem | null;
  /** Frees the models and links it loaded (the job's links among them). */
  dispose(): void;
}

type Agent = OuterAgent & { tokenizer: Tokenizer };

/** Loads what `s` trains through `load`, and builds its job on `rows`; on failure frees what it had loaded. */
export async function setupTraining(s: TrainSettings, rows: readonly Row[], load: TrainLoaders): Promise<TrainSetup> {
  const D = TRAIN_DEFAULTS;
  const task = s.task ?? D.task;
  const seed = s.seed ?? D.seed;
  const maxLength = s.maxLength ?? D.maxLength[s.kind];
  const batchSize = s.batchSize ?? D.batchSize;
  const optimizer = { weightDecay: s.weightDecay ?? D.weightDecay, maxGradNorm: (s.maxGradNorm ?? D.maxGradNorm) || Infinity };
  const disposers: (() => void)[] = [];
  const dispose = () => { for (const d of disposers.splice(0).reverse()) d(); };
  try {
    let job: TrainJob;
    let manifests: Record<string, unknown>;
    let outerLoss: OuterLossOptions | null = null;
    let system: MasSystem | null = null;
    if (s.kind === 'inner') {
      const role = s.role!;
      const on = load.backend(role);
      const decoder = await load.decoder(role, on);
      disposers.push(() => decoder.dispose());
      const tokenizer = await load.tokenizer(role);
      const start = await load.innerLink(role);
      const init = { type: s.inner?.type ?? D.innerType, name: `${role} inner link` };
      const d = decoder.config.hidden;
      const link = start ? InnerLink.fromStateDict(on, start, { ...init, d }) : InnerLink.create(on, d, { ...init, seed });
      disposers.push(() => link.dispose());
      const w = s.inner ?? {};
      job = createInnerJob({
        decoder, tokenizer, link, rows, shape: s.style.shape, role, task, maxLength, optimizer,
        weights: { cos: w.cos ?? D.cosWeight, mse: w.mse ?? D.mseWeight, ce: w.ce ?? D.ceWeight, recompute: w.recompute ?? false },
        ...(s.prompts ? { prompts: s.prompts } : {}),
      });
      manifests = { 'adapter_config.json': { adapter_type: link.type } };
      if (load.system) system = await innerRunSystem(s, load, { role, decoder, tokenizer, inner: link }, disposers);
    } else {
      const c = { task, seed, maxLength, batchSize, optimizer };
      ({ job, manifests, loss: outerLoss, system } = await buildOuter(s, rows, load, c, disposers));
    }
    const gradAccumSteps = s.gradAccumSteps ?? D.gradAccumSteps;
    const steps = typeof s.steps === 'object'
      ? Math.ceil(s.steps.epochs * Math.max(1, Math.floor(job.size / batchSize / gradAccumSteps)))
      : s.steps;
    const loop: LoopOptions = {
      maxSteps: steps, batchSize, gradAccumSteps, lr: s.lr ?? D.lr, scheduler: parseSchedulerType(s.scheduler ?? D.scheduler),
      warmupSteps: s.warmupSteps ?? D.warmupSteps, seed, shuffle: s.shuffle ?? D.shuffle, saveSteps: s.saveSteps,
    };
    return { job, manifests, loop, task, maxLength, outerLoss, system, dispose };
  } catch (e) {
    dispose();
    throw e;
  }
}

/** Every outer link of the style on its agents (models and inner links frozen), and the outer manifests. */
async function buildOuter(
  s: TrainSettings, rows: readonly Row[], load: TrainLoaders,
  c: { task: TaskKind; seed: number; maxLength: number; batchSize: number; optimizer: { weightDecay: number; maxGradNorm: number } },
  disposers: (() => void)[],
): Promise<{ job: TrainJob; manifests: Record<string, unknown>; loss: OuterLossOptions; system: MasSystem }> {
  const D = TRAIN_DEFAULTS;
  const { style } = s;
  const o = s.outer ?? {};
  const agents = new Map<string, Agent>();
  for (const r of style.roles) {
    const on = load.backend(r.key);
    const decoder = await load.decoder(r.key, on);
    disposers.push(() => decoder.dispose());
    const inner = InnerLink.fromStateDict(on, (await load.innerLink(r.key))!, { d: decoder.config.hidden, name: `${r.key} inner link` })
      .freeze();
    disposers.push(() => inner.dispose());
    agents.set(r.key, { decoder, inner, tokenizer: await load.tokenizer(r.key) });
  }
  const outer = new Map<string, OuterLink>();
  for (const [i, l] of style.links.entries()) {
    const dIn = agents.get(l.from)!.decoder.config.hidden;
    const dOut = agents.get(l.to)!.decoder.config.hidden;
    const start = await load.outerLink(l.key);
    const link = start
      ? OuterLink.fromStateDict(load.backend(l.from), start.state, { ...(start.type ? { type: start.type } : {}), dIn, dOut, name: l.key })
      : OuterLink.create(load.backend(l.from), dIn, dOut, { type: o.type ?? D.outerType, seed: c.seed * 100 + i, name: l.key });
    disposers.push(() => link.dispose());
    outer.set(l.key, link);
  }
  const rounds = o.rounds ?? D.rounds;
  const superviseFinalOnly = o.superviseFinalOnly ?? D.superviseFinalOnly;
  const nonLastLossWeight = o.nonLastLossWeight ?? D.nonLastLossWeight;
  const plan = typeof o.recompute === 'function' ? o.recompute : null;
  const loss: OuterLossOptions = {
    rounds, maxLatentTokens: o.maxLatentTokens ?? D.maxLatentTokens, superviseFinalOnly, nonLastLossWeight, maxLength: c.maxLength,
    latents: o.latents ?? D.latents, recompute: plan ? false : ((o.recompute as boolean | readonly string[] | undefined) ?? false),
  };
  const job = createOuterJob({
    style, agents, outer, rows, task: c.task, batchSize: c.batchSize, optimizer: c.optimizer, ...(s.prompts ? { prompts: s.prompts } : {}),
    loss, untilEos: o.untilEos ?? false,
  });
  // the job holds the tokenised samples the plan sizes the step by; the loss options are read at every step
  if (plan) loss.recompute = plan(job.samples, loss, agents, outer);
  const m = outerManifests(
    style.shape,
    [...outer].map(([key, l]) => ({ key, filename: `${key}.pt`, type: l.type, inDim: l.dIn, outDim: l.dOut })),
  );
  const manifests = {
    'outerlink_config.json': m.outerlinkConfig,
    'outer_adapter_config.json': {
      ...m.outerAdapterConfig,
      mas_shape: style.shape,
      mas_task: c.task,
      num_recursive_rounds: rounds,
      supervise_final_only: superviseFinalOnly ? 1 : 0,
      non_last_loss_weight: nonLastLossWeight,
      enable_thinking: s.thinking ? 1 : 0,
      // ours, recorded only when on (upstream's manifests stay as they were)
      ...(o.untilEos ? { loss_until_eos: 1 } : {}),
      ...o.config,
    },
  };
  return { job, manifests, loss, system: await asSystem(s, load, agents, outer) };
}

/** The agents and outer links of a run as a system ask() runs (its dispose() frees nothing). */
async function asSystem(
  s: TrainSettings, load: TrainLoaders, agents: ReadonlyMap<string, Agent>, outer: ReadonlyMap<string, OuterLink>,
): Promise<MasSystem> {
  const sysAgents = new Map<string, SystemAgent>();
  for (const [role, a] of agents) {
    const eos = [...a.decoder.config.eosTokenIds, ...a.tokenizer.eosTokenIds];
    const generation = load.generation ? await load.generation(role, eos) : parseGenerationConfig(null, eos, 'generation_config.json');
    sysAgents.set(role, { role, source: role, dir: '', decoder: a.decoder, tokenizer: a.tokenizer, inner: a.inner, generation });
  }
  return {
    style: s.style, agents: sysAgents, outer, backend: load.backend(s.style.roles[0]!.key), adapterTask: null,
    ...(s.prompts ? { prompts: s.prompts } : {}), dispose: () => {},
  };
}

/** An inner run's whole system: the trained role with its link as it trains, the others and the outer links frozen. */
async function innerRunSystem(
  s: TrainSettings, load: TrainLoaders, trained: Agent & { role: string }, disposers: (() => void)[],
): Promise<MasSystem> {
  const rest = load.system!;
  const agents = new Map<string, Agent>();
  for (const r of s.style.roles) {
    if (r.key === trained.role) {
      agents.set(r.key, trained);
      continue;
    }
    const on = load.backend(r.key);
    const decoder = await load.decoder(r.key, on);
    disposers.push(() => decoder.dispose());
    const inner = InnerLink.fromStateDict(on, await rest.innerLink(r.key), { d: decoder.config.hidden, name: `${r.key} inner link` })
      .freeze();
    disposers.push(() => inner.dispose());
    agents.set(r.key, { decoder, inner, tokenizer: await load.tokenizer(r.key) });
  }
  const outer = new Map<string, OuterLink>();
  for (const l of s.style.links) {
    const { state, type } = await rest.outerLink(l.key);
    const dIn = agents.get(l.from)!.decoder.config.hidden;
    const dOut = agents.get(l.to)!.decoder.config.hidden;
    const link = OuterLink.fromStateDict(load.backend(l.from), state, { ...(type ? { type } : {}), dIn, dOut, name: l.key }).freeze();
    disposers.push(() => link.dispose());
    outer.set(l.key, link);
  }
  return asSystem(s, load, agents, outer);
}
