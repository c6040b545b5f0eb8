/**
 * Walking tensors split across bindings (GpuRef.chunks along dim 0). A kernel maps each operand's dim 0
 * onto one of its logical dims; cutting every logical dim at all chunk boundaries gives segments that
 * lie inside one chunk of every operand, so one dispatch per segment sees plain bindings.
 * (A candidate for kernels/kernel.ts: embedding and cast use it too.)
 */
import type { GpuChunk, GpuRef } from './kernel';

/** Start (in logical units) of every chunk of `ref`, plus the end. */
export function chunkStarts(ref: GpuRef, unit: number): number[] {
  const out = [0];
  for (const c of ref.chunks) out.push(out[out.length - 1] + c.rows * unit);
  return out;
}

/** [start, end) segments of [0, len) cut at `cuts` and at least every `maxLen`; one empty segment when len is 0. */
export function segments(len: number, cuts: readonly number[], maxLen = Infinity): [number, number][] {
  if (len === 0) return [[0, 0]];
  const pts = new Set<number>([0, len]);
  for (const c of cuts) if (c > 0 && c < len) pts.add(c);
  if (Number.isFinite(maxLen)) for (let p = maxLen; p < len; p += maxLen) pts.add(p);
  const sorted = [...pts].sort((x, y) => x - y);
  return sorted.slice(0, -1).map((s, i) => [s, sorted[i + 1]]);
}

/** The chunk holding logical position `pos` (given chunkStarts), and `pos` relative to that chunk. */
export function locate(ref: GpuRef, starts: readonly number[], pos: number): { chunk: GpuChunk; local: number } {
  let i = 0;
  while (i < ref.chunks.length - 1 && starts[i + 1] <= pos) i++;
  return { chunk: ref.chunks[i], local: pos - starts[i] };
}

export const bind = (c: GpuChunk): GPUBufferBinding => ({ buffer: c.buffer, offset: c.offset, size: c.size });
