import { describe, expect, it } from 'vitest';
import { CorruptCheckpoint, DTypeMismatch } from '../errors';
import { CpuBackend } from '../tensor/cpu';
import {
  MAX_HEADER_BYTES, ST_DTYPE_BYTES, SafetensorsFile, type StDType, type StTensor, toStorage, writeSafetensors,
} from './safetensors';
import { memorySource } from './sources';

const hex = (s: string) => Uint8Array.from(s.match(/../g)!, (h) => parseInt(h, 16));
const ascii = (s: string) => new TextEncoder().encode(s);

/**
 * Written by /usr/bin/python3 with struct + json only (not our writer), following the format spec:
 *   meta = {"format": "pt", "note": "golden"}
 *   tensors (in safetensors.serialize order: dtype descending, then name):
 *     c I64 [2] = 7, -3;  b F32 [2, 1] = 1.0, -2.5;  a BF16 [3] = 0x3f80, 0xc000, 0x3e80;  z U8 [] = 200
 *   header = json.dumps({"__metadata__": meta, c: {dtype, shape, data_offsets}, ...}, separators=(",", ":"))
 *   header += b" " * ((8 - len(header) % 8) % 8);  blob = struct.pack("<Q", len(header)) + header + data
 */
const GOLDEN = hex(
  '10010000000000007b225f5f6d657461646174615f5f223a7b22666f726d6174223a227074222c226e6f7465223a22676f6c64656e227d2c' +
  '2263223a7b226474797065223a22493634222c227368617065223a5b325d2c22646174615f6f666673657473223a5b302c31365d7d2c2262' +
  '223a7b226474797065223a22463332222c227368617065223a5b322c315d2c22646174615f6f666673657473223a5b31362c32345d7d2c22' +
  '61223a7b226474797065223a2242463136222c227368617065223a5b335d2c22646174615f6f666673657473223a5b32342c33305d7d2c22' +
  '7a223a7b226474797065223a225538222c227368617065223a5b5d2c22646174615f6f666673657473223a5b33302c33315d7d7d20202020' +
  '0700000000000000fdffffffffffffff0000803f000020c0803f00c0803ec8',
);

/** Builds a file from a literal header (already JSON text) and data, padding like the spec allows. */
function rawFile(header: string, data: Uint8Array | number[] = []): Uint8Array {
  const h = ascii(header);
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}

async function rejects(bytes: Uint8Array, ...patterns: RegExp[]) {
  const err = await SafetensorsFile.fromBytes(bytes, 'bad.safetensors').then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(CorruptCheckpoint);
  const msg = (err as Error).message;
  expect(msg).toMatch(/^bad\.safetensors: /);
  expect(msg).toMatch(/re-download|re-export/);
  for (const p of patterns) expect(msg).toMatch(p);
}

describe('safetensors golden file (Python struct + json)', () => {
  it('reads metadata, dtypes, shapes and exact bytes', async () => {
    const f = await SafetensorsFile.fromBytes(GOLDEN, 'golden.safetensors');
    expect(f.metadata).toEqual({ format: 'pt', note: 'golden' });
    expect(f.names().sort()).toEqual(['a', 'b', 'c', 'z']);
    expect(f.dataStart).toBe(8 + 272);
    const c = await f.read('c');
    expect(c.dtype).toBe('I64');
    expect(c.shape).toEqual([2]);
    const dv = new DataView(c.bytes.slice().buffer);
    expect([dv.getBigInt64(0, true), dv.getBigInt64(8, true)]).toEqual([7n, -3n]);
    const b = await f.read('b');
    expect([b.dtype, b.shape]).toEqual(['F32', [2, 1]]);
    expect(Array.from(new Float32Array(b.bytes.slice().buffer))).toEqual([1, -2.5]);
    const a = await f.read('a');
    expect([a.dtype, a.shape]).toEqual(['BF16', [3]]);
    expect(Array.from(new Uint16Array(a.bytes.slice().buffer))).toEqual([0x3f80, 0xc000, 0x3e80]);
    const z = await f.read('z');
    expect([z.dtype, z.shape, Array.from(z.bytes)]).toEqual(['U8', [], [200]]);
  });

  it('our writer reproduces the golden file byte for byte', async () => {
    const f = await SafetensorsFile.fromBytes(GOLDEN);
    // Given in another order: the writer sorts by dtype (descending) then name, as safetensors.serialize.
    const tensors: Record<string, StTensor> = {};
    for (const n of ['z', 'a', 'b', 'c']) tensors[n] = await f.read(n);
    expect(writeSafetensors(tensors, { note: 'golden', format: 'pt' })).toEqual(GOLDEN);
  });
});

