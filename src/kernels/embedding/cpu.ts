/**
 * CPU reference for embedding gather and its scatter-add backward. Out-of-range ids throw here; the GPU
 * kernels cannot throw, so they write zero rows and drop those gradients (see index.ts).
 */
import { InvalidArgument } from '../../errors';
import { type DType, rowBytes } from '../../formats/dtype';
import { decode } from '../../formats/encode';
import { type CpuArray, type FloatArray, isFloatArray } from '../kernel';

function checkId(id: number, i: number, V: number) {
  if (id < 0 || id >= V)
    throw new InvalidArgument(
      `embedding: id ${id} at position ${i} is outside the table's [0, ${V}) rows; check the tokenizer's vocabulary size`,
    );
}

/** out[i, :] = table[ids[i], :], decoding only the rows that are used (tables can be vocab × hidden). */
export function embeddingForward(ids: Int32Array, table: CpuArray, dtype: DType, V: number, d: number, out: FloatArray) {
  const rb = rowBytes(dtype, d);
  const bytes = isFloatArray(table) ? null : new Uint8Array(table.buffer, table.byteOffset, table.byteLength);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    checkId(id, i, V);
    if (!bytes) {
      for (let c = 0; c < d; c++) out[i * d + c] = (table as FloatArray)[id * d + c];
    } else {
      out.set(decode(dtype, bytes.subarray(id * rb, (id + 1) * rb), [1, d]), i * d);
    }
  }
}

/** gTable[v, :] = Σ_{i: ids[i] = v} g[i, :], summed in position order. */
export function embeddingBackward(ids: Int32Array, g: FloatArray, V: number, d: number, out: FloatArray) {
  out.fill(0);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    checkId(id, i, V);
    for (let c = 0; c < d; c++) out[id * d + c] += g[i * d + c];
  }
}
