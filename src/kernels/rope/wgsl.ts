/**
 * RoPE shader: one invocation per rotated pair or passed-through element of each head
 * (W = D − R/2 work items per head), over a folded 1-D grid.
 */
import { flatIndex, mainSignature } from '../wgsl';

/** π/2 as P1 + P2 + P3 + P4 with 7-bit P1..P3: k·Pi is exact in f32 for |k| < 2^17. */
function splitHalfPi(): number[] {
  const top = (v: number, bits: number) => {
    const q = 2 ** (Math.floor(Math.log2(Math.abs(v))) - bits + 1);
    return Math.round(v / q) * q;
  };
  const parts: number[] = [];
  let rest = Math.PI / 2;
  for (let i = 0; i < 3; i++) {
    parts.push(top(rest, 7));
    rest -= parts[i];
  }
  return [...parts, Math.fround(rest)];
}
const lit = (v: number) => v.toPrecision(17);

/**
 * (cos a, sin a) for an f32 angle, device-independent: Cody–Waite reduction by π/2 (exact for
 * |a| < 2^17·π/2 ≈ 2e5 rad, then degrading gradually) and Cephes' sinf/cosf minimax polynomials on
 * [−π/4, π/4] (about 1 ulp). WGSL's own sin/cos promise only 2^-11 absolute inside [−π, π], and
 * SwiftShader delivers about that (2e-4); long contexts put angles at 1e5 rad.
 */
export const COS_SIN = (() => {
  const [p1, p2, p3, p4] = splitHalfPi().map(lit);
  return `fn cos_sin(a: f32) -> vec2<f32> {
  let k = round(a * ${lit(2 / Math.PI)});
  let r = (((a - k * ${p1}) - k * ${p2}) - k * ${p3}) - k * ${p4};
  let z = r * r;
  let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  let q = i32(k) & 3;
  if (q == 1) { return vec2<f32>(-s, c); }
  if (q == 2) { return vec2<f32>(-c, -s); }
  if (q == 3) { return vec2<f32>(s, -c); }
  return vec2<f32>(c, s);
}`;
})();

export function ropeWgsl(wg: number): string {
  return `struct P { n: u32, heads: u32, d: u32, half: u32, w: u32, sgn: f32, scale: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> pos: array<i32>;
@group(0) @binding(3) var<storage, read> freq: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
${COS_SIN}
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let th = i / u.w;
  let j = i - th * u.w;
  let base = th * u.d;
  if (j < u.half) {
    let a = f32(pos[th / u.heads]) * freq[j];
    let cs = cos_sin(a) * u.scale;
    let c = cs.x;
    let s = cs.y * u.sgn;
    let x0 = x[base + j];
    let x1 = x[base + j + u.half];
    out[base + j] = x0 * c - x1 * s;
    out[base + j + u.half] = x1 * c + x0 * s;
  } else {
    let e = base + j + u.half;
    out[e] = x[e];
  }
}`;
}
