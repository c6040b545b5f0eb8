/**
 * Benchmarks: loaders (datasets), upstream's scoring (score, code), the LLM judge (judge), the evaluation loop with
 * its records (run), the paper's figures (paper), and the embedded tiny systems' tasks (tiny-task, tiny-prices; by
 * style in embedded-task).
 */
export * from './datasets';
export * from './score';
export * from './code';
export * from './evaluate';
export * from './judge';
export * from './paper';
export * from './tiny-task';
export * from './tiny-prices';
export * from './embedded-task';
export * from './held-out';
