/**
 * GGUF reader: header (metadata, tensor infos) through @huggingface/gguf, tensor data converted to our
 * storage dtypes (dtype.ts). F32/F16/BF16 are copied; Q8_0/Q4_0 blocks are rearranged byte for byte into
 * our row layout (quant bytes first, then the f16 scales), so values are exactly what ggml dequantizes;
 * Q4_K/Q6_K are dequantized to f32 with ggml's f32 arithmetic.
 *
 * The parser only knows URLs, so every source goes through a custom `fetch` that answers its Range
 * requests from a ByteSource: one code path for in-memory buffers, local files and HTTP, Node and browser.
 */
import { gguf, type MetadataValue } from '@huggingface/gguf';
import { CorruptCheckpoint, RmasError, UnsupportedFeature } from '../errors';
import type { ByteSource } from './sources';
import { type DType, QK, byteSize, f16BitsToF32, numel, quantBytesPerRow, rowBytes } from './dtype';

/** ggml tensor types (ggml.h `enum ggml_type`) this reader knows by name. */
export const GGML_TYPE = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q8_1: 9, Q2_K: 10, Q3_K: 11, Q4_K: 12,
  Q5_K: 13, Q6_K: 14, Q8_K: 15, I8: 24, I16: 25, I32: 26, I64: 27, F64: 28, BF16: 30,
} as const;
const TYPE_NAME = new Map<number, string>(Object.entries(GGML_TYPE).map(([k, v]) => [v, k]));
export const ggmlTypeName = (t: number) => TYPE_NAME.get(t) ?? `type ${t}`;

// [elements per block, bytes per block] for the types we can read.
const BLOCK: Record<number, [number, number]> = {
  [GGML_TYPE.F32]: [1, 4], [GGML_TYPE.F16]: [1, 2], [GGML_TYPE.BF16]: [1, 2],
  [GGML_TYPE.Q8_0]: [32, 34], [GGML_TYPE.Q4_0]: [32, 18], [GGML_TYPE.Q4_K]: [256, 144], [GGML_TYPE.Q6_K]: [256, 210],
};
// The storage dtype each readable type becomes.
const STORAGE: Record<number, DType> = {
  [GGML_TYPE.F32]: 'f32', [GGML_TYPE.F16]: 'f16', [GGML_TYPE.BF16]: 'bf16', [GGML_TYPE.Q8_0]: 'q8_0',
  [GGML_TYPE.Q4_0]: 'q4_0', [GGML_TYPE.Q4_K]: 'f32', [GGML_TYPE.Q6_K]: 'f32',
};

export interface GgufTensorInfo {
  name: string;
  /** Row-major [outer, ..., inner] (GGUF stores ne[] innermost-first; this is it reversed). */
  shape: number[];
  /** ggml type id (GGML_TYPE) and its name. */
  ggmlType: number;
  typeName: string;
  /** Absolute byte offset of the tensor's data in the file, and its length there. */
  offset: number;
  byteLength: number;
  /** What readGgufTensor returns it as, or null when the type is not supported. */
  dtype: DType | null;
}

export interface GgufFile {
  name: string;
  source: ByteSource;
  version: number;
  /** Key/value metadata as written (u64/i64 stay bigint), without the header's version and counts. */
  metadata: Record<string, MetadataValue>;
  tensors: GgufTensorInfo[];
  alignment: number;
  /** Absolute offset where tensor data starts (tensor offsets are relative to it in the file). */
  dataOffset: number;
}

export interface GgufTensor {
  dtype: DType;
  shape: number[];
  /** Storage bytes of `dtype` for `shape` (byteSize(dtype, shape) long, own buffer, 4-byte aligned). */
  bytes: Uint8Array;
}

const corrupt = (file: string, what: string) =>
  new CorruptCheckpoint(`${file}: ${what}; the file is damaged or not GGUF: download or convert it again`);

/** Serves the parser's `Range: bytes=a-b` requests from `src` (the parser reads 2 MB chunks from 0). */
function sourceFetch(src: ByteSource, size: number): typeof fetch {
  return (async (_url: unknown, init?: RequestInit) => {
    const range = new Headers(init?.headers).get('range') ?? '';
    const m = /bytes=(\d+)-(\d+)/.exec(range);
    const start = m ? Number(m[1]) : 0;
    const end = Math.min(size, m ? Number(m[2]) + 1 : size);
    const body = start < end ? (await src.read(start, end - start)).slice() : new Uint8Array(0);
    return new Response(body, {
      status: 206,
      headers: { 'content-range': `bytes ${start}-${Math.max(start, end - 1)}/${size}` },
    });
  }) as typeof fetch;
}

