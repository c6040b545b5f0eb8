// mas/: the RecursiveMAS method on top of the engine: links, upstream checkpoint layouts, prompts and
// styles, the latent rollout, the round loop (latent and text modes) and the final decode, the dump, the logit
// lens, token budgets and ablations; the deliberation tools are mas/tools.
export * from './links';
export * from './slots';
export * from './prompts';
export * from './answer';
export * from './styles';
export * from './rollout';
export * from './upstream';
export * from './system';
export * from './system-folders';
export * from './system-urls';
export * from './spec';
export * from './ask';
export { DISABLED_TOOLS, decodeWithTools, type GenerateFn } from './decode';
export * from './lens';
export * from './budget';
export * from './ablation';
export * from './dump';
export * from './batch';
