#!/usr/bin/env node
// Builds the MPI addon (native/mpi -> native/mpi/build/rmas_mpi.node) with Open MPI's compiler wrapper, mpicxx,
// when it is present (Debian: apt-get install openmpi-bin libopenmpi-dev; scripts/setup-system.sh does it).
// Runs on `npm install` (postinstall: never fails the install) and as `npm run build:mpi` (fails on a build error).
// Without the addon a single process runs as always; only a run under mpirun with more than one rank needs it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeHeaders, which } from './build-tools.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'native/mpi/src/addon.cc');
const build = join(root, 'native/mpi/build');
const out = join(build, 'rmas_mpi.node');
const postinstall = process.env.npm_lifecycle_event === 'postinstall';
const retry = 'npm run build:mpi';

function notBuilt(why) {
  console.log(`rmas: mpi addon not built (${why}); install Open MPI (apt-get install openmpi-bin libopenmpi-dev), then run ${retry}`);
  process.exit(0);
}

const mpicxx = which('mpicxx');
if (!mpicxx) notBuilt('mpicxx not found on PATH');
const headers = nodeHeaders(root);
if (headers.missing) notBuilt(headers.missing);
if (!process.argv.includes('--force') && existsSync(out) && statSync(out).mtimeMs > statSync(src).mtimeMs) {
  console.log(`rmas: mpi addon up to date: ${out}`);
  process.exit(0);
}
mkdirSync(build, { recursive: true });
const t0 = performance.now();
const args = ['-std=c++17', '-O2', '-fPIC', '-shared', '-DNAPI_VERSION=8', '-DNODE_ADDON_API_DISABLE_DEPRECATED',
  '-DNODE_ADDON_API_CPP_EXCEPTIONS', `-I${headers.nodeInclude}`, `-I${headers.addonApi}`, src, '-o', out, '-ldl'];
const r = spawnSync(mpicxx, args, { cwd: root, encoding: 'utf8' });
if (r.status !== 0) {
  console.error(`${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}`.trim().split('\n').slice(-25).join('\n'));
  console.error(`rmas: mpi addon build failed (${mpicxx} ${args.join(' ')}); fix the error above and run ${retry}`);
  process.exit(postinstall ? 0 : 1);
}
console.log(`rmas: mpi addon built in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${out}`);
