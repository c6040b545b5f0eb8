/**
 * The collaboration styles (docs/method.md §3.3, §4.3–§4.4) as data: roles and their default Hugging Face repos,
 * outer links (which role feeds which), and the stages of one round. The round engine (ask.ts) knows
 * nothing about any style beyond this table. Five styles are the released ones (Hugging Face repos); three are
 * embedded, their folders shipped in the package: tiny_sequential under TINY_SYSTEM_ROOT (models/tiny/system),
 * tiny_distillation, the page's first offline system, under TINY_DISTILLATION_ROOT (models/tiny/distillation), and
 * tiny_recursion, its second (the multi-hop task, where accuracy rises with rounds), under TINY_RECURSION_ROOT.
 *
 * A stage names its role, its prompt kind, which slot each incoming message fills, which outer links it
 * sends through (after a latent rollout), and whether it decodes text instead (the final agent, last round).
 */
import { InvalidArgument, MissingCheckpoint, UnknownModelType, UnknownStyle } from '../errors';
import { SUPPORTED_DECODERS, isSupportedModelType } from '../model/config';
import type { PromptKind, StyleShape } from './prompts';
import { SLOTS } from './slots';

export type StyleName =
  | 'sequential_light'
  | 'sequential_scaled'
  | 'mixture'
  | 'distillation'
  | 'deliberation'
  | 'tiny_sequential'
  | 'tiny_distillation'
  | 'tiny_recursion';

/** The style `rmas ask` uses when none is chosen: the first tiny system shipped in the package. */
export const DEFAULT_STYLE = 'tiny_sequential';
/**
 * The embedded style the playground ships as its offline system (models/tiny-system.json lists its files for the
 * worker; src/ui/offline.test.ts checks that the two agree).
 */
export const OFFLINE_STYLE: StyleName = 'tiny_distillation';

export interface RoleSpec {
  key: string;
  /**
   * Default checkpoint: RecursiveMAS role repo (base model + inner links); for an embedded style, the
   * role folder's path relative to the package root.
   */
  repo: string;
  /** The frozen base model it was trained on (for messages and docs). */
  base: string;
  /** config.json's model_type of the released checkpoint, read before any download to say whether the engine runs it. */
  modelType: string;
}

export interface OuterLinkSpec {
  /** Upstream's legacy key (outer_12, outer_1s, ...), also our state-dict and dump name. */
  key: string;
  from: string;
  to: string;
}

export interface StageSpec {
  role: string;
  kind: PromptKind;
  /** [slot string, outer link key whose latest message fills it], in prompt order. */
  fill: readonly (readonly [string, string])[];
  /** Outer links applied to this stage's rollout (empty when it decodes). */
  linksOut: readonly string[];
  /** The stage decodes text (final agent, last round) instead of a latent rollout. */
  decode: boolean;
}

/** Where an embedded style's files sit in the package (paths relative to the package root). */
export interface EmbeddedSpec {
  /** The system folder: role folders, the outer folder and the prompt file below it. */
  root: string;
  /** The prompt file (a --prompts file), relative to `root`. */
  prompts: string;
  /** The command that rebuilds the system's files. */
  rebuild: string;
  /**
   * The page's manifest of the system's files (a SystemSpec of app paths, which the engine worker's offlineSystem
   * reads and the build copies with every file it names), relative to the package root; absent: not in the page.
   */
  manifest?: string;
  /** The recorded evaluation (`eval.json`, written by the system's eval command), relative to `root`. */
  eval?: string;
}

export interface StyleSpec {
  name: StyleName;
  /** Upstream mas_shape, which picks the prompt family. */
  shape: StyleShape;
  roles: readonly RoleSpec[];
  outerRepo: string;
  links: readonly OuterLinkSpec[];
  /** Inner and outer files come in math/code variants (sequential); else one adapter per role (task None). */
  taskScoped: boolean;
  /** The role that writes the answer. */
  decoder: string;
  /** The final decode runs the deliberation tool loop. */
  tools: boolean;
  /** Stages of round `round` (0-based) of `rounds`. */
  stages(round: number, rounds: number): StageSpec[];
  /**
   * Set for a system shipped inside the package (not on the Hugging Face hub): role repos and outerRepo are
   * then folders under the package root, and the style brings its own prompt file.
   */
  embedded?: EmbeddedSpec;
  /**
   * Latent steps per rollout when the caller gives none (ask, the playground, the tiny eval): the length
   * this system's outer links were trained for. Absent: 32, upstream's default.
   */
  latentSteps?: number;
}

