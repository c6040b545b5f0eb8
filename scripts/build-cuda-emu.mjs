#!/usr/bin/env node
// Builds the CUDA emulator: the addon's own sources (native/cuda/src) compiled by g++ for the CPU against
// native/cuda/emu (its runtime, execution model and cuBLASLt), so that the cuda backend's kernels run, and are
// tested, on machines without a GPU. Output: native/cuda/build-emu/rmas_cuda.node, libcublasLt_emu.so and
// libnccl_emu.so (which the addon loads from beside itself). Use it with RMAS_CUDA_ADDON=native/cuda/build-emu/rmas_cuda.node.
//
// Two rewrites turn a .cu file into C++ (emu/emu.h explains them):
//   callee<<<grid, block[, smem[, stream]]>>>(args)  ->  ::rmas_emu::launch(callee, "callee", grid, block, ...)(args)
//                                                       (launch_deduced and a calling lambda when callee has no <...>)
//   extern __shared__ T name[];                       ->  T* name = static_cast<T*>(::rmas_emu::dynamic_smem());
//   __shared__ T a[N], b[M];                          ->  static T a[N], b[M]; (each poisoned once per block)
// Incremental: a source is recompiled when it, or any header under native/cuda, is newer than its object.
// --force rebuilds everything. Needs g++ (C++17) and the Node headers; fails with the compiler's message.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeHeaders, which } from './build-tools.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cuda = join(root, 'native/cuda');
const out = join(cuda, 'build-emu');
const gen = join(out, 'gen');

/** A failed build: main's caller prints it and exits 1 (after the lock is released). */
function die(msg) {
  throw Object.assign(new Error(msg), { build: true });
}

/** The launch and dynamic-shared-memory rewrites of one .cu source (exported for the test of the rewrite). */
export function rewrite(text, file) {
  let s = text.replace(/extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+(?:\s*\*)?)\s+(\w+)\s*\[\s*\]\s*;/g,
    (_m, type, name) => `${type}* ${name} = static_cast<${type}*>(::rmas_emu::dynamic_smem());`);
  // static shared arrays: one block lives at a time, so a static; filled with 0xff once per block, as the
  // launch's dynamic shared memory is, so that a read before any write shows NaN
  s = s.replace(/__shared__\s+([^;{}]+);/g, (_m, decl) => {
    const names = topLevelSplit(decl).map((d) => /(\w+)\s*(?:\[|$)/.exec(d.trim())?.[1]);
    if (names.some((n) => !n)) die(`${file}: cannot parse the __shared__ declaration "${decl}"`);
    return `static ${decl}; ${names.map((n) => `::rmas_emu::poison_shared(&${n}, sizeof ${n});`).join(' ')}`;
  });
  let at;
  while ((at = s.indexOf('<<<')) >= 0) {
    // the callee: an identifier (with ::) and optional template arguments, just before <<<
    let i = at;
    while (i > 0 && /\s/.test(s[i - 1])) i--;
    if (s[i - 1] === '>') {
      let depth = 0;
      do {
        i--;
        if (s[i] === '>') depth++;
        else if (s[i] === '<') depth--;
      } while (i > 0 && depth > 0);
    }
    while (i > 0 && /[\w:]/.test(s[i - 1])) i--;
    const callee = s.slice(i, at).trim();
    const close = s.indexOf('>>>', at);
    if (!callee || close < 0) die(`${file}: cannot parse the launch at offset ${at}`);
    const cfg = s.slice(at + 3, close);
    const name = JSON.stringify(callee.replace(/\s+/g, ' '));
    // explicit template arguments (or none needed) give the kernel's address; a bare name may be a template
    // whose arguments the call deduces, so a lambda makes the call
    const launch = callee.includes('<')
      ? `::rmas_emu::launch(${callee}, ${name}, ${cfg})`
      : `::rmas_emu::launch_deduced([](auto&&... rmas_a) { ${callee}(rmas_a...); }, ${name}, ${cfg})`;
    s = `${s.slice(0, i)}${launch}${s.slice(close + 3)}`;
  }
  return `#line 1 ${JSON.stringify(file)}\n${s}`;
}

