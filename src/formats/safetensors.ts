/**
 * safetensors (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N bytes
 * of UTF-8 JSON `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {string: string}}`
 * (offsets relative to the end of the header), then the tensor bytes, little-endian, row-major.
 *
 * The reader fetches only the header, then single tensors on demand from a ByteSource, and validates the
 * header as strictly as the reference Rust crate: offsets must tile the data area exactly (no gaps, no
 * overlap, no trailing bytes) and each tensor's length must equal numel × dtype size.
 */
import { CorruptCheckpoint, DTypeMismatch, InvalidArgument } from '../errors';
import type { DType } from './dtype';
import { showValue } from '../util/show';
import { type ByteSource, memorySource } from './sources';

export type StDType = 'BOOL' | 'U8' | 'I8' | 'I16' | 'U16' | 'F16' | 'BF16' | 'I32' | 'U32' | 'F32' | 'F64' | 'I64' | 'U64';

/**
 * Bytes per element, in the order of the Rust crate's `Dtype` enum (ascending size). The writer sorts by
 * this order descending, then by name, like `safetensors::serialize`, so that every tensor stays aligned
 * to its element size when the header is padded to 8 bytes.
 */
export const ST_DTYPE_BYTES: Readonly<Record<StDType, number>> = {
  BOOL: 1, U8: 1, I8: 1, I16: 2, U16: 2, F16: 2, BF16: 2, I32: 4, U32: 4, F32: 4, F64: 8, I64: 8, U64: 8,
};
const DTYPE_RANK = Object.fromEntries(Object.keys(ST_DTYPE_BYTES).map((d, i) => [d, i])) as Record<StDType, number>;
const isStDType = (d: unknown): d is StDType => typeof d === 'string' && Object.hasOwn(ST_DTYPE_BYTES, d);

/** Largest header the reference implementation accepts (100 MB); guards against absurd allocations. */
export const MAX_HEADER_BYTES = 100_000_000;
const METADATA_KEY = '__metadata__';

export interface StTensor {
  dtype: StDType;
  shape: readonly number[];
  /** Raw little-endian element bytes, length numel × ST_DTYPE_BYTES[dtype]. */
  bytes: Uint8Array;
}

export interface StTensorInfo {
  name: string;
  dtype: StDType;
  shape: readonly number[];
  /** Byte range in the data area (after the header), as in the file's data_offsets. */
  begin: number;
  end: number;
}

/** What model loading needs from a checkpoint, single file or sharded. */
export interface TensorStore {
  readonly name: string;
  readonly metadata: Readonly<Record<string, string>>;
  names(): string[];
  has(name: string): boolean;
  /** Dtype, shape and location; throws CorruptCheckpoint naming the file when the tensor is absent. */
  info(name: string): StTensorInfo;
  read(name: string): Promise<StTensor>;
}

const REDO = 're-download the file, or re-export it with safetensors';
const corrupt = (file: string, what: string, todo = REDO) => new CorruptCheckpoint(`${file}: ${what}; ${todo}`);

function numelChecked(file: string, name: string, shape: unknown): number[] {
  if (!Array.isArray(shape) || !shape.every((s) => Number.isSafeInteger(s) && s >= 0)) {
    throw corrupt(file, `tensor "${name}" has shape ${showValue(shape)}, expected an array of non-negative integers`);
  }
  return shape as number[];
}

