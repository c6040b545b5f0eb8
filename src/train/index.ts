// train/: the two link-training loops (docs/method.md §6): one run set up from settings (setup.ts), the jobs, the loop
// both share, learning-rate schedules, memory estimates, and checkpoints saved through a FileStore. Node-only code
// (model-files.ts, reading a base model's files from disk) is imported from its file.
export * from './setup';
export * from './jobs';
export * from './loop';
export * from './inner';
export * from './outer';
export * from './schedule';
export * from './memory';
export * from './checkpoint';
export * from './file-store';
export * from './data';
