// model/: decoder families (config), released checkpoint layouts (layout), weights, the Decoder with its caches
// (cache.ts: KVCache, BatchCache) and its fused one-token path (fused.ts), generate and generateBatch, GGUF and
// folder/URL loading, trainable decoders and the LM loss.
export * from './config';
export * from './weights';
export * from './layout';
export * from './decoder';
export * from './generate';
export * from './gguf';
export * from './gguf-config';
export * from './dir';
export * from './url';
export * from './trainable';
export * from './lm-loss';
