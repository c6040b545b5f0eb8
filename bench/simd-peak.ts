/**
 * `npx tsx bench/simd-peak.ts [--reps 5]`: what one thread of WebAssembly SIMD can issue here, the ceiling the CPU
 * backend's GEMM is measured against. A register-only loop of 8 independent f32x4 accumulators, each step
 * c += a·b, written two ways: f32x4.mul then f32x4.add (what the kernels use), and f32x4.relaxed_madd (relaxed SIMD,
 * behind --experimental-wasm-relaxed-simd in Node 20, set here before compiling). `a` changes every iteration so that
 * no product is hoisted out of the loop. The first call runs V8's baseline code (Liftoff), later ones the optimised
 * code it tiers up to: the first line of each is printed apart. GFLOP/s counts a multiply-add as 2.
 */
import { setFlagsFromString } from 'node:v8';
import { parseArgs } from 'node:util';
import wabtInit from 'wabt';
import { median } from '../src/util/stats';

setFlagsFromString('--experimental-wasm-relaxed-simd');
const { values: args } = parseArgs({ options: { reps: { type: 'string', default: '5' } } });
const reps = Number(args.reps);
const ACC = 8;
const N = 20_000_000;

/** The loop as WAT: `fma` uses relaxed_madd, `muladd` mul then add. */
function loopWat(name: string, fma: boolean): string {
  const step = (k: number) => {
    const b = `(local.get $b${k % 2})`;
    const c = `(local.get $c${k})`;
    return `(local.set $c${k} ${fma ? `(f32x4.relaxed_madd (local.get $a) ${b} ${c})` : `(f32x4.add (f32x4.mul (local.get $a) ${b}) ${c})`})`;
  };
  const accs = Array.from({ length: ACC }, (_, k) => `(local $c${k} v128)`).join(' ');
  return `(func (export "${name}") (param $n i32) (result f32)
    (local $a v128) (local $b0 v128) (local $b1 v128) ${accs} (local $i i32)
    (local.set $a (f32x4.splat (f32.const 1.0001)))
    (local.set $b0 (f32x4.splat (f32.const 0.9999)))
    (local.set $b1 (f32x4.splat (f32.const 1e-7)))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $a (f32x4.add (local.get $a) (local.get $b1)))
      ${Array.from({ length: ACC }, (_, k) => step(k)).join('\n      ')}
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l)))
    (f32x4.extract_lane 0 (f32x4.add (local.get $c0) (local.get $c${ACC - 1}))))`;
}

const wabt = await wabtInit();
const wat = `(module ${loopWat('muladd', false)} ${loopWat('fma', true)})`;
const { buffer } = wabt.parseWat('simd-peak.wat', wat, { simd: true, relaxed_simd: true }).toBinary({});
const instance = new WebAssembly.Instance(new WebAssembly.Module(new Uint8Array(buffer)));
const run = instance.exports as Record<'muladd' | 'fma', (n: number) => number>;
const gflops = (f: 'muladd' | 'fma') => {
  const t0 = performance.now();
  run[f](N);
  return (N * ACC * 4 * 2) / ((performance.now() - t0) / 1000) / 1e9;
};
const first = { muladd: gflops('muladd'), fma: gflops('fma') };
const warm: Record<'muladd' | 'fma', number[]> = { muladd: [], fma: [] };
for (let r = 0; r < reps; r++) for (const f of ['muladd', 'fma'] as const) warm[f].push(gflops(f));
console.log(`| loop, one thread | first call (baseline code) | later calls, median (min–max) over ${reps} |`);
console.log('|---|---:|---:|');
for (const f of ['muladd', 'fma'] as const) {
  const xs = warm[f];
  const label = f === 'muladd' ? 'f32x4.mul + f32x4.add' : 'f32x4.relaxed_madd';
  console.log(`| ${label} | ${first[f].toFixed(1)} GFLOP/s | ${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}) GFLOP/s |`);
}
