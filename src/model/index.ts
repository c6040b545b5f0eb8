// model/: decoder families (config), released checkpoint layouts, weights, the decoder with its caches,
// generation, GGUF and folder/URL loading.
export * from './config';
export * from './weights';
export * from './layout';
export * from './decoder';
export * from './generate';
export * from './gguf';
export * from './dir';
export * from './url';
export * from './trainable';
export * from './lm-loss';
