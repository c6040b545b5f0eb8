/**
 * What `npm run test:fast` runs (vitest.fast.config.ts): the unit and CPU-parity tests, in under a minute on two
 * cores. Every `*.test.ts` under src/ but the WebGPU (`*.gpu.test.ts`) and browser (`*.browser.test.ts`) ones and
 * those in SLOW_SRC; under test/, only the in-process CPU checks in QUICK_TEST (test/ mostly holds whole runs, the
 * GPU, the page, processes and fuzzing). `npm test` still runs everything.
 *
 * test/test-fast.test.ts keeps this honest: no file in the set, nor a test helper it imports, starts a process or
 * WebGPU, and every entry below names a file that exists. test/util/fast-guard.ts fails such a test at run time too.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Unit tests under src/ that start a process, each with what it runs: they stay in `npm test` only. */
export const SLOW_SRC: Readonly<Record<string, string>> = {
  'src/eval/code.test.ts': 'python3 runs the scored code',
  'src/eval/evaluate.test.ts': 'python3 runs the scored code (scoreOutput, through src/eval/code.ts)',
  'src/formats/zip.test.ts': 'unzip checks the archives',
  'src/store/bundle.test.ts': 'unzip checks the bundles',
  'src/store/hub-cache.test.ts': 'a sleep process holds a lock',
  'src/runner/healthcheck.test.ts': 'mpirun --version',
  'src/mas/tools/python-node.test.ts': 'python3 runs the tool calls',
  'src/mas/tools/python-parity.test.ts': 'python3 runs the shared cases',
  'src/mas/tools/sandbox.test.ts': 'bwrap and python3 run the probe payloads',
};

/** Cross-layer tests under test/ that run in this process on the CPU, each in about two seconds or less on 2 cores. */
export const QUICK_TEST: readonly string[] = [
  'test/layering.test.ts',
  'test/dawn-noise.test.ts',
  'test/fast-set.test.ts',
  'test/cuda-hooks.elementwise.test.ts',
  'test/cuda-hooks.matmul.test.ts',
  'test/cuda-hooks.norm.test.ts',
  'test/golden.test.ts',
  'test/gemma3-golden.test.ts',
  'test/plan-system.test.ts',
  'test/gguf-url.test.ts',
  'test/system-urls.test.ts',
  'test/tiny-models.test.ts',
  'test/tiny-mas.test.ts',
  'test/engine-api.test.ts',
  'test/engine-eval.test.ts',
  'test/engine-tools.test.ts',
  'test/mas/ablation.test.ts',
  'test/mas/ask-golden.test.ts',
  'test/mas/golden.test.ts',
  'test/mas/tiny-style-train.test.ts',
  'test/mas/tools-glue.test.ts',
  'test/train/golden.test.ts',
  'test/train/inner-readback.test.ts',
  'test/train/inner-rollout.test.ts',
  'test/train/outer.test.ts',
  'test/util/hub.test.ts',
  'test/realsize-gpu-plan.test.ts',
];

/** Whether a src/ test file (a path from the repository root) is in the fast set by the naming rule. */
export const fastBySuffix = (path: string) => path.endsWith('.test.ts') && !/\.(gpu|browser)\.test\.ts$/.test(path);

function testFiles(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    return e.isDirectory() ? testFiles(root, path) : fastBySuffix(path) ? [path] : [];
  });
}

/** The fast set's files, relative to the repository root `root`, sorted. */
export function fastTestFiles(root: string): string[] {
  return [...testFiles(root, 'src').filter((f) => !(f in SLOW_SRC)), ...QUICK_TEST].sort();
}
