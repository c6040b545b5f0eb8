/**
 * Flags of `rmas train-inner` / `rmas train-outer`, spelled as upstream's train/train_inner.py and
 * train/train_outer.py spell them, so that an upstream command runs with `npx rmas train-inner` in place
 * of `python train/train_inner.py`. Flags that only tune PyTorch (dtypes, gradient checkpointing,
 * trust_remote_code, reporting) are accepted and reported as having no effect here. Upstream's role-named flags
 * (--expert_model_name_or_path) map to ours here; its spellings of styles (--mas_design sequential) and roles
 * (refiner) map in src/train/setup.ts, where the tab's trainer reads them too. flagSettings turns the flags into
 * the run's settings.
 */
import { UsageError } from '../errors';
import type { TaskKind } from '../mas/prompts';
import type { StyleSpec } from '../mas/styles';
import { parseSchedulerType } from '../train/schedule';
import { TRAIN_DEFAULTS, trainingRole, type TrainSettings } from '../train/setup';
import { flag01, numberFlag, required, type Values } from './args';
import { autoRecompute, recomputeRoles } from './train-memory';

const s = { type: 'string' } as const;
const b = { type: 'boolean' } as const;

export const TRAIN_OPTIONS = {
  // data
  dataset_name: s,
  dataset_json_field: s,
  dataset_split: s,
  dataset_config: s,
  cache_dir: s,
  mas_task: s,
  max_length: s,
  prompts: s,
  // optimisation
  batch_size: s,
  grad_accum_steps: s,
  max_steps: s,
  num_train_epochs: s,
  lr_scheduler_type: s,
  warmup_steps: s,
  max_grad_norm: s,
  weight_decay: s,
  seed: s,
  shuffle: s,
  // checkpoints and logs
  save_dir: s,
  save_steps: s,
  save_total_limit: s,
  resume: s,
  overwrite_output_dir: b,
  log_jsonl: s,
  dump_batches: s,
  logging_steps: s,
  // held-out evaluation (train-outer; the Hugging Face Trainer's and run_clm.py's names)
  eval_steps: s,
  validation_file: s,
  max_eval_samples: s,
  latent_length: s,
  // engine
  backend: s,
  devices: s,
  // inner
  model_name_or_path: s,
  mas_design: s,
  mas_role: s,
  role: s,
  adapter_type: s,
  adapter_lr: s,
  adapter_cos_weight: s,
  adapter_mse_weight: s,
  adapter_ce_weight: s,
  init_adapter: s,
  // outer
  style: s,
  outer_lr: s,
  outer_type: s,
  num_recursive_rounds: s,
  max_latent_tokens: s,
  supervise_final_only: s,
  non_last_loss_weight: s,
  init_outer: s,
  outer_latents: s,
  loss_until_eos: s,
  agent1_model_name_or_path: s,
  agent2_model_name_or_path: s,
  agent3_model_name_or_path: s,
  agent4_model_name_or_path: s,
  agent1_inner_aligner_path: s,
  agent2_inner_aligner_path: s,
  agent3_inner_aligner_path: s,
  agent4_inner_aligner_path: s,
  // train_outer.py's role-named spellings of the agentN flags (distillation, deliberation)
  expert_model_name_or_path: s,
  learner_model_name_or_path: s,
  expert_inner_aligner_path: s,
  learner_inner_aligner_path: s,
  reflector_model_name_or_path: s,
  toolcaller_model_name_or_path: s,
  reflector_inner_aligner_path: s,
  toolcaller_inner_aligner_path: s,
  // chat template: the enable_thinking variable (0 as upstream trains)
  enable_thinking: s,
  // PyTorch-only: accepted, no effect
  dtype: s,
  adapter_dtype: s,
  outer_dtype: s,
  gradient_checkpointing: s,
  trust_remote_code: s,
  report_to: s,
  bf16: b,
} as const;

/** Other spellings of train_*.py (HF Trainer's names): the same flags. */
export const TRAIN_ALIASES = { gradient_accumulation_steps: 'grad_accum_steps', output_dir: 'save_dir' } as const;