/** Recursion rounds when none are asked for (upstream's --num_recursive_rounds default). */
export const DEFAULT_ROUNDS = 3;

/** The latent steps a style runs with when none are asked for. */
export const defaultLatentSteps = (style: Pick<StyleSpec, 'latentSteps'>): number => style.latentSteps ?? 32;

const R = 'RecursiveMAS/';
const stage = (role: string, kind: PromptKind, fill: [string, string][], linksOut: string[], decode = false): StageSpec => ({
  role,
  kind,
  fill,
  linksOut,
  decode,
});

function sequential(
  name: 'sequential_light' | 'sequential_scaled' | 'tiny_sequential',
  roles: RoleSpec[],
  outerRepo: string,
  taskScoped = true,
): StyleSpec {
  return {
    name,
    shape: 'chain',
    roles,
    outerRepo,
    taskScoped,
    decoder: 'solver',
    tools: false,
    links: [
      { key: 'outer_12', from: 'planner', to: 'critic' },
      { key: 'outer_23', from: 'critic', to: 'solver' },
      { key: 'outer_31', from: 'solver', to: 'planner' },
    ],
    stages: (round, rounds) => [
      round === 0
        ? stage('planner', 'first', [], ['outer_12'])
        : stage('planner', 'feedback', [[SLOTS.feedback, 'outer_31']], ['outer_12']),
      stage('critic', 'first', [[SLOTS.planner, 'outer_12']], ['outer_23']),
      // the solver's feedback rollout (outer_31) is skipped in the last round, where it decodes instead
      round < rounds - 1
        ? stage('solver', 'first', [[SLOTS.refined, 'outer_23']], ['outer_31'])
        : stage('solver', 'first', [[SLOTS.refined, 'outer_23']], [], true),
    ],
  };
}

function distillation(name: 'distillation' | 'tiny_distillation' | 'tiny_recursion', roles: RoleSpec[], outerRepo: string): StyleSpec {
  return {
    name,
    shape: 'distill',
    outerRepo,
    taskScoped: false,
    decoder: 'learner',
    tools: false,
    roles,
    links: [
      { key: 'outer_el', from: 'expert', to: 'learner' },
      { key: 'outer_le', from: 'learner', to: 'expert' },
    ],
    stages: (round, rounds) => [
      round === 0
        ? stage('expert', 'first', [], ['outer_el'])
        : stage('expert', 'feedback', [[SLOTS.distillFeedback, 'outer_le']], ['outer_el']),
      round < rounds - 1
        ? stage('learner', 'first', [[SLOTS.distillExpert, 'outer_el']], ['outer_le'])
        : stage('learner', 'first', [[SLOTS.distillExpert, 'outer_el']], [], true),
    ],
  };
}

/**
 * The embedded tiny system's folder, relative to the package root: its role and outer repos lie under it.
 * Node resolves it once (system-folders.ts embeddedRoot, which $RMAS_TINY_SYSTEM can move); the build scripts
 * (scripts/tiny-system) write it; the page reads it through models/tiny-system.json.
 */
export const TINY_SYSTEM_ROOT = 'models/tiny/system';

