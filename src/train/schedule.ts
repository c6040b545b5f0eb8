/**
 * Learning-rate schedules as transformers' get_scheduler builds them for upstream's `--lr_scheduler_type`
 * (docs/method.md §6.1, cosine with 10 warm-up steps). LambdaLR semantics: the optimizer step
 * with index k (0 for the first step) runs at base_lr · lrFactor(type, k, warmup, total).
 */
import { InvalidArgument } from '../errors';

export const SCHEDULER_TYPES = ['cosine', 'linear', 'constant', 'constant_with_warmup'] as const;
export type SchedulerType = (typeof SCHEDULER_TYPES)[number];

/**
 * The multiplier of the base lr at optimizer step `step` (from 0). Warm-up is linear from 0 (so step 0
 * runs at 0 when warmup > 0); 'constant' ignores warmup, as get_scheduler does. Past `total`, cosine
 * follows transformers literally: the half-cosine turns back up (max(0, ·) only clips negatives).
 */
export function lrFactor(type: SchedulerType, step: number, warmup: number, total: number, numCycles = 0.5): number {
  if (!Number.isInteger(step) || step < 0) throw new InvalidArgument(`lrFactor: step must be a non-negative integer, got ${step}`);
  if (!Number.isInteger(warmup) || warmup < 0) throw new InvalidArgument(`lrFactor: warmup must be a non-negative integer, got ${warmup}`);
  if (!Number.isInteger(total) || total < 0) throw new InvalidArgument(`lrFactor: total must be a non-negative integer, got ${total}`);
  if (type === 'constant') return 1;
  if (step < warmup) return step / Math.max(1, warmup);
  switch (type) {
    case 'constant_with_warmup':
      return 1;
    case 'linear':
      return Math.max(0, (total - step) / Math.max(1, total - warmup));
    case 'cosine': {
      const progress = (step - warmup) / Math.max(1, total - warmup);
      return Math.max(0, 0.5 * (1 + Math.cos(Math.PI * numCycles * 2 * progress)));
    }
    default:
      throw new InvalidArgument(`lrFactor: unknown scheduler type '${String(type)}'; use one of ${SCHEDULER_TYPES.join(', ')}`);
  }
}

/** `--lr_scheduler_type` text → SchedulerType (case and surrounding spaces ignored). */
export function parseSchedulerType(s: string): SchedulerType {
  const t = String(s ?? '').trim().toLowerCase();
  if ((SCHEDULER_TYPES as readonly string[]).includes(t)) return t as SchedulerType;
  throw new InvalidArgument(`unknown lr scheduler '${s}'; choose one of ${SCHEDULER_TYPES.join(', ')}`);
}
