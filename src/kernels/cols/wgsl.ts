/**
 * WGSL for the column ops (cpu.ts), one invocation per output element. Values move as u32 words, so they arrive
 * bit for bit (NaN payloads and signed zeros included). Sizes are uniforms: one pipeline per part count.
 */
import { flatIndex, mainSignature } from '../wgsl';

export function sliceColsWgsl(wg: number): string {
  return `struct P { n: u32, c: u32, start: u32, w: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  out[i] = x[(i / u.w) * u.c + u.start + i % u.w];
}`;
}

/** Concatenation of `parts` inputs p0.. (uniform widths w0..) into out, bound after them. */
export function concatColsWgsl(wg: number, parts: number): string {
  const ks = Array.from({ length: parts }, (_, k) => k);
  // every part but the last is taken when the column lies inside it; the last takes what is left
  const pick = ks.map((k) =>
    k < parts - 1
      ? `  if (col < u.w${k}) { out[i] = p${k}[r * u.w${k} + col]; return; }\n  col -= u.w${k};`
      : `  out[i] = p${k}[r * u.w${k} + col];`,
  );
  return `struct P { n: u32, c: u32, ${ks.map((k) => `w${k}: u32`).join(', ')} }
@group(0) @binding(0) var<uniform> u: P;
${ks.map((k) => `@group(0) @binding(${k + 1}) var<storage, read> p${k}: array<u32>;`).join('\n')}
@group(0) @binding(${parts + 1}) var<storage, read_write> out: array<u32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let r = i / u.c;
  var col = i % u.c;
${pick.join('\n')}
}`;
}