/** Reads the header of a GGUF file: metadata, tensor infos, alignment and where the data starts. */
export async function readGgufHeader(source: ByteSource, name = source.name): Promise<GgufFile> {
  const size = await source.size();
  if (size < 24) throw corrupt(name, `only ${size} bytes, shorter than a GGUF header`);
  const head = await source.read(0, 8);
  const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
  if (dv.getUint32(0, true) !== 0x46554747) {
    const magic = Array.from(head.subarray(0, 4), (b) => b.toString(16).padStart(2, '0')).join(' ');
    throw corrupt(name, `bad magic ${magic} (expected "GGUF")`);
  }
  const version = dv.getUint32(4, true);
  const swapped = dv.getUint32(4, false);
  if (version !== 2 && version !== 3) {
    if (swapped === 2 || swapped === 3) {
      throw new UnsupportedFeature(`${name} is a big-endian GGUF; convert it to a little-endian GGUF (llama.cpp's gguf tools)`);
    }
    throw corrupt(name, `unsupported GGUF version ${version} (this reader handles versions 2 and 3)`);
  }

  let parsed: Awaited<ReturnType<typeof gguf>>;
  try {
    // The URL is never contacted: our fetch answers every request from `source`.
    parsed = await gguf(`https://gguf.invalid/${encodeURIComponent(name)}`, { fetch: sourceFetch(source, size) });
  } catch (e) {
    if (e instanceof RmasError) throw e;
    throw corrupt(name, `header does not parse (${(e as Error).message})`);
  }
  // The parser zero-fills past the end of the file, so a truncated header can "parse": check its end.
  const headerEnd = parsed.tensorInfoByteRange[1];
  if (headerEnd > size) throw corrupt(name, `truncated: the header needs ${headerEnd} bytes, the file has ${size}`);

  const { version: _v, tensor_count: _t, kv_count: _k, ...kv } = parsed.metadata as Record<string, MetadataValue>;
  const alignment = Number(kv['general.alignment'] ?? 32);
  const dataOffset = Number(parsed.tensorDataOffset);
  const tensors = parsed.tensorInfos.map((t): GgufTensorInfo => {
    const shape = t.shape.map(Number).reverse();
    const ggmlType = t.dtype as number;
    const rel = Number(t.offset);
    const offset = dataOffset + rel;
    const block = BLOCK[ggmlType];
    const n = numel(shape);
    // ggml blocks run along a row: a row (the innermost dimension) must hold whole blocks, not only the tensor
    const cols = shape.length ? shape[shape.length - 1]! : 1;
    if (block && (n % block[0] !== 0 || cols % block[0] !== 0)) {
      throw corrupt(name, `tensor "${t.name}" [${shape}] has rows of ${cols} elements, not a whole number of ` +
        `${ggmlTypeName(ggmlType)} blocks of ${block[0]}`);
    }
    if (rel % alignment !== 0) throw corrupt(name, `tensor "${t.name}" offset ${rel} is not aligned to ${alignment}`);
    const byteLength = block ? (n / block[0]) * block[1] : 0;
    if (offset + byteLength > size) {
      throw corrupt(name, `tensor "${t.name}" spans bytes ${offset}..${offset + byteLength} but the file has ${size} (truncated?)`);
    }
    return { name: t.name, shape, ggmlType, typeName: ggmlTypeName(ggmlType), offset, byteLength, dtype: STORAGE[ggmlType] ?? null };
  });
  return { name, source, version, metadata: kv, tensors, alignment, dataOffset };
}

/** Reads one tensor and converts it to our storage layout (see the module comment for each type). */
export async function readGgufTensor(file: GgufFile, tensor: string | GgufTensorInfo): Promise<GgufTensor> {
  const info = typeof tensor === 'string' ? file.tensors.find((t) => t.name === tensor) : tensor;
  if (!info)
    throw new CorruptCheckpoint(
      `${file.name} has no tensor "${String(tensor)}"; its tensors are ${file.tensors
        .slice(0, 8)
        .map((t) => t.name)
        .join(', ')}${file.tensors.length > 8 ? ', ...' : ''}`,
    );
  if (!info.dtype) {
    throw new UnsupportedFeature(
      `${file.name}: tensor "${info.name}" is ${info.typeName}, which this reader does not decode (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K); use a GGUF converted to f16, q8_0 or q4_0`,
    );
  }
  const raw = await file.source.read(info.offset, info.byteLength);
  if (raw.byteLength !== info.byteLength) {
    throw corrupt(file.name, `tensor "${info.name}": read ${raw.byteLength} of ${info.byteLength} bytes (truncated?)`);
  }
  return { dtype: info.dtype, shape: info.shape, bytes: ggufToStorage(info.ggmlType, raw, info.shape) };
}

