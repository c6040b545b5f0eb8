/**
 * A minimal GGUF v2/v3 writer (spec: ggml/docs/gguf.md), little-endian, for tests only: the reader and the
 * GGUF model loader are checked against files built here rather than against llama.cpp's own writer, which
 * is not available offline. `ggufBlocks` turns our q8_0/q4_0 row layout back into ggml's interleaved blocks.
 */
import { type DType, QK, quantBytesPerRow, rowBytes } from '../formats/dtype';
import { GGML_TYPE } from '../formats/gguf';

export type GgufKv =
  | { key: string; type: 'str'; value: string }
  | { key: string; type: 'u32' | 'i32' | 'f32'; value: number }
  | { key: string; type: 'arr_str'; value: string[] }
  | { key: string; type: 'arr_i32'; value: number[] };

/** `ne` is GGUF's innermost-first shape (a row-major [rows, cols] is ne [cols, rows]). */
export interface GgufWriterTensor { name: string; ne: number[]; type: number; data: Uint8Array }

class W {
  bytes: number[] = [];
  u8(...v: number[]) { for (const b of v) this.bytes.push(b); }
  u32(v: number) { const b = new Uint8Array(4); new DataView(b.buffer).setUint32(0, v, true); this.u8(...b); }
  i32(v: number) { this.u32(v >>> 0); }
  u64(v: number) { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, BigInt(v), true); this.u8(...b); }
  f32(v: number) { const b = new Uint8Array(4); new DataView(b.buffer).setFloat32(0, v, true); this.u8(...b); }
  str(s: string) { const b = new TextEncoder().encode(s); this.u64(b.length); this.u8(...b); }
  pad(a: number) { while (this.bytes.length % a) this.bytes.push(0); }
}

export function writeGguf(kvs: GgufKv[], tensors: GgufWriterTensor[], opts: { version?: number; alignment?: number } = {}): Uint8Array {
  const align = opts.alignment ?? 32;
  const w = new W();
  w.u8(0x47, 0x47, 0x55, 0x46); // "GGUF"
  w.u32(opts.version ?? 3);
  w.u64(tensors.length);
  w.u64(kvs.length);
  for (const kv of kvs) {
    w.str(kv.key);
    switch (kv.type) {
      case 'str': w.u32(8); w.str(kv.value); break;
      case 'u32': w.u32(4); w.u32(kv.value); break;
      case 'i32': w.u32(5); w.i32(kv.value); break;
      case 'f32': w.u32(6); w.f32(kv.value); break;
      case 'arr_str': w.u32(9); w.u32(8); w.u64(kv.value.length); kv.value.forEach((s) => w.str(s)); break;
      case 'arr_i32': w.u32(9); w.u32(5); w.u64(kv.value.length); kv.value.forEach((v) => w.i32(v)); break;
    }
  }
  let off = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    offsets.push(off);
    off = Math.ceil((off + t.data.length) / align) * align;
  }
  tensors.forEach((t, i) => {
    w.str(t.name); w.u32(t.ne.length); t.ne.forEach((d) => w.u64(d)); w.u32(t.type); w.u64(offsets[i]);
  });
  w.pad(align);
  for (const t of tensors) { w.u8(...t.data); w.pad(align); }
  return new Uint8Array(w.bytes);
}

/** Our storage bytes of `dtype` [rows, cols] as the GGUF tensor data of the matching ggml type. */
export function ggufBlocks(dtype: DType, bytes: Uint8Array, shape: readonly number[]): { type: number; data: Uint8Array } {
  if (dtype === 'f32') return { type: GGML_TYPE.F32, data: bytes.slice() };
  if (dtype === 'f16') return { type: GGML_TYPE.F16, data: bytes.slice() };
  if (dtype === 'bf16') return { type: GGML_TYPE.BF16, data: bytes.slice() };
  if (dtype !== 'q8_0' && dtype !== 'q4_0') throw new Error(`ggufBlocks: no ggml type for ${dtype}`);
  const cols = shape[shape.length - 1];
  const rows = shape.reduce((a, b) => a * b, 1) / cols;
  const nb = cols / QK;
  const qPer = dtype === 'q8_0' ? 32 : 16;
  const stride = rowBytes(dtype, cols);
  const qBytes = quantBytesPerRow(dtype, cols);
  const out = new Uint8Array(rows * nb * (qPer + 2));
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < nb; b++) {
      const blk = (r * nb + b) * (qPer + 2);
      out[blk] = bytes[r * stride + qBytes + 2 * b];
      out[blk + 1] = bytes[r * stride + qBytes + 2 * b + 1];
      out.set(bytes.subarray(r * stride + b * qPer, r * stride + (b + 1) * qPer), blk + 2);
    }
  }
  return { type: dtype === 'q8_0' ? GGML_TYPE.Q8_0 : GGML_TYPE.Q4_0, data: out };
}
