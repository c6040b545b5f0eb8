// model/: decoder families (llama, qwen2, qwen3): configuration now; weights, KV cache, forward and
// generation follow with the engine issue.
export * from './config';
export * from './weights';
export * from './decoder';
export * from './generate';
export * from './gguf';
export * from './dir';
export * from './url';
export * from './trainable';
export * from './lm-loss';