export const NO_EFFECT = ['dtype', 'adapter_dtype', 'outer_dtype', 'trust_remote_code', 'report_to', 'bf16'] as const;

/**
 * Roles whose upstream train_outer.py command names them (--expert_model_name_or_path,
 * --reflector_inner_aligner_path, …): aliases of --agentN_* with N the role's place in the style's order.
 */
export const ROLE_FLAG_ROLES = ['expert', 'learner', 'reflector', 'toolcaller'] as const;
export const ROLE_FLAG_SUFFIXES = ['model_name_or_path', 'inner_aligner_path'] as const;

export type TrainArgs = Values<typeof TRAIN_OPTIONS>;

const D = TRAIN_DEFAULTS;
/** The loop's length and saves when the flags leave them out: upstream's Trainer's defaults, which only the runner has. */
const MAX_STEPS = 20000;
const SAVE_STEPS = 1000;
const EPOCHS = 1;
/** A default as upstream's help writes it (1.0). */
const w = (n: number) => n.toFixed(1);

export const TRAIN_USAGE =
  `  rmas train-inner --model_name_or_path DIR --mas_design STYLE --mas_role ROLE --dataset_name NAME|FILE --save_dir DIR
                   [--mas_task math|choice|code] [--adapter_type ${D.innerType}] [--adapter_lr ${D.lr.toExponential()}]
                   [--adapter_cos_weight ${w(D.cosWeight)}] [--adapter_mse_weight ${w(D.mseWeight)}] [--adapter_ce_weight ${w(D.ceWeight)}]
                   [--init_adapter PATH] [--max_length ${D.maxLength.inner}]
  rmas train-outer --style STYLE --agent1_model_name_or_path DIR --agent1_inner_aligner_path PATH … --dataset_name NAME|FILE
                   --save_dir DIR [--outer_lr ${D.lr.toExponential()}] [--outer_type ${D.outerType}] [--num_recursive_rounds ${D.rounds}]
                   [--max_latent_tokens ${D.maxLatentTokens}] [--supervise_final_only ${+D.superviseFinalOnly}]
                   [--non_last_loss_weight ${D.nonLastLossWeight}] [--init_outer DIR] [--max_length ${D.maxLength.outer}]
                   [--outer_latents ${D.latents}|rollout] [--loss_until_eos 0|1]
                   [--validation_file FILE.jsonl --eval_steps N [--max_eval_samples N] [--latent_length M]]
      --loss_until_eos 1 scores each target up to its agent's end-of-turn token (ours: the template's tokens after it
      are never generated); --validation_file scores the system on its questions (greedy, --num_recursive_rounds
      rounds, --latent_length latent steps, default the style's) before the first step, every --eval_steps steps and
      after the last, prints each score and keeps the best step's links in save_dir/best
      train-outer also takes upstream's role-named spellings: distillation --expert_model_name_or_path,
      --learner_model_name_or_path, --expert_inner_aligner_path, --learner_inner_aligner_path (agent1, agent2);
      deliberation --reflector_* and --toolcaller_* (agent1, agent2); giving one with its agentN flag is an error
      both: [--batch_size ${D.batchSize}] [--grad_accum_steps ${D.gradAccumSteps}] [--max_steps ${MAX_STEPS} | --num_train_epochs N]
            [--lr_scheduler_type ${D.scheduler}] [--warmup_steps ${D.warmupSteps}] [--max_grad_norm ${w(D.maxGradNorm)}]
            [--weight_decay ${w(D.weightDecay)}] [--seed ${D.seed}] [--shuffle ${+D.shuffle}] [--save_steps ${SAVE_STEPS}]
            [--save_total_limit N] [--resume DIR | --overwrite_output_dir] [--log_jsonl FILE] [--dump_batches DIR]
            [--dataset_json_field data] [--dataset_split train]
            [--cache_dir DIR] [--prompts FILE.json] [--backend webgpu|cpu|cuda [--devices 0,1,…]] [--gradient_checkpointing 0|1|auto|ROLE,…]
            [--enable_thinking 0|1] (the chat template's enable_thinking variable; 0, upstream's, renders Qwen3's empty think block)
      train-inner's --save_dir (and each checkpoint-N) is a whole role folder, as upstream's save_pretrained leaves it:
      the link files beside the model's config.json, generation_config.json, tokenizer files and weights, hard-linked
      from --model_name_or_path on the same filesystem, else copied (train_args.json says which)
      --save_total_limit N keeps the newest N checkpoint-<step> folders (older ones are deleted after each save commits)
      --max_steps N > 0 sets the length; else --num_train_epochs E: ceil(E × updates per epoch) steps (the HF Trainer's rule)
      a --save_dir holding an earlier run's checkpoints is continued with --resume DIR or started over with
      --overwrite_output_dir (its checkpoints deleted first); a model folder is never written into; another process
      writing the same --save_dir (its lock DIR.lock names it) is refused
      --init_adapter, --agentN_inner_aligner_path, --init_outer and --resume also take a .zip checkpoint bundle
      agents are numbered in the style's role order (sequential: planner, critic, solver; mixture: math, code,
      science, summarizer; distillation: expert, learner; deliberation: reflector, toolcaller)
      tiny_sequential (the shipped tiny system): its models/tiny/system folders are the default model folders
      and inner links, its prompts.json the default --prompts (RMAS_TINY_SYSTEM=DIR moves it), e.g.
        rmas train-inner --style tiny_sequential --role critic --dataset_name FILE --save_dir DIR
      (train-inner also takes --style for --mas_design and --role for --mas_role)`;