describe('safetensors writer and reader round trip', () => {
  const dtypes = Object.keys(ST_DTYPE_BYTES) as StDType[];
  const shapes = [[3, 5], [1], [], [2, 0], [17]];
  const tensorFor = (d: StDType, k: number): StTensor => {
    const shape = shapes[k % shapes.length];
    const n = shape.reduce((a, b) => a * b, 1) * ST_DTYPE_BYTES[d];
    return { dtype: d, shape, bytes: Uint8Array.from({ length: n }, (_, i) => (i * 37 + k * 11 + 5) & 0xff) };
  };

  it('keeps every dtype, shape and byte, keeps tensors aligned, and pads the header to 8 bytes', async () => {
    const tensors = new Map<string, StTensor>();
    dtypes.forEach((d, k) => {
      tensors.set(`t.${d.toLowerCase()}`, tensorFor(d, k));
      tensors.set(`${k}`, tensorFor(d, k + 1)); // integer-like names must survive (no JS key reordering)
    });
    const file = writeSafetensors(tensors, { format: 'pt', 'ü': 'ß"\n' });
    const headerLen = Number(new DataView(file.buffer).getBigUint64(0, true));
    expect(headerLen % 8).toBe(0);
    expect(file[8 + headerLen - 1] === 0x20 || file[8 + headerLen - 1] === 0x7d).toBe(true);
    const f = await SafetensorsFile.fromBytes(file);
    expect(f.metadata).toEqual({ format: 'pt', 'ü': 'ß"\n' });
    expect(f.names().sort()).toEqual([...tensors.keys()].sort());
    for (const [name, t] of tensors) {
      const r = await f.read(name);
      expect(r.dtype, name).toBe(t.dtype);
      expect(r.shape, name).toEqual(t.shape);
      expect(Array.from(r.bytes), name).toEqual(Array.from(t.bytes));
      expect((f.dataStart + f.info(name).begin) % ST_DTYPE_BYTES[t.dtype], `${name} alignment`).toBe(0);
    }
  });

  it('orders data by descending dtype, then by name, and rejects bad tensors', async () => {
    const t = (dtype: StDType, n: number): StTensor => ({ dtype, shape: [n], bytes: new Uint8Array(n * ST_DTYPE_BYTES[dtype]) });
    const f = await SafetensorsFile.fromBytes(
      writeSafetensors({ b: t('U8', 1), a: t('U8', 3), w: t('BF16', 1), x: t('F32', 2), y: t('I64', 1), v: t('F16', 1) }),
    );
    const order = f.names().sort((p, q) => f.info(p).begin - f.info(q).begin);
    expect(order).toEqual(['y', 'x', 'w', 'v', 'a', 'b']);
    expect(() => writeSafetensors({ a: { dtype: 'F32', shape: [2], bytes: new Uint8Array(4) } })).toThrow(DTypeMismatch);
    expect(() => writeSafetensors({ a: { dtype: 'F8' as StDType, shape: [1], bytes: new Uint8Array(1) } })).toThrow(DTypeMismatch);
    expect(() => writeSafetensors([['__metadata__', t('U8', 1)]])).toThrow(/reserved/);
  });
});