/** Converts raw GGUF tensor bytes of ggml type `type` and row-major `shape` to our storage bytes. */
export function ggufToStorage(type: number, raw: Uint8Array, shape: readonly number[]): Uint8Array {
  const n = numel(shape);
  const cols = shape.length ? shape[shape.length - 1] : 1;
  const rows = cols ? n / cols : 0;
  const src = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  switch (type) {
    case GGML_TYPE.F32:
    case GGML_TYPE.F16:
    case GGML_TYPE.BF16:
      return raw.slice(); // same little-endian layout; slice() gives an own, aligned buffer
    case GGML_TYPE.Q8_0:
    case GGML_TYPE.Q4_0: {
      const d = type === GGML_TYPE.Q8_0 ? 'q8_0' : 'q4_0';
      const [, blockBytes] = BLOCK[type];
      const qPerBlock = blockBytes - 2;
      if (cols % QK !== 0) throw new CorruptCheckpoint(`${d} tensor rows of ${cols} elements are not whole blocks of ${QK}`);
      const out = new Uint8Array(byteSize(d, shape as number[]));
      const stride = rowBytes(d, cols);
      const qBytes = quantBytesPerRow(d, cols);
      const nb = cols / QK;
      for (let r = 0; r < rows; r++) {
        for (let b = 0; b < nb; b++) {
          const blk = (r * nb + b) * blockBytes;
          const dst = r * stride;
          out[dst + qBytes + 2 * b] = raw[blk];
          out[dst + qBytes + 2 * b + 1] = raw[blk + 1];
          out.set(raw.subarray(blk + 2, blk + blockBytes), dst + b * qPerBlock);
        }
      }
      return out;
    }
    case GGML_TYPE.Q4_K:
      return new Uint8Array(dequantQ4K(src, n).buffer);
    case GGML_TYPE.Q6_K:
      return new Uint8Array(dequantQ6K(src, n).buffer);
  }
  throw new UnsupportedFeature(`GGUF tensors of ${ggmlTypeName(type)} are not supported; use a GGUF converted to f16, q8_0 or q4_0`);
}

const fr = Math.fround;

// ggml-quants.c get_scale_min_k4: 6-bit scale and min j of a Q4_K block's 12 packed scale bytes.
function scaleMinK4(j: number, q: (i: number) => number): [number, number] {
  if (j < 4) return [q(j) & 63, q(j + 4) & 63];
  return [(q(j + 4) & 0xf) | ((q(j - 4) >> 6) << 4), (q(j + 4) >> 4) | ((q(j) >> 6) << 4)];
}

/** ggml dequantize_row_q4_K: 144-byte blocks of 256 (f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes). */
export function dequantQ4K(src: DataView, n: number): Float32Array {
  const y = new Float32Array(n);
  for (let i = 0; i < n / 256; i++) {
    const base = i * 144;
    const d = f16BitsToF32(src.getUint16(base, true));
    const dmin = f16BitsToF32(src.getUint16(base + 2, true));
    const sc = (k: number) => src.getUint8(base + 4 + k);
    let q = base + 16;
    let o = i * 256;
    for (let j = 0, is = 0; j < 256; j += 64, is += 2) {
      const [s1, m1] = scaleMinK4(is, sc);
      const [s2, m2] = scaleMinK4(is + 1, sc);
      const d1 = fr(d * s1), mn1 = fr(dmin * m1), d2 = fr(d * s2), mn2 = fr(dmin * m2);
      for (let l = 0; l < 32; l++) y[o++] = fr(d1 * (src.getUint8(q + l) & 0xf)) - mn1;
      for (let l = 0; l < 32; l++) y[o++] = fr(d2 * (src.getUint8(q + l) >> 4)) - mn2;
      q += 32;
    }
  }
  return y;
}

/** ggml dequantize_row_q6_K: 210-byte blocks of 256 (128 ql, 64 qh, 16 int8 scales, f16 d). */
export function dequantQ6K(src: DataView, n: number): Float32Array {
  const y = new Float32Array(n);
  for (let i = 0; i < n / 256; i++) {
    const base = i * 210;
    const d = f16BitsToF32(src.getUint16(base + 208, true));
    for (let half = 0; half < 2; half++) {
      const ql = base + 64 * half;
      const qh = base + 128 + 32 * half;
      const sc = base + 192 + 8 * half;
      const o = i * 256 + 128 * half;
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const h = src.getUint8(qh + l);
        const a = src.getUint8(ql + l);
        const b = src.getUint8(ql + l + 32);
        const q1 = ((a & 0xf) | ((h & 3) << 4)) - 32;
        const q2 = ((b & 0xf) | (((h >> 2) & 3) << 4)) - 32;
        const q3 = ((a >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const q4 = ((b >> 4) | (((h >> 6) & 3) << 4)) - 32;
        y[o + l] = fr(d * src.getInt8(sc + is)) * q1;
        y[o + l + 32] = fr(d * src.getInt8(sc + is + 2)) * q2;
        y[o + l + 64] = fr(d * src.getInt8(sc + is + 4)) * q3;
        y[o + l + 96] = fr(d * src.getInt8(sc + is + 6)) * q4;
      }
    }
  }
  return y;
}
