// The defaults of a link-training run (upstream's train/train_inner.py and train/train_outer.py), in a module that
// imports nothing, so the page's Train view can show them without loading the training code.
/** What a setting left out is (upstream's defaults, save for the loop length and saves, which each app states). */
export const TRAIN_DEFAULTS = {
  seed: 42,
  /** Longest tokenised sample: inner (one role's chat), outer (one stage's sequence). */
  maxLength: { inner: 2048, outer: 4096 },
  batchSize: 2,
  gradAccumSteps: 1,
  lr: 5e-4,
  scheduler: 'cosine',
  warmupSteps: 10,
  shuffle: true,
  weightDecay: 0,
  /** 0 turns clipping off. */
  maxGradNorm: 1,
  task: 'math',
  innerType: 'ln_res_adapter',
  outerType: 'outer_ln_res_adapter',
  cosWeight: 1,
  mseWeight: 0,
  ceWeight: 0,
  rounds: 3,
  maxLatentTokens: 80,
  superviseFinalOnly: true,
  nonLastLossWeight: 0.1,
  latents: 'teacher',
} as const;
