// testing/: support that only tests, benchmarks and scripts import (test/layering.test.ts checks it): tiny models
// and the JS decoder reference (model.ts), a GGUF writer (gguf-writer.ts), the FileStore contract as a vitest
// suite (store-contract.ts) and the tiny models' goldens (tiny-golden.ts, Node only). The last two are imported by
// path so that this index pulls in neither vitest nor node:fs.
export * from './model';
export * from './gguf-writer';
