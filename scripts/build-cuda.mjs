#!/usr/bin/env node
// Builds the CUDA addon (native/cuda -> native/cuda/build/rmas_cuda.node) when nvcc and cmake are present.
// Runs on `npm install` (postinstall: never fails the install) and as `npm run build:cuda` (fails on a build error).
// Options: --force rebuilds from scratch; RMAS_CUDA_ARCHS="80;90" picks the GPU architectures.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeHeaders, which } from './build-tools.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'native/cuda');
const build = join(src, 'build');
const postinstall = process.env.npm_lifecycle_event === 'postinstall';
const retry = 'npm run build:cuda';

function notBuilt(why) {
  console.log(`rmas: cuda backend not built (${why}); install the CUDA toolkit (nvcc) and cmake, then run ${retry}`);
  process.exit(0);
}

const nvcc = which('nvcc', ['/usr/local/cuda/bin']);
const cmake = which('cmake');
if (!nvcc) notBuilt('nvcc not found on PATH or in /usr/local/cuda/bin');
if (!cmake) notBuilt('cmake not found on PATH');

const headers = nodeHeaders(root);
if (headers.missing) notBuilt(headers.missing);
const { nodeInclude, addonApi } = headers;

const t0 = performance.now();
if (process.argv.includes('--force')) rmSync(build, { recursive: true, force: true });
mkdirSync(build, { recursive: true });
const archs = process.env.RMAS_CUDA_ARCHS ?? '80;90';
const steps = [
  [
    cmake,
    [
      '-S',
      src,
      '-B',
      build,
      '-DCMAKE_BUILD_TYPE=Release',
      `-DCMAKE_CUDA_COMPILER=${nvcc}`,
      `-DCMAKE_CUDA_ARCHITECTURES=${archs}`,
      `-DNODE_INCLUDE_DIR=${nodeInclude}`,
      `-DNODE_ADDON_API_DIR=${addonApi}`,
    ],
  ],
  [
    cmake,
    ['--build', build, '--config', 'Release', '-j', String(Math.max(1, Math.min(4, (await import('node:os')).availableParallelism())))],
  ],
];
for (const [cmd, args] of steps) {
  const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) {
    const tail = `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}`.trim().split('\n').slice(-25).join('\n');
    console.error(`${tail}\nrmas: cuda backend build failed (${[cmd, ...args].join(' ')}); fix the error above and run ${retry}`);
    process.exit(postinstall ? 0 : 1);
  }
}
const out = join(build, 'rmas_cuda.node');
if (!existsSync(out)) {
  console.error(`rmas: cuda build finished but ${out} is missing; run ${retry} --force`);
  process.exit(postinstall ? 0 : 1);
}
console.log(`rmas: cuda backend built (sm ${archs.replaceAll(';', ',')}) in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${out}`);