/** Parses and validates a header; `dataBytes` is the size of the data area that follows it. */
export function parseHeader(
  file: string,
  header: Uint8Array,
  dataBytes: number,
): { tensors: Map<string, StTensorInfo>; metadata: Record<string, string> } {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(header);
  } catch {
    throw corrupt(file, 'the header is not valid UTF-8 (not a safetensors file, or damaged)');
  }
  if (!text.startsWith('{')) throw corrupt(file, 'the header does not start with "{" (not a safetensors file, or damaged)');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw corrupt(file, `the header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw corrupt(file, 'the header is not a JSON object');

  const metadata: Record<string, string> = {};
  const list: StTensorInfo[] = [];
  for (const [name, v] of Object.entries(json as Record<string, unknown>)) {
    if (name === METADATA_KEY) {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw corrupt(file, '__metadata__ is not a map of strings');
      for (const [k, s] of Object.entries(v)) {
        if (typeof s !== 'string') throw corrupt(file, `__metadata__ entry "${k}" is ${showValue(s)}, not a string`);
        metadata[k] = s;
      }
      continue;
    }
    if (typeof v !== 'object' || v === null) throw corrupt(file, `tensor "${name}" has no {dtype, shape, data_offsets} entry`);
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (!isStDType(e.dtype)) {
      throw corrupt(file, `tensor "${name}" has dtype ${showValue(e.dtype)}, which this reader does not know ` +
        `(it reads ${Object.keys(ST_DTYPE_BYTES).join(', ')})`, 're-export the checkpoint with that tensor in one of these dtypes');
    }
    const shape = numelChecked(file, name, e.shape);
    const off = e.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((o) => Number.isSafeInteger(o) && o >= 0) || off[0] > off[1]) {
      throw corrupt(file, `tensor "${name}" has data_offsets ${showValue(off)}, expected [begin, end] with 0 <= begin <= end`);
    }
    let n = ST_DTYPE_BYTES[e.dtype];
    for (const s of shape) n *= s;
    if (!Number.isSafeInteger(n) || n !== off[1] - off[0]) {
      throw corrupt(file, `tensor "${name}" (${e.dtype} [${shape.join(', ')}]) needs ${n} bytes but its data_offsets ` +
        `[${off[0]}, ${off[1]}] span ${off[1] - off[0]}`);
    }
    list.push({ name, dtype: e.dtype, shape, begin: off[0], end: off[1] });
  }

  list.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let pos = 0;
  let prev: StTensorInfo | undefined;
  for (const t of list) {
    if (t.begin < pos)
      throw corrupt(file, `tensor "${t.name}" [${t.begin}, ${t.end}] overlaps tensor "${prev!.name}" [${prev!.begin}, ${prev!.end}]`);
    if (t.begin > pos)
      throw corrupt(
        file,
        `tensor "${t.name}" starts at ${t.begin} but the previous data ends at ${pos} (offsets out of order or with a gap)`,
      );
    if (t.end > dataBytes) {
      throw corrupt(
        file,
        `tensor "${t.name}" needs data bytes up to ${t.end} but the file holds only ${dataBytes} after the header: the file is truncated`,
      );
    }
    pos = t.end;
    prev = t;
  }
  if (pos !== dataBytes) {
    throw corrupt(file, `the header describes ${pos} bytes of tensor data but ${dataBytes} follow it (extra bytes after the last tensor)`);
  }
  return { tensors: new Map(list.map((t) => [t.name, t])), metadata };
}

/** One safetensors file read lazily from a ByteSource. */
export class SafetensorsFile implements TensorStore {
  private constructor(
    private readonly source: ByteSource,
    readonly tensors: ReadonlyMap<string, StTensorInfo>,
    readonly metadata: Readonly<Record<string, string>>,
    /** Absolute offset of the data area: 8 + header length. */
    readonly dataStart: number,
  ) {}

  get name() {
    return this.source.name;
  }

  /** Reads and validates the header only. */
  static async open(source: ByteSource): Promise<SafetensorsFile> {
    const file = source.name;
    const size = await source.size();
    if (size < 8) throw corrupt(file, `the file is ${size} bytes, too short for the 8-byte header length: it is truncated`);
    const n = new DataView((await source.read(0, 8)).slice().buffer).getBigUint64(0, true);
    if (n > BigInt(MAX_HEADER_BYTES)) {
      throw corrupt(
        file,
        `the header length field says ${n} bytes, more than the ${MAX_HEADER_BYTES} allowed (not a safetensors file, or damaged)`,
      );
    }
    const headerLen = Number(n);
    if (8 + headerLen > size) {
      throw corrupt(
        file,
        `the header length field says ${headerLen} bytes but the file has only ${size - 8} after it: the file is truncated`,
      );
    }
    const { tensors, metadata } = parseHeader(file, await source.read(8, headerLen), size - 8 - headerLen);
    return new SafetensorsFile(source, tensors, metadata, 8 + headerLen);
  }

  /** Opens a safetensors file held in memory. */
  static fromBytes(bytes: Uint8Array, name = 'memory.safetensors'): Promise<SafetensorsFile> {
    return SafetensorsFile.open(memorySource(bytes, name));
  }

  names(): string[] {
    return [...this.tensors.keys()];
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  info(name: string): StTensorInfo {
    const t = this.tensors.get(name);
    if (!t) {
      throw new CorruptCheckpoint(`${this.name} has no tensor "${name}"; the checkpoint does not match the model ` +
        '(wrong file, or an incomplete download): re-download or re-export it');
    }
    return t;
  }

  async read(name: string): Promise<StTensor> {
    const t = this.info(name);
    const bytes = await this.source.read(this.dataStart + t.begin, t.end - t.begin);
    return { dtype: t.dtype, shape: t.shape, bytes };
  }

  close(): Promise<void> {
    return this.source.close?.() ?? Promise.resolve();
  }
}

/** Byte-wise (UTF-8) name order, as Rust's String ordering, which differs from UTF-16 order above U+FFFF. */
const utf8 = new TextEncoder();
function compareNames(a: string, b: string): number {
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/**
 * Writes a safetensors file as `safetensors.serialize` (the Rust crate behind the Python library) does:
 * tensors sorted by descending dtype (enum order, i.e. element size), then by name; compact JSON with
 * `__metadata__` first (its keys sorted here, Rust's HashMap order being arbitrary) and each entry as
 * {dtype, shape, data_offsets}; the header padded with spaces to a multiple of 8 bytes.
 */
export function writeSafetensors(
  tensors: Record<string, StTensor> | Iterable<readonly [string, StTensor]>,
  metadata?: Record<string, string>,
): Uint8Array<ArrayBuffer> {
  const entries = (Symbol.iterator in tensors ? [...tensors] : Object.entries(tensors)) as [string, StTensor][];
  const seen = new Set<string>();
  for (const [name, t] of entries) {
    if (name === METADATA_KEY || seen.has(name))
      throw new InvalidArgument(`tensor name "${name}" is reserved or repeated; give each tensor a unique name`);
    seen.add(name);
    if (!isStDType(t.dtype))
      throw new DTypeMismatch(`tensor "${name}": dtype ${String(t.dtype)} is not one of ${Object.keys(ST_DTYPE_BYTES).join(', ')}`);
    let n = ST_DTYPE_BYTES[t.dtype];
    for (const s of t.shape) n *= s;
    if (n !== t.bytes.byteLength) {
      throw new DTypeMismatch(`tensor "${name}": ${t.dtype} [${t.shape.join(', ')}] needs ${n} bytes, got ${t.bytes.byteLength}`);
    }
  }
  entries.sort(([an, a], [bn, b]) => DTYPE_RANK[b.dtype] - DTYPE_RANK[a.dtype] || compareNames(an, bn));

  // Built by hand: JSON.stringify of an object would move integer-like names ("0", "12") to the front.
  const parts: string[] = [];
  if (metadata) {
    const keys = Object.keys(metadata).sort(compareNames);
    parts.push(
      `${JSON.stringify(METADATA_KEY)}:{${keys.map((k) => `${JSON.stringify(k)}:${JSON.stringify(String(metadata[k]))}`).join(',')}}`,
    );
  }
  let offset = 0;
  for (const [name, t] of entries) {
    const end = offset + t.bytes.byteLength;
    parts.push(`${JSON.stringify(name)}:{"dtype":"${t.dtype}","shape":[${t.shape.join(',')}],"data_offsets":[${offset},${end}]}`);
    offset = end;
  }
  const json = utf8.encode(`{${parts.join(',')}}`);
  const headerLen = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLen + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLen), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLen);
  let pos = 8 + headerLen;
  for (const [, t] of entries) {
    out.set(t.bytes, pos);
    pos += t.bytes.byteLength;
  }
  return out;
}

/** A tensor ready for Backend.fromBytes. */
export interface StorageTensor {
  dtype: DType;
  shape: readonly number[];
  bytes: Uint8Array;
}

/**
 * Converts a safetensors tensor to one of our storage dtypes. F32, F16, BF16 and I32 pass through
 * byte-identical (no copy); other integers become i32 (range-checked: token ids, positions); F64 becomes
 * f32 (rounded; safetensors models rarely ship F64). `where` names the file in errors.
 */
export function toStorage(t: StTensor, name: string, where = 'checkpoint'): StorageTensor {
  switch (t.dtype) {
    case 'F32': return { dtype: 'f32', shape: t.shape, bytes: t.bytes };
    case 'F16': return { dtype: 'f16', shape: t.shape, bytes: t.bytes };
    case 'BF16': return { dtype: 'bf16', shape: t.shape, bytes: t.bytes };
    case 'I32': return { dtype: 'i32', shape: t.shape, bytes: t.bytes };
    case 'F64': {
      const src = new DataView(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength);
      const out = new Float32Array(t.bytes.byteLength / 8);
      for (let i = 0; i < out.length; i++) out[i] = src.getFloat64(8 * i, true);
      return { dtype: 'f32', shape: t.shape, bytes: new Uint8Array(out.buffer) };
    }
    default: {
      const size = ST_DTYPE_BYTES[t.dtype];
      const src = new DataView(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength);
      const get: (i: number) => number | bigint = {
        BOOL: (i: number) => src.getUint8(i), U8: (i: number) => src.getUint8(i), I8: (i: number) => src.getInt8(i),
        I16: (i: number) => src.getInt16(2 * i, true), U16: (i: number) => src.getUint16(2 * i, true),
        U32: (i: number) => src.getUint32(4 * i, true), I64: (i: number) => src.getBigInt64(8 * i, true),
        U64: (i: number) => src.getBigUint64(8 * i, true),
      }[t.dtype];
      const out = new Int32Array(t.bytes.byteLength / size);
      for (let i = 0; i < out.length; i++) {
        const v = get(i);
        if (v < -2147483648 || v > 2147483647) {
          throw new DTypeMismatch(`${where}: tensor "${name}" (${t.dtype}) holds ${v} at element ${i}, outside the i32 range ` +
            'our tensors use; store it as I32 or F32 instead');
        }
        out[i] = Number(v);
      }
      return { dtype: 'i32', shape: t.shape, bytes: new Uint8Array(out.buffer) };
    }
  }
}
