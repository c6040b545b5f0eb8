/** Benchmarks: loaders (datasets), upstream's scoring (score, code), the LLM judge (judge), the evaluation loop with its records (run), the paper's figures (paper). The tiny system's generated task (tiny-task.ts) is imported by path. */
export * from './datasets';
export * from './score';
export * from './code';
export * from './run';
export * from './judge';
export * from './paper';