/**
 * train_outer.py's role-named flags (--expert_model_name_or_path, --reflector_inner_aligner_path, …) as the
 * --agentN_* flags of the role's place in the style's order; both spellings of one flag is a usage error.
 */
export function agentFlags(a: TrainArgs, style: StyleSpec): TrainArgs {
  const out: Record<string, unknown> = { ...a };
  for (const role of ROLE_FLAG_ROLES) {
    for (const suffix of ROLE_FLAG_SUFFIXES) {
      const alias = `${role}_${suffix}`;
      const v = out[alias];
      if (v === undefined) continue;
      const i = style.roles.findIndex((r) => r.key === role);
      if (i < 0) {
        throw new UsageError(`--${alias} names the role ${role}, which style ${style.name} does not have; its roles are ` +
          `${style.roles.map((r, k) => `${r.key} (--agent${k + 1}_${suffix})`).join(', ')}`);
      }
      const agent = `agent${i + 1}_${suffix}`;
      if (out[agent] !== undefined)
        throw new UsageError(`--${alias} and --${agent} are the same flag (${role} is agent ${i + 1} of ${style.name}); give one of them`);
      out[agent] = v;
      delete out[alias];
    }
  }
  return out as TrainArgs;
}

/** A string flag of the table (the only kind the number and 0|1 flags are). */
export type StringFlag = { [K in keyof TrainArgs]-?: TrainArgs[K] extends string | undefined ? K : never }[keyof TrainArgs];

const num = (a: TrainArgs, k: StringFlag, o: { int?: boolean; min?: number } = {}): number | undefined =>
  numberFlag(k, a[k], { integer: o.int, min: o.min });
/** An upstream 0|1 flag; undefined when left out (setupTraining's default applies). */
const bool01 = (a: TrainArgs, k: StringFlag): boolean | undefined => (a[k] === undefined ? undefined : flag01(k, a[k], false, true));
export const need = (a: TrainArgs, k: StringFlag): string => required(k, a[k]);

/** --outer_latents: what a non-final stage sends while the outer links train (src/train/outer.ts). */
function outerLatents(v: string | undefined): 'teacher' | 'rollout' | undefined {
  if (v === undefined || v === 'teacher' || v === 'rollout') return v;
  throw new UsageError(
    `--outer_latents ${v}: expected teacher (upstream: the states of the gold text) or rollout (the stage's own latent rollout, as inference)`,
  );
}

function taskOf(a: TrainArgs): TaskKind | undefined {
  if (a.mas_task === undefined) return undefined;
  const t = a.mas_task.toLowerCase();
  if (t !== 'math' && t !== 'code' && t !== 'choice') throw new UsageError(`--mas_task ${a.mas_task}: expected math, code or choice`);
  return t;
}