/** Declarators of a declaration, split at commas outside brackets. */
function topLevelSplit(decl) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < decl.length; i++) {
    const c = decl[i];
    if ('[(<'.includes(c)) depth++;
    else if ('])>'.includes(c)) depth--;
    else if (c === ',' && depth === 0) {
      parts.push(decl.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(decl.slice(start));
  return parts;
}

function compiler() {
  for (const c of [process.env.CXX, 'g++', 'c++']) {
    if (c && (which(c) || existsSync(c))) return c;
  }
  die('no C++ compiler (g++) on PATH; install g++ (Debian: apt-get install g++)');
}

function run(cmd, args) {
  return new Promise((done) => {
    const p = spawn(cmd, args, { cwd: root });
    let text = '';
    p.stdout.on('data', (d) => (text += d));
    p.stderr.on('data', (d) => (text += d));
    p.on('close', (code) => done({ code, text }));
    p.on('error', (e) => done({ code: -1, text: String(e) }));
  });
}

async function main() {
  const t0 = performance.now();
  const cxx = compiler();
  const node = nodeHeaders(root);
  if (node.missing) die(node.missing);
  const { nodeInclude, addonApi } = node;
  if (process.argv.includes('--force')) rmSync(out, { recursive: true, force: true });
  mkdirSync(gen, { recursive: true });

  const src = join(cuda, 'src');
  const sources = [
    ...readdirSync(src).filter((f) => /\.(cc|cu)$/.test(f)).map((f) => join(src, f)),
    ...readdirSync(join(src, 'kernels')).filter((f) => f.endsWith('.cu')).map((f) => join(src, 'kernels', f)),
    // the emulator's own kernels (its self-tests), rewritten like the addon's
    ...readdirSync(join(cuda, 'emu')).filter((f) => f.endsWith('.cu')).map((f) => join(cuda, 'emu', f)),
    join(cuda, 'emu/runtime.cc'),
  ];
  const headers = [
    ...readdirSync(src).filter((f) => /\.(h|cuh)$/.test(f)).map((f) => join(src, f)),
    ...readdirSync(join(src, 'kernels')).filter((f) => /\.(h|cuh)$/.test(f)).map((f) => join(src, 'kernels', f)),
    join(cuda, 'emu/emu.h'),
    ...readdirSync(join(cuda, 'emu/include')).map((f) => join(cuda, 'emu/include', f)),
  ];
  for (const h of headers)
    if (h.endsWith('.cuh') && readFileSync(h, 'utf8').includes('<<<')) die(`${h}: kernel launches belong in .cu files`);
  const newestHeader = Math.max(...headers.map((h) => statSync(h).mtimeMs), statSync(fileURLToPath(import.meta.url)).mtimeMs);
  const flags = [
    '-std=c++17',
    '-O2',
    '-g0',
    '-fPIC',
    '-ffp-contract=off',
    '-fvisibility=hidden',
    '-fexceptions',
    '-Wall',
    '-Wno-unknown-pragmas',
    '-Wno-unused-function',
    '-DRMAS_CUDA_EMU',
    '-DNAPI_VERSION=8',
    '-DNODE_ADDON_API_CPP_EXCEPTIONS',
    '-DBUILDING_NODE_EXTENSION',
    `-I${join(cuda, 'emu/include')}`,
    `-I${src}`,
    `-I${nodeInclude}`,
    `-I${addonApi}`,
    '-include',
    join(cuda, 'emu/emu.h'),
  ];

  const jobs = [];
  const objects = [];
  for (const file of sources) {
    const rel = file.slice(cuda.length + 1).replace(/[/\\]/g, '_');
    const obj = join(out, `${rel}.o`);
    objects.push(obj);
    const stale = !existsSync(obj) || statSync(obj).mtimeMs < Math.max(statSync(file).mtimeMs, newestHeader);
    if (!stale) continue;
    let input = file;
    if (file.endsWith('.cu')) {
      input = join(gen, `${rel}.cc`);
      writeFileSync(input, rewrite(readFileSync(file, 'utf8'), file));
    }
    // quoted includes resolve against the original file's folder
    jobs.push([cxx, [...flags, `-iquote${dirname(file)}`, '-x', 'c++', '-c', input, '-o', obj], basename(file)]);
  }
  const width = Math.max(1, Math.min(4, availableParallelism()));
  let next = 0;
  const errors = [];
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length && !errors.length) {
      const [cmd, args, name] = jobs[next++];
      const r = await run(cmd, args);
      if (r.code !== 0) errors.push(`${name}:\n${r.text.trim().split('\n').slice(0, 40).join('\n')}`);
    }
  }));
  if (errors.length) die(errors.join('\n'));

  const addon = join(out, 'rmas_cuda.node');
  const lib = join(out, 'libcublasLt_emu.so');
  const link = await run(cxx, ['-shared', '-o', addon, ...objects, '-ldl', '-Wl,--allow-shlib-undefined']);
  if (link.code !== 0) die(link.text);
  // the libraries the addon loads from beside itself: its cuBLASLt and its NCCL
  for (const [file, so, extra] of [['cublaslt_emu.cc', lib, []], ['nccl_emu.cc', join(out, 'libnccl_emu.so'), ['-lrt']]]) {
    const cc = join(cuda, 'emu', file);
    if (existsSync(so) && statSync(so).mtimeMs >= statSync(cc).mtimeMs) continue;
    const r = await run(cxx, ['-std=c++17', '-O2', '-fPIC', '-shared', '-ffp-contract=off', '-Wall', '-o', so, cc, ...extra]);
    if (r.code !== 0) die(r.text);
  }
  console.log(
    `rmas: cuda emulator built (${jobs.length} of ${sources.length} sources compiled) in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${addon}`,
  );
}

/**
 * One build at a time (test files that build it may run in parallel workers): a lock folder beside the output,
 * taken over when older than 15 minutes (a killed build).
 */
async function locked(fn) {
  mkdirSync(cuda, { recursive: true });
  const lock = join(cuda, '.build-emu.lock');
  for (const t0 = Date.now(); ;) {
    try {
      mkdirSync(lock);
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      let age = 0;
      try {
        age = Date.now() - statSync(lock).mtimeMs;
      } catch {
        continue; // released meanwhile
      }
      if (age > 15 * 60_000) rmSync(lock, { recursive: true, force: true });
      else if (Date.now() - t0 > 20 * 60_000) die(`${lock} is held by another build for over 20 minutes`);
      else await new Promise((r) => setTimeout(r, 250));
    }
  }
  try {
    await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    await locked(main);
  } catch (e) {
    if (!e.build) throw e;
    console.error(`rmas: cuda emulator build failed: ${e.message}`);
    process.exit(1);
  }
}
