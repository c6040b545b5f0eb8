/** LayerNorm shaders: one workgroup per row, like RMSNorm (see ../rmsnorm/wgsl.ts for the reduction). */
import type { DType } from '../../formats/dtype';
import { rowPrologue, wgSumWgsl } from '../rmsnorm/wgsl';
import { loadFn, mainSignature } from '../wgsl';

/** Storage declarations in binding order: `[name, dtype | 'out']`, optional entries left out. */
function declare(list: [string, DType | 'out'][]): string {
  return list
    .map(([n, d], i) => (d === 'out'
      ? `@group(0) @binding(${i + 1}) var<storage, read_write> ${n}: array<f32>;`
      : n === 'x' || n === 'g'
        ? `@group(0) @binding(${i + 1}) var<storage, read> ${n}: array<f32>;`
        : loadFn(n, i + 1, d)))
    .join('\n');
}

/** mean and rstd of the row at `base` (two reductions: mean first, then the centred sum of squares). */
const statsBody = (wg: number) => `var s = 0.0;
  for (var c = lid.x; c < u.cols; c += ${wg}u) { s += x[base + c]; }
  let mean = wg_sum(vec2<f32>(s, 0.0), lid.x).x / f32(u.cols);
  var v = 0.0;
  for (var c = lid.x; c < u.cols; c += ${wg}u) { let d = x[base + c] - mean; v += d * d; }
  let rstd = inverseSqrt(wg_sum(vec2<f32>(v, 0.0), lid.x).x / f32(u.cols) + u.eps);`;

/** gdt/bdt: dtype of γ/β, or null when the affine part is off. */
export function layernormWgsl(gdt: DType | null, bdt: DType | null, wg: number): string {
  const list: [string, DType | 'out'][] = [['x', 'f32']];
  if (gdt) list.push(['gamma', gdt]);
  if (bdt) list.push(['beta', bdt]);
  list.push(['out', 'out']);
  return `struct P { rows: u32, cols: u32, eps: f32 }
@group(0) @binding(0) var<uniform> u: P;
${declare(list)}
${wgSumWgsl(wg)}
${mainSignature(wg)} {
  ${rowPrologue}
  ${statsBody(wg)}
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    out[base + c] = (x[base + c] - mean) * rstd${gdt ? ' * load_gamma(c)' : ''}${bdt ? ' + load_beta(c)' : ''};
  }
}`;
}

/**
 * Backward: dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)), ĝ = g·γ; stats (mean, rstd) per row for dγ/dβ.
 * Without `withDx` only the stats (frozen input, trainable γ/β).
 * A one-column row normalises to 0 whatever x is, so its dx is exactly 0. The formula gives that only when ĝ is
 * rounded alike in both loops; WGSL cannot forbid a driver from fusing ĝ − mean(ĝ) into an FMA (NVIDIA's Vulkan
 * driver does), which leaves ĝ's rounding error times rstd = 1/sqrt(eps) (3.5e-5 on an H200), so that row is set.
 */
export function layernormBackwardWgsl(gdt: DType | null, wg: number, withDx: boolean): string {
  const list: [string, DType | 'out'][] = [['x', 'f32']];
  if (withDx) {
    list.push(['g', 'f32']);
    if (gdt) list.push(['gamma', gdt]);
    list.push(['dx', 'out']);
  }
  list.push(['stats', 'out']);
  const gh = `g[base + c]${gdt ? ' * load_gamma(c)' : ''}`;
  return `struct P { rows: u32, cols: u32, eps: f32 }
@group(0) @binding(0) var<uniform> u: P;
${declare(list)}
${wgSumWgsl(wg)}
${mainSignature(wg)} {
  ${rowPrologue}
  ${statsBody(wg)}
  if (lid.x == 0u) { stats[2u * row] = mean; stats[2u * row + 1u] = rstd; }
  ${withDx ? `var acc = vec2<f32>(0.0, 0.0);
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    let gh = ${gh};
    acc += vec2<f32>(gh, gh * (x[base + c] - mean) * rstd);
  }
  let m = wg_sum(acc, lid.x) / f32(u.cols);
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    dx[base + c] = select(rstd * (${gh} - m.x - (x[base + c] - mean) * rstd * m.y), 0.0, u.cols == 1u);
  }` : ''}
}`;
}
