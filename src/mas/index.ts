// mas/: the RecursiveMAS method on top of the engine: links, upstream checkpoint layouts, prompts and
// styles, the latent rollout, the round loop (latent and text modes) and the final decode, the dump, the deliberation tools.
export * from './links';
export * from './slots';
export * from './prompts';
export * from './answer';
export * from './styles';
export * from './rollout';
export * from './upstream';
export * from './system';
export * from './system-folders';
export * from './ask';
export { decodeWithTools, type GenerateFn } from './decode';
export * from './dump';
export * from './batch';