/** The tiny sequential system trained from scratch with this project (issue 7), one adapter.pt per role. */
function tinySequential(): StyleSpec {
  const role = (key: string, base: string, modelType: string): RoleSpec => ({ key, repo: `${TINY_SYSTEM_ROOT}/${key}`, base, modelType });
  return {
    ...sequential('tiny_sequential', [
      role('planner', 'tiny Qwen3-style decoder trained from scratch (scripts/tiny-system/train-agents.ts)', 'qwen3'),
      role('critic', 'tiny Llama-style decoder trained from scratch (scripts/tiny-system/train-agents.ts)', 'llama'),
      role('solver', 'tiny Qwen2-style decoder trained from scratch (scripts/tiny-system/train-agents.ts)', 'qwen2'),
    ], `${TINY_SYSTEM_ROOT}/outer`, false),
    embedded: { root: TINY_SYSTEM_ROOT, prompts: 'prompts.json', rebuild: 'npm run tiny:build:sequential' },
    // its outer links were trained on up to 40 latents (scripts/tiny-system/pipeline.ts), and a 3-step refined plan is 39 tokens
    latentSteps: 40,
  };
}

/** The embedded two-agent system's folder, relative to the package root (as TINY_SYSTEM_ROOT). */
export const TINY_DISTILLATION_ROOT = 'models/tiny/distillation';

/**
 * An embedded two-agent system in the distillation shape under `root`: a tiny Qwen3-style expert and a tiny
 * Llama-style learner trained from scratch by `scripts` (its agents.ts), its outer links in root/outer.
 */
function tinyDistillShape(
  name: 'tiny_distillation' | 'tiny_recursion', root: string, scripts: string,
  embedded: { rebuild: string; manifest: string }, latentSteps: number,
): StyleSpec {
  const role = (key: string, family: string, modelType: string): RoleSpec => ({
    key, repo: `${root}/${key}`, base: `tiny ${family}-style decoder trained from scratch (${scripts}/agents.ts)`, modelType,
  });
  return {
    ...distillation(name, [role('expert', 'Qwen3', 'qwen3'), role('learner', 'Llama', 'llama')], `${root}/outer`),
    embedded: { root, prompts: 'prompts.json', ...embedded, eval: 'eval.json' },
    latentSteps,
  };
}

/**
 * The tiny distillation system (scripts/tiny-distillation): an expert that alone knows a price list and a
 * learner that alone computes (src/eval/tiny-prices.ts), so the learner needs the expert's message. Its outer links
 * were trained on rollouts of 4 latent steps (scripts/tiny-distillation/build.ts).
 */
const tinyDistillation = (): StyleSpec => tinyDistillShape('tiny_distillation', TINY_DISTILLATION_ROOT, 'scripts/tiny-distillation',
  { rebuild: 'npm run tiny:build', manifest: 'models/tiny-system.json' }, 4);

/** The embedded recursion system's folder, relative to the package root (as TINY_SYSTEM_ROOT). */
export const TINY_RECURSION_ROOT = 'models/tiny/recursion';

/**
 * The tiny recursion system (scripts/tiny-recursion, issue 40): the distillation shape on the multi-hop task
 * (src/eval/tiny-hops.ts), where the lookups alternate between the two agents, so a question of h hops needs
 * (h + 1) / 2 rounds and accuracy can rise with them. A note is three tokens, and its outer links were trained on
 * rollouts of that length.
 */
const tinyRecursion = (): StyleSpec => tinyDistillShape('tiny_recursion', TINY_RECURSION_ROOT, 'scripts/tiny-recursion',
  { rebuild: 'npx tsx scripts/tiny-recursion/build.ts', manifest: 'models/tiny-recursion.json' }, 3);

const EXPERTS = [['math', '1', SLOTS.hieMath], ['code', '2', SLOTS.hieCode], ['science', '3', SLOTS.hieScience]] as const;

