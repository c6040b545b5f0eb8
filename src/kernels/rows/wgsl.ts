/**
 * WGSL for the row ops: one invocation per 32-bit word, copying a contiguous run of words from one
 * binding into another. Counts and offsets are uniforms, so one pipeline serves every shape.
 * Words are moved as u32, so values (NaN payloads and signed zeros included) arrive bit for bit.
 */
import { flatIndex, mainSignature } from '../wgsl';

export function copyWordsWgsl(wg: number): string {
  return `struct P { n: u32, src_off: u32, dst_off: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  dst[u.dst_off + i] = src[u.src_off + i];
}`;
}
