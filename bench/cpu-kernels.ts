/**
 * `npm run bench:cpu-kernels [-- --reps 5] [--filter bf16] [--tiny] [--threads 1,2] [--no-ts]`: the CPU backend's
 * matmul, the TypeScript reference against the WebAssembly SIMD kernels on each thread count of --threads (default
 * 1), on y = x·Wᵀ at the real widths of Qwen3-0.6B (hidden 1024, intermediate 3072, vocab 151936) and Qwen3-1.7B
 * (2048, 6144), per weight dtype, for one row of x (decode: a GEMV) and 128 (prefill: a GEMM). Every path runs
 * through F.linear on a CpuBackend, so the staging of x and y counts. The paths alternate within each rep; each line
 * gives the medians and spreads (min–max) over the reps, the weight bytes read per second, the fraction of the read
 * bandwidth of one thread measured here first, and the ratio. With several thread counts each gets its columns and
 * its speed over the first count's; `--no-ts` leaves the reference out (its GEMMs take seconds). `--tiny` runs small
 * widths once (CI proves the program still runs).
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { F } from '../src/autograd';
import { type DType, byteSize } from '../src/formats/dtype';
import { CpuBackend } from '../src/tensor/cpu';
import type { Tensor } from '../src/tensor/tensor';
import { Rng } from '../src/util/rng';

const { values: args } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    filter: { type: 'string', default: '' },
    tiny: { type: 'boolean', default: false },
    threads: { type: 'string', default: '1' },
    'no-ts': { type: 'boolean', default: false },
  },
});
const reps = args.tiny ? 1 : Number(args.reps);
const THREADS = args.threads.split(',').map(Number);
if (THREADS.some((t) => !Number.isInteger(t) || t < 1)) throw new Error(`--threads ${args.threads}: expected counts such as 1,2`);

interface Shape {
  name: string;
  N: number;
  K: number;
}
const SHAPES: Shape[] = args.tiny
  ? [{ name: 'tiny up', N: 96, K: 64 }, { name: 'tiny down', N: 64, K: 96 }]
  : [
    { name: 'Qwen3-0.6B gate/up', N: 3072, K: 1024 },
    { name: 'Qwen3-0.6B down', N: 1024, K: 3072 },
    { name: 'Qwen3-0.6B LM head', N: 151936, K: 1024 },
    { name: 'Qwen3-1.7B gate/up', N: 6144, K: 2048 },
    { name: 'Qwen3-1.7B down', N: 2048, K: 6144 },
  ];
const DTYPES: DType[] = ['f32', 'bf16', 'q8_0', 'q4_0'];
const ROWS = args.tiny ? [1, 4] : [1, 128];

const ts = new CpuBackend('f32', { kernels: 'ts' });
const wasms = THREADS.map((threads) => new CpuBackend('f32', { kernels: 'wasm', threads }));
const wasm = wasms[0];
for (const [i, b] of wasms.entries()) {
  if (!b.wasm) throw new Error(`the WebAssembly kernels did not load: ${b.name}`);
  if (b.wasm.threads !== THREADS[i]) throw new Error(`${THREADS[i]} threads asked for, ${b.name} runs`);
}
const withTs = !args['no-ts'];

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const spread = (a: number[]) => `${Math.min(...a).toFixed(2)}–${Math.max(...a).toFixed(2)}`;

const bw = wasm.wasm!.readBandwidth(args.tiny ? 1 << 20 : 512 << 20);
const over = args.tiny ? '1 MiB' : '512 MiB';
console.log(`read bandwidth, one thread (wasm v128 loads, best of 5 over ${over}): ${(bw / 1e9).toFixed(2)} GB/s`);
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
console.log(`backends: ${withTs ? `${ts.name} | ` : ''}${wasms.map((b) => b.name).join(' | ')}; ${reps} reps, interleaved; ` +
  `times in ms, median (min–max); load average ${load()}`);
console.log('');
const tCols = THREADS.slice(1).map((t) => [`WASM ${t}T ms`, `${t}T/1T speed`]).flat();
const head = ['shape [N, K]', 'dtype', 'M', ...(withTs ? ['TS ms'] : []), 'WASM ms', ...(withTs ? ['WASM/TS speed'] : []),
  'WASM GB/s (weights)', 'of bandwidth', 'WASM GFLOP/s', ...tCols];
console.log(`| ${head.join(' | ')} |`);
console.log(`|---|---|${head.slice(2).map(() => '---:').join('|')}|`);

/** One timed F.linear; the output is read (on the CPU a view) and disposed. */
function timeLinear(x: Tensor, w: Tensor): number {
  const t0 = performance.now();
  F.linear(x, w).dispose();
  return performance.now() - t0;
}