export const STYLES: Readonly<Record<StyleName, StyleSpec>> = {
  sequential_light: sequential(
    'sequential_light',
    [
      { key: 'planner', repo: `${R}Sequential-Light-Planner-Qwen3-1.7B`, base: 'Qwen/Qwen3-1.7B', modelType: 'qwen3' },
      { key: 'critic', repo: `${R}Sequential-Light-Critic-Llama3.2-1B`, base: 'meta-llama/Llama-3.2-1B-Instruct', modelType: 'llama' },
      { key: 'solver', repo: `${R}Sequential-Light-Solver-Qwen2.5-Math-1.5B`, base: 'Qwen/Qwen2.5-Math-1.5B-Instruct', modelType: 'qwen2' },
    ],
    `${R}Sequential-Light-Outerlinks`,
  ),
  sequential_scaled: sequential(
    'sequential_scaled',
    [
      { key: 'planner', repo: `${R}Sequential-Scaled-Planner-Gemma3-4B`, base: 'google/gemma-3-4b-it', modelType: 'gemma3' },
      { key: 'critic', repo: `${R}Sequential-Scaled-Critic-Llama3.2-3B`, base: 'meta-llama/Llama-3.2-3B-Instruct', modelType: 'llama' },
      { key: 'solver', repo: `${R}Sequential-Scaled-Solver-Qwen3.5-4B`, base: 'Qwen/Qwen3.5-4B', modelType: 'qwen3_5' },
    ],
    `${R}Sequential-Scaled-Outerlinks`,
  ),
  mixture: {
    name: 'mixture',
    shape: 'hie',
    outerRepo: `${R}Mixture-Outerlinks`,
    taskScoped: false,
    decoder: 'summarizer',
    tools: false,
    roles: [
      {
        key: 'math',
        repo: `${R}Mixture-Math-DeepSeek-R1-Distill-Qwen-1.5B`,
        base: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B',
        modelType: 'qwen2',
      },
      { key: 'code', repo: `${R}Mixture-Code-Qwen2.5-Coder-3B`, base: 'Qwen/Qwen2.5-Coder-3B-Instruct', modelType: 'qwen2' },
      { key: 'science', repo: `${R}Mixture-Science-BioMistral-7B`, base: 'BioMistral/BioMistral-7B', modelType: 'mistral' },
      { key: 'summarizer', repo: `${R}Mixture-Summarizer-Qwen3.5-2B`, base: 'Qwen/Qwen3.5-2B', modelType: 'qwen3_5' },
    ],
    links: [
      ...EXPERTS.map(([role, n]) => ({ key: `outer_${n}s`, from: role, to: 'summarizer' })),
      ...EXPERTS.map(([role, n]) => ({ key: `outer_s${n}`, from: 'summarizer', to: role })),
    ],
    // Upstream's summarizer decodes in every round and the last text wins; only the last decode matters,
    // so the non-final rounds run just its feedback rollout (docs/method.md §4.4 allows this).
    stages: (round, rounds) => {
      const last = round === rounds - 1;
      const fill: [string, string][] = EXPERTS.map(([, n, slot]) => [slot, `outer_${n}s`]);
      return [
        ...EXPERTS.map(([role, n]) =>
          round === 0
            ? stage(role, 'first', [], [`outer_${n}s`])
            : stage(role, 'feedback', [[SLOTS.hieFeedback, `outer_s${n}`]], [`outer_${n}s`]),
        ),
        last
          ? stage('summarizer', 'first', fill, [], true)
          : stage(
              'summarizer',
              'first',
              fill,
              EXPERTS.map(([, n]) => `outer_s${n}`),
            ),
      ];
    },
  },
  distillation: distillation(
    'distillation',
    [
      { key: 'expert', repo: `${R}Distillation-Expert-Qwen3.5-9B`, base: 'Qwen/Qwen3.5-9B', modelType: 'qwen3_5' },
      { key: 'learner', repo: `${R}Distillation-Learner-Qwen3.5-4B`, base: 'Qwen/Qwen3.5-4B', modelType: 'qwen3_5' },
    ],
    `${R}Distillation-Outerlinks`,
  ),
  deliberation: {
    name: 'deliberation',
    shape: 'deliberation',
    outerRepo: `${R}Deliberation-Outerlinks`,
    taskScoped: false,
    decoder: 'toolcaller',
    tools: true,
    roles: [
      { key: 'reflector', repo: `${R}Deliberation-Reflector-Qwen3.5-4B`, base: 'Qwen/Qwen3.5-4B', modelType: 'qwen3_5' },
      { key: 'toolcaller', repo: `${R}Deliberation-Toolcaller-Qwen3.5-4B`, base: 'Qwen/Qwen3.5-4B', modelType: 'qwen3_5' },
    ],
    links: [
      { key: 'outer_rt', from: 'reflector', to: 'toolcaller' },
      { key: 'outer_tr', from: 'toolcaller', to: 'reflector' },
    ],
    stages: (round, rounds) => [
      round === 0
        ? stage('reflector', 'first', [], ['outer_rt'])
        : stage('reflector', 'feedback', [[SLOTS.deliberationFeedback, 'outer_tr']], ['outer_rt']),
      round < rounds - 1
        ? stage('toolcaller', 'first', [[SLOTS.deliberationReflector, 'outer_rt']], ['outer_tr'])
        : stage('toolcaller', 'first', [[SLOTS.deliberationReflector, 'outer_rt']], [], true),
    ],
  },
  tiny_sequential: tinySequential(),
  tiny_distillation: tinyDistillation(),
  tiny_recursion: tinyRecursion(),
};