/**
 * The run's settings from its flags (for train-outer, after agentFlags), each malformed flag a UsageError before
 * anything loads. What is left out takes setupTraining's default, but for the loop's length and saves, whose
 * defaults (--max_steps 20000, else --num_train_epochs 1; --save_steps 1000) are upstream's Trainer's and the
 * runner's alone. `say` prints what --gradient_checkpointing auto plans.
 */
export function flagSettings(kind: 'inner' | 'outer', a: TrainArgs, style: StyleSpec, say: (s: string) => void): TrainSettings {
  // the Hugging Face Trainer's rule: --max_steps > 0 wins; else --num_train_epochs (1 when neither is given: --max_steps 20000)
  const givenSteps = num(a, 'max_steps', { int: true });
  const epochs = num(a, 'num_train_epochs', { min: 0 });
  if (epochs !== undefined && !(epochs > 0)) throw new UsageError(`--num_train_epochs ${a.num_train_epochs}: expected a number > 0`);
  if (givenSteps !== undefined && givenSteps > 0 && epochs !== undefined)
    say(`note: --max_steps ${givenSteps} overrides --num_train_epochs ${a.num_train_epochs}, as in the Hugging Face Trainer\n`);
  const steps = givenSteps !== undefined && givenSteps > 0 ? givenSteps
    : epochs !== undefined || givenSteps !== undefined ? { epochs: epochs ?? EPOCHS } : MAX_STEPS;
  const common = {
    kind, style, thinking: bool01(a, 'enable_thinking'), task: taskOf(a), maxLength: num(a, 'max_length', { int: true, min: 2 }),
    batchSize: num(a, 'batch_size', { int: true, min: 1 }), gradAccumSteps: num(a, 'grad_accum_steps', { int: true, min: 1 }),
    seed: num(a, 'seed', { int: true, min: 0 }), lr: num(a, kind === 'inner' ? 'adapter_lr' : 'outer_lr', { min: 0 }),
    weightDecay: num(a, 'weight_decay', { min: 0 }), maxGradNorm: num(a, 'max_grad_norm', { min: 0 }),
    scheduler: a.lr_scheduler_type === undefined ? undefined : parseSchedulerType(a.lr_scheduler_type),
    steps,
    warmupSteps: num(a, 'warmup_steps', { int: true, min: 0 }), shuffle: bool01(a, 'shuffle'),
    saveSteps: num(a, 'save_steps', { int: true, min: 0 }) ?? SAVE_STEPS,
  } satisfies TrainSettings;
  if (kind === 'inner') {
    return {
      ...common, role: trainingRole(style, a.mas_role ?? a.role ?? need(a, 'mas_role')),
      inner: {
        type: a.adapter_type, cos: num(a, 'adapter_cos_weight'), mse: num(a, 'adapter_mse_weight'), ce: num(a, 'adapter_ce_weight'),
        recompute: bool01(a, 'gradient_checkpointing'),
      },
    };
  }
  const recompute = recomputeRoles(a.gradient_checkpointing, style.roles.map((r) => r.key));
  return {
    ...common,
    outer: {
      type: a.outer_type, rounds: num(a, 'num_recursive_rounds', { int: true, min: 1 }),
      maxLatentTokens: num(a, 'max_latent_tokens', { int: true, min: 1 }), superviseFinalOnly: bool01(a, 'supervise_final_only'),
      nonLastLossWeight: num(a, 'non_last_loss_weight', { min: 0 }), latents: outerLatents(a.outer_latents),
      untilEos: bool01(a, 'loss_until_eos'),
      recompute: recompute !== 'auto' ? recompute
        : (samples, loss, agents, outer) => autoRecompute(style, samples, loss, agents, outer, say),
      // upstream records where each agent came from
      config: Object.fromEntries(style.roles.flatMap((_, i) => [
        [`agent${i + 1}_model_name_or_path`, a[`agent${i + 1}_model_name_or_path` as StringFlag]],
        [`agent${i + 1}_inner_aligner_path`, a[`agent${i + 1}_inner_aligner_path` as StringFlag] ?? null],
      ])),
    },
  };
}