describe('safetensors corruption is rejected with CorruptCheckpoint', () => {
  const T = (dtype: string, shape: number[], a: number, b: number) =>
    JSON.stringify({ dtype, shape, data_offsets: [a, b] });

  it('rejects every truncation of a valid file', async () => {
    for (let n = 0; n < GOLDEN.length; n++) {
      await expect(SafetensorsFile.fromBytes(GOLDEN.subarray(0, n)), `length ${n}`).rejects.toBeInstanceOf(CorruptCheckpoint);
    }
    await rejects(GOLDEN.subarray(0, 5), /5 bytes, too short/, /truncated/);
    await rejects(GOLDEN.subarray(0, 100), /header length field says 272 bytes but the file has only 92/, /truncated/);
    await rejects(GOLDEN.subarray(0, GOLDEN.length - 1), /tensor "z" needs data bytes up to 31 but the file holds only 30/, /truncated/);
  });

  it('rejects a bad header length, encoding or JSON', async () => {
    const huge = rawFile('{}');
    new DataView(huge.buffer).setBigUint64(0, BigInt(MAX_HEADER_BYTES) + 1n, true);
    await rejects(huge, /more than the 100000000 allowed/);
    const big = rawFile('{}');
    new DataView(big.buffer).setBigUint64(0, 2n ** 63n, true);
    await rejects(big, /header length field/);
    await rejects(rawFile('{"a": '), /not valid JSON/);
    await rejects(rawFile('[1, 2]'), /does not start with "\{"/);
    await rejects(rawFile(`{"a": 1}`), /tensor "a" has no \{dtype/);
    const badUtf8 = rawFile('{"\u00e9":1}');
    badUtf8[10] = 0xff;
    await rejects(badUtf8, /not valid UTF-8/);
    await rejects(rawFile('{"__metadata__":{"k":1}}'), /__metadata__ entry "k"/);
    await rejects(rawFile('{"__metadata__":["x"]}'), /__metadata__ is not a map/);
  });

  it('rejects unknown dtypes and bad shapes, naming the tensor', async () => {
    await rejects(rawFile(`{"w":${T('F8_E4M3', [2], 0, 2)}}`, [0, 0]), /tensor "w" has dtype "F8_E4M3"/, /re-export/);
    await rejects(rawFile(`{"w":${T('F32', [-1], 0, 4)}}`, [0, 0, 0, 0]), /tensor "w" has shape \[-1\]/);
    await rejects(rawFile(`{"w":{"dtype":"F32","shape":2,"data_offsets":[0,4]}}`, [0, 0, 0, 0]), /tensor "w" has shape 2/);
  });

  it('rejects offsets that disagree with shape x dtype, overlap, leave gaps or run past the data', async () => {
    const d16 = new Uint8Array(16);
    await rejects(
      rawFile(`{"w":${T('F32', [3], 0, 8)}}`, d16.subarray(0, 8)),
      /tensor "w" \(F32 \[3\]\) needs 12 bytes but its data_offsets \[0, 8\] span 8/,
    );
    await rejects(rawFile(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[4]}}`, d16.subarray(0, 4)), /tensor "w" has data_offsets \[4\]/);
    await rejects(rawFile(`{"w":${T('F32', [1], 8, 4)}}`, d16.subarray(0, 8)), /tensor "w" has data_offsets \[8,4\]/);
    await rejects(
      rawFile(`{"a":${T('F32', [2], 0, 8)},"b":${T('F32', [2], 4, 12)}}`, d16.subarray(0, 12)),
      /tensor "b" \[4, 12\] overlaps tensor "a" \[0, 8\]/,
    );
    await rejects(
      rawFile(`{"a":${T('F32', [1], 0, 4)},"b":${T('F32', [1], 8, 12)}}`, d16.subarray(0, 12)),
      /tensor "b" starts at 8 but the previous data ends at 4/,
    );
    await rejects(rawFile(`{"a":${T('F32', [1], 4, 8)}}`, d16.subarray(0, 8)), /tensor "a" starts at 4/);
    await rejects(
      rawFile(`{"a":${T('F32', [4], 0, 16)}}`, d16.subarray(0, 12)),
      /tensor "a" needs data bytes up to 16 but the file holds only 12/,
    );
    await rejects(rawFile(`{"a":${T('F32', [2], 0, 8)}}`, d16.subarray(0, 12)), /describes 8 bytes of tensor data but 12 follow/);
    await rejects(rawFile(`{"a":${T('F32', [2 ** 40, 2 ** 40], 0, 8)}}`, d16.subarray(0, 8)), /tensor "a"/);
    // A well-formed file of out-of-order entries (b's data first) is valid.
    const ok = await SafetensorsFile.fromBytes(
      rawFile(`{"a":${T('F32', [1], 4, 8)},"b":${T('U8', [4], 0, 4)}}`, [1, 2, 3, 4, 0, 0, 0x80, 0x3f]),
    );
    expect(Array.from(new Float32Array((await ok.read('a')).bytes.slice().buffer))).toEqual([1]);
  });

  it('names the file and tensor when a tensor is absent', async () => {
    const f = await SafetensorsFile.fromBytes(GOLDEN, 'model.safetensors');
    expect(() => f.info('lm_head.weight')).toThrow(CorruptCheckpoint);
    expect(() => f.info('lm_head.weight')).toThrow(/model\.safetensors has no tensor "lm_head\.weight"/);
  });
});

describe('safetensors tensors to storage dtypes', () => {
  it('passes F32, F16, BF16 and I32 through byte-identical into Backend.fromBytes', async () => {
    const cpu = new CpuBackend('f32');
    const bf = { dtype: 'BF16' as const, shape: [3], bytes: Uint8Array.from([0x80, 0x3f, 0x00, 0xc0, 0x80, 0x3e]) };
    const f16 = { dtype: 'F16' as const, shape: [2], bytes: Uint8Array.from([0x00, 0x3c, 0x00, 0xb8]) };
    const f32 = { dtype: 'F32' as const, shape: [1, 2], bytes: new Uint8Array(Float32Array.of(0.1, -7).buffer) };
    const i32 = { dtype: 'I32' as const, shape: [2], bytes: new Uint8Array(Int32Array.of(-5, 123457).buffer) };
    for (const [t, dtype, values] of [
      [bf, 'bf16', [1, -2, 0.25]],
      [f16, 'f16', [1, -0.5]],
      [f32, 'f32', [Math.fround(0.1), -7]],
      [i32, 'i32', [-5, 123457]],
    ] as const) {
      const s = toStorage(t, 'w', 'm.safetensors');
      expect(s.dtype).toBe(dtype);
      expect(s.bytes).toBe(t.bytes); // no copy
      const x = cpu.fromBytes(s.bytes, s.shape, s.dtype);
      expect(Array.from(await cpu.read(x))).toEqual(values);
      expect(Array.from(await cpu.readBytes(x))).toEqual(Array.from(t.bytes));
    }
  });

  it('narrows integers to i32 with a range check and F64 to f32', () => {
    const i64 = new DataView(new ArrayBuffer(24));
    [5n, -(2n ** 31n), 2n ** 31n - 1n].forEach((v, i) => i64.setBigInt64(8 * i, v, true));
    // Unaligned on purpose: bytes read from a file need not start at a multiple of 8.
    const unaligned = new Uint8Array(25).fill(0);
    unaligned.set(new Uint8Array(i64.buffer), 1);
    const s = toStorage({ dtype: 'I64', shape: [3], bytes: unaligned.subarray(1) }, 'ids');
    expect(s.dtype).toBe('i32');
    expect(Array.from(new Int32Array(s.bytes.buffer))).toEqual([5, -(2 ** 31), 2 ** 31 - 1]);
    i64.setBigInt64(8, 2n ** 31n, true);
    expect(() => toStorage({ dtype: 'I64', shape: [3], bytes: new Uint8Array(i64.buffer) }, 'ids', 'm.safetensors'))
      .toThrow(/m\.safetensors: tensor "ids" \(I64\) holds 2147483648 at element 1, outside the i32 range/);
    const u8 = toStorage({ dtype: 'U8', shape: [2], bytes: Uint8Array.of(0, 255) }, 'm');
    expect(Array.from(new Int32Array(u8.bytes.buffer))).toEqual([0, 255]);
    const i16 = toStorage({ dtype: 'I16', shape: [1], bytes: Uint8Array.of(0x00, 0x80) }, 'm');
    expect(Array.from(new Int32Array(i16.bytes.buffer))).toEqual([-32768]);
    const u64 = new DataView(new ArrayBuffer(8));
    u64.setBigUint64(0, 2n ** 63n, true);
    expect(() => toStorage({ dtype: 'U64', shape: [1], bytes: new Uint8Array(u64.buffer) }, 'm')).toThrow(DTypeMismatch);
    const f64 = toStorage({ dtype: 'F64', shape: [2], bytes: new Uint8Array(Float64Array.of(0.1, 3).buffer) }, 'm');
    expect(f64.dtype).toBe('f32');
    expect(Array.from(new Float32Array(f64.bytes.buffer))).toEqual([Math.fround(0.1), 3]);
  });
});

describe('lazy reading', () => {
  it('reads the header first and then only the requested tensor', async () => {
    const big = writeSafetensors({ small: { dtype: 'F32', shape: [2], bytes: new Uint8Array(8).fill(1) },
      huge: { dtype: 'U8', shape: [1 << 16], bytes: new Uint8Array(1 << 16).fill(2) } });
    const inner = memorySource(big, 'counted');
    const reads: [number, number][] = [];
    const f = await SafetensorsFile.open({ name: inner.name, size: inner.size, read: (o, l) => (reads.push([o, l]), inner.read(o, l)) });
    expect(reads.reduce((a, [, l]) => a + l, 0)).toBe(f.dataStart);
    expect(Array.from((await f.read('small')).bytes)).toEqual(Array(8).fill(1));
    expect(reads.at(-1)).toEqual([f.dataStart + f.info('small').begin, 8]);
    expect(reads.reduce((a, [, l]) => a + l, 0)).toBe(f.dataStart + 8);
  });
});