/** The error for an embedded system whose files are absent or incomplete: what, why, how to rebuild, and `orElse`. */
export function missingEmbedded(style: StyleSpec, what: string, detail: string, orElse: string): MissingCheckpoint {
  const rebuild = style.embedded?.rebuild ?? 'npm run tiny:build';
  return new MissingCheckpoint(`${what}: the tiny system files are missing (${detail}); rebuild them with \`${rebuild}\`, ${orElse}`);
}

/** Every style, the released ones first. */
export const ALL_STYLE_NAMES = Object.keys(STYLES) as StyleName[];
/** The released styles (role repos on the Hugging Face hub); the embedded tiny_sequential is not among them. */
export const STYLE_NAMES = ALL_STYLE_NAMES.filter((n) => !STYLES[n].embedded);

export function getStyle(name: string): StyleSpec {
  if (!Object.hasOwn(STYLES, name)) throw new UnknownStyle(`unknown style '${name}'; choose one of ${ALL_STYLE_NAMES.join(', ')}`);
  return STYLES[name as StyleName];
}

/** The role that reads outer link `key`'s messages. */
export function receiverOf(style: StyleSpec, key: string): string {
  const link = style.links.find((l) => l.key === key);
  if (!link)
    throw new InvalidArgument(`style ${style.name} has no outer link ${key}; its links are ${style.links.map((l) => l.key).join(', ')}`);
  return link.to;
}

/** Every stage of a run of `rounds` rounds, in execution order, with its 0-based round. */
export function schedule(style: StyleSpec, rounds: number): (StageSpec & { round: number })[] {
  return Array.from({ length: rounds }, (_, r) => style.stages(r, rounds).map((s) => ({ ...s, round: r }))).flat();
}

/** The roles of `style` (but those in `ownBackbone`) whose released backbone's model_type the engine does not run. */
export function unrunnableRoles(style: StyleSpec, ownBackbone: Iterable<string> = []): RoleSpec[] {
  const own = new Set(ownBackbone);
  return style.roles.filter((r) => !own.has(r.key) && !isSupportedModelType(r.modelType));
}

/**
 * Refuses, before anything is read or downloaded, a style whose released backbones this engine cannot run yet:
 * every role not in `ownBackbone` (roles given a model of their own) whose modelType is not supported. The runner
 * and the playground say the same thing.
 */
export function checkBackbones(style: StyleSpec, ownBackbone: Iterable<string> = []): void {
  const missing = unrunnableRoles(style, ownBackbone);
  if (!missing.length) return;
  throw new UnknownModelType(
    `style ${style.name} needs backbones this engine cannot run yet: ${missing.map((r) => `${r.key} (${r.base}, model_type ${r.modelType})`).join(', ')}; ` +
      `it runs ${SUPPORTED_DECODERS}. Use sequential_light or the tiny system, or give ${missing.length > 1 ? 'those roles models' : 'that role a model'} ` +
      "it runs (--ckpt_override ROLE=DIR with a model folder; in the playground, the role's backbone URL)",
  );
}
