/**
 * Flags of `rmas train-inner` / `rmas train-outer`, spelled as upstream's train/train_inner.py and
 * train/train_outer.py spell them, so that an upstream command runs with `npx rmas train-inner` in place
 * of `python train/train_inner.py`. Flags that only tune PyTorch (dtypes, gradient checkpointing,
 * trust_remote_code, reporting) are accepted and reported as having no effect here. Upstream's spellings of
 * styles (--mas_design sequential), roles (refiner) and role-named flags (--expert_model_name_or_path) map to ours here.
 */
import { UsageError } from '../errors';
import { getStyle, type StyleSpec } from '../mas/styles';
import type { Values } from './args';

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
  log_jsonl: s,
  dump_batches: s,
  logging_steps: s,
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

export const TRAIN_USAGE =
  `  rmas train-inner --model_name_or_path DIR --mas_design STYLE --mas_role ROLE --dataset_name NAME|FILE --save_dir DIR
                   [--mas_task math|choice|code] [--adapter_type ln_res_adapter] [--adapter_lr 5e-4]
                   [--adapter_cos_weight 1.0] [--adapter_mse_weight 0.0] [--adapter_ce_weight 0.0] [--init_adapter PATH] [--max_length 2048]
  rmas train-outer --style STYLE --agent1_model_name_or_path DIR --agent1_inner_aligner_path PATH … --dataset_name NAME|FILE
                   --save_dir DIR [--outer_lr 5e-4] [--outer_type outer_ln_res_adapter] [--num_recursive_rounds 3]
                   [--max_latent_tokens 80] [--supervise_final_only 1] [--non_last_loss_weight 0.1] [--init_outer DIR]
                   [--max_length 4096] [--outer_latents teacher|rollout]
      train-outer also takes upstream's role-named spellings: distillation --expert_model_name_or_path,
      --learner_model_name_or_path, --expert_inner_aligner_path, --learner_inner_aligner_path (agent1, agent2);
      deliberation --reflector_* and --toolcaller_* (agent1, agent2); giving one with its agentN flag is an error
      both: [--batch_size 2] [--grad_accum_steps 1] [--max_steps 20000 | --num_train_epochs N] [--lr_scheduler_type cosine]
            [--warmup_steps 10] [--max_grad_norm 1.0] [--weight_decay 0.0] [--seed 42] [--shuffle 1] [--save_steps 1000]
            [--save_total_limit N] [--resume DIR] [--log_jsonl FILE] [--dump_batches DIR] [--dataset_json_field data]
            [--dataset_split train]
            [--cache_dir DIR] [--prompts FILE.json] [--backend webgpu|cpu|cuda [--devices 0,1,…]] [--gradient_checkpointing 0|1|auto|ROLE,…]
            [--enable_thinking 0|1] (the chat template's enable_thinking variable; 0, upstream's, renders Qwen3's empty think block)
      train-inner's --save_dir (and each checkpoint-N) is a whole role folder, as upstream's save_pretrained leaves it:
      the link files beside the model's config.json, generation_config.json, tokenizer files and weights, hard-linked
      from --model_name_or_path on the same filesystem, else copied (train_args.json says which)
      --save_total_limit N keeps the newest N checkpoint-<step> folders (older ones are deleted after each save commits)
      --init_adapter, --agentN_inner_aligner_path, --init_outer and --resume also take a .zip checkpoint bundle
      agents are numbered in the style's role order (sequential: planner, critic, solver; mixture: math, code,
      science, summarizer; distillation: expert, learner; deliberation: reflector, toolcaller)
      tiny_sequential (the shipped tiny system): its models/tiny/system folders are the default model folders
      and inner links, its prompts.json the default --prompts (RMAS_TINY_SYSTEM=DIR moves it), e.g.
        rmas train-inner --style tiny_sequential --role critic --dataset_name FILE --save_dir DIR
      (train-inner also takes --style for --mas_design and --role for --mas_role)`;

/** Upstream's --mas_design / --style names → a style of the registry. */
const STYLE_ALIASES: Record<string, string> = {
  sequential: 'sequential_light',
  chain: 'sequential_light',
  mixture: 'mixture',
  hie: 'mixture',
  distillation: 'distillation',
  distill: 'distillation',
  deliberation: 'deliberation',
};
export function styleFor(name: string): StyleSpec {
  return getStyle(STYLE_ALIASES[name.trim().toLowerCase()] ?? name.trim().toLowerCase());
}
/** Upstream role spellings (data column names) → ours. */
export const ROLE_ALIASES: Record<string, string> = {
  refiner: 'critic', distill_expert: 'expert', distill_learner: 'learner', hie_math_expert: 'math', hie_code_expert: 'code',
  hie_science_expert: 'science', hie_summarizer: 'summarizer', deliberation_reflector: 'reflector', deliberation_toolcaller: 'toolcaller',
};

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
