/** Benchmarks: loaders (datasets), upstream's scoring (score, code), and the evaluation loop with its records (run). */
export * from './datasets';
export * from './score';
export * from './code';
export * from './run';
