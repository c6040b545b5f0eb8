/**
 * `npm run bench:cpu-kernels [-- --reps 5] [--filter bf16] [--tiny]`: the CPU backend's matmul, the TypeScript
 * reference against the WebAssembly SIMD kernels, on y = x·Wᵀ at the real widths of Qwen3-0.6B (hidden 1024,
 * intermediate 3072, vocab 151936) and Qwen3-1.7B (2048, 6144), per weight dtype, for one row of x (decode: a GEMV)
 * and 128 (prefill: a GEMM). Both paths run through F.linear on a CpuBackend, so the staging of x and y counts.
 * The two paths alternate within each rep; each line gives the medians and spreads (min–max) over the reps, the
 * weight bytes read per second, the fraction of the read bandwidth of one thread measured here first, and the ratio.
 * `--tiny` runs small widths once (CI proves the program still runs).
 */
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
  },
});
const reps = args.tiny ? 1 : Number(args.reps);

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
const wasm = new CpuBackend('f32', { kernels: 'wasm' });
if (!wasm.wasm) throw new Error(`the WebAssembly kernels did not load: ${wasm.name}`);

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const spread = (a: number[]) => `${Math.min(...a).toFixed(2)}–${Math.max(...a).toFixed(2)}`;

const bw = wasm.wasm.readBandwidth(args.tiny ? 1 << 20 : 512 << 20);
console.log(`read bandwidth, one thread (wasm v128 loads, best of 5 over ${args.tiny ? '1 MiB' : '512 MiB'}): ${(bw / 1e9).toFixed(2)} GB/s`);
console.log(`backends: ${ts.name} | ${wasm.name}; ${reps} reps, interleaved; times in ms, median (min–max)`);
console.log('');
console.log('| shape [N, K] | dtype | M | TS ms | WASM ms | WASM/TS speed | WASM GB/s (weights) | of bandwidth | WASM GFLOP/s |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|');

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
    const ww = wasm.fromBytes(bytes, [shape.N, shape.K], dtype);
    w0.dispose();
    const wBytes = byteSize(dtype, [shape.N, shape.K]);
    for (const M of ROWS) {
      const xv = rng.normals(M * shape.K);
      const xt = ts.fromValues(xv, [M, shape.K]);
      const xw = wasm.fromValues(xv, [M, shape.K]);
      // the TS GEMM at the LM head takes minutes a call: left out
      const runTs = !(M > 1 && shape.N > 100000);
      timeLinear(xw, ww); // warm-up: the weight's first product copies it into the kernels' heap
      if (runTs) timeLinear(xt, wt);
      const tTs: number[] = [];
      const tWasm: number[] = [];
      for (let r = 0; r < reps; r++) {
        if (runTs) tTs.push(timeLinear(xt, wt));
        tWasm.push(timeLinear(xw, ww));
      }
      const mw = median(tWasm);
      const gbs = wBytes / (mw / 1000) / 1e9;
      const gflops = (2 * M * shape.N * shape.K) / (mw / 1000) / 1e9;
      const tsCell = runTs ? `${median(tTs).toFixed(2)} (${spread(tTs)})` : 'skipped';
      const ratio = runTs ? `${(median(tTs) / mw).toFixed(1)}×` : '';
      console.log(
        `| ${label} | ${dtype} | ${M} | ${tsCell} | ${mw.toFixed(2)} (${spread(tWasm)}) | ${ratio} | ${gbs.toFixed(2)} | ` +
          `${((100 * gbs * 1e9) / bw).toFixed(0)} % | ${gflops.toFixed(1)} |`,
      );
      rows.push({ shape: label, dtype, M, tsMs: runTs ? median(tTs) : null, wasmMs: mw, gbs, ofBandwidth: (gbs * 1e9) / bw, gflops });
      xt.dispose();
      xw.dispose();
    }
    wt.dispose();
    ww.dispose();
  }
}
console.log('');
for (const r of rows) console.log(`json ${JSON.stringify(r)}`);