const rows: object[] = [];
for (const shape of SHAPES) {
  for (const dtype of DTYPES) {
    const label = `${shape.name} [${shape.N}, ${shape.K}]`;
    if (args.filter && !`${label} ${dtype}`.toLowerCase().includes(args.filter.toLowerCase())) continue;
    const rng = new Rng(1);
    // one encoding, stored on both backends (fromBytes copies it)
    const wVals = new Float32Array(shape.N * shape.K);
    for (let i = 0; i < wVals.length; i++) wVals[i] = (rng.next() - 0.5) * 0.1;
    const w0 = ts.fromValues(wVals, [shape.N, shape.K], dtype);
    const bytes = ts.readBytesSync(w0);
    const wt = ts.fromBytes(bytes, [shape.N, shape.K], dtype);
    const ws = wasms.map((b) => b.fromBytes(bytes, [shape.N, shape.K], dtype));
    w0.dispose();
    const wBytes = byteSize(dtype, [shape.N, shape.K]);
    for (const M of ROWS) {
      const xv = rng.normals(M * shape.K);
      const xt = ts.fromValues(xv, [M, shape.K]);
      const xs = wasms.map((b) => b.fromValues(xv, [M, shape.K]));
      // the TS GEMM at the LM head takes minutes a call: left out
      const runTs = withTs && !(M > 1 && shape.N > 100000);
      // warm-up: the weight's first product copies it into the kernels' heap (where it does not live there)
      for (const [i, x] of xs.entries()) timeLinear(x, ws[i]);
      if (runTs) timeLinear(xt, wt);
      const tTs: number[] = [];
      const tW: number[][] = wasms.map(() => []);
      for (let r = 0; r < reps; r++) {
        if (runTs) tTs.push(timeLinear(xt, wt));
        for (const [i, x] of xs.entries()) tW[i].push(timeLinear(x, ws[i]));
      }
      const tWasm = tW[0];
      const mw = median(tWasm);
      const gbs = wBytes / (mw / 1000) / 1e9;
      const gflops = (2 * M * shape.N * shape.K) / (mw / 1000) / 1e9;
      const tsCell = runTs ? `${median(tTs).toFixed(2)} (${spread(tTs)})` : 'skipped';
      const ratio = runTs ? `${(median(tTs) / mw).toFixed(1)}×` : '';
      // each thread count's speed over one: the median of the per-rep ratios (the reps are interleaved)
      const speed = (i: number) => median(tWasm.map((t, r) => t / tW[i][r]));
      const cells = [label, dtype, M, ...(withTs ? [tsCell] : []), `${mw.toFixed(2)} (${spread(tWasm)})`, ...(withTs ? [ratio] : []),
        gbs.toFixed(2), `${((100 * gbs * 1e9) / bw).toFixed(0)} %`, gflops.toFixed(1),
        ...THREADS.slice(1).flatMap((_, j) => [`${median(tW[j + 1]).toFixed(2)} (${spread(tW[j + 1])})`, `${speed(j + 1).toFixed(2)}×`])];
      console.log(`| ${cells.join(' | ')} |`);
      rows.push({
        shape: label, dtype, M, tsMs: runTs ? median(tTs) : null, wasmMs: mw, gbs, ofBandwidth: (gbs * 1e9) / bw, gflops,
        threads: THREADS, threadMs: tW.map(median), threadSpeed: THREADS.map((_, i) => speed(i)), load: loadavg()[0],
      });
      xt.dispose();
      for (const x of xs) x.dispose();
    }
    wt.dispose();
    for (const w of ws) w.dispose();
  }
}
console.log('');
for (const r of rows) console.log(`json ${JSON.stringify(r)}`);
