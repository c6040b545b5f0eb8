import { describe, expect, it } from 'vitest';
import { f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, bf16BitsToF32 } from './dtype';
import { decode } from './encode';
import { GGML_TYPE, readGgufHeader, readGgufTensor } from './gguf';
import { writeGguf } from '../testing/gguf-writer';
import { memorySource } from './sources';

const bytesSource = (b: Uint8Array) => memorySource(b, 'model.gguf');

const u16le = (vals: number[]) => new Uint8Array(new Uint16Array(vals).buffer);
const pattern = (n: number, f: (i: number) => number) => Uint8Array.from({ length: n }, (_, i) => f(i) & 255);

// Q8_0 [2, 64]: 4 blocks, d in f16 bits, qs int8.
const q8d = [0x3800, 0x2c00, 0xb555, 0x1234]; // 0.5, 0.0625, -0.33325..., a small normal
const q8qs = pattern(4 * 32, (i) => i * 7 + 3);
const q8raw = new Uint8Array(4 * 34);
q8d.forEach((d, b) => { q8raw.set(u16le([d]), b * 34); q8raw.set(q8qs.subarray(b * 32, b * 32 + 32), b * 34 + 2); });
// Q4_0 [3, 32]: 3 blocks.
const q4d = [0xb400, 0x3c00, 0x0401]; // -0.25, 1, a tiny normal
const q4qs = pattern(3 * 16, (i) => i * 37 + 11);
const q4raw = new Uint8Array(3 * 18);
q4d.forEach((d, b) => { q4raw.set(u16le([d]), b * 18); q4raw.set(q4qs.subarray(b * 16, b * 16 + 16), b * 18 + 2); });

const f32vals = Array.from({ length: 15 }, (_, i) => (i - 7) * 0.37);
const f16vals = [0.5, -1.25, 3, 65504, -0.0009765625, 0];
const bf16vals = [1.5, -2.75e10, 3.140625, 0];
const model = () => writeGguf(
  [
    { key: 'general.architecture', type: 'str', value: 'llama' },
    { key: 'llama.block_count', type: 'u32', value: 2 },
    { key: 'llama.attention.layer_norm_rms_epsilon', type: 'f32', value: 1e-6 },
    { key: 'tokenizer.ggml.tokens', type: 'arr_str', value: ['<s>', 'a', 'bc'] },
    { key: 'tokenizer.ggml.token_type', type: 'arr_i32', value: [3, 1, -1] },
  ],
  [
    { name: 'token_embd.weight', ne: [5, 3], type: GGML_TYPE.F32, data: new Uint8Array(new Float32Array(f32vals).buffer) },
    { name: 'norm.weight', ne: [3, 2], type: GGML_TYPE.F16, data: u16le(f16vals.map(f32ToF16Bits)) },
    { name: 'bf.weight', ne: [4], type: GGML_TYPE.BF16, data: u16le(bf16vals.map(f32ToBf16Bits)) },
    { name: 'blk.0.attn_q.weight', ne: [64, 2], type: GGML_TYPE.Q8_0, data: q8raw },
    { name: 'blk.0.ffn_up.weight', ne: [32, 3], type: GGML_TYPE.Q4_0, data: q4raw },
  ],
);

describe('GGUF reader', () => {
  it('reads metadata, row-major shapes, types and offsets', async () => {
    const f = await readGgufHeader(bytesSource(model()), 'm.gguf');
    expect(f.version).toBe(3);
    expect(f.alignment).toBe(32);
    expect(f.dataOffset % 32).toBe(0);
    expect(f.metadata['general.architecture']).toBe('llama');
    expect(f.metadata['llama.block_count']).toBe(2);
    expect(f.metadata['llama.attention.layer_norm_rms_epsilon']).toBe(Math.fround(1e-6));
    expect(f.metadata['tokenizer.ggml.tokens']).toEqual(['<s>', 'a', 'bc']);
    expect(f.metadata['tokenizer.ggml.token_type']).toEqual([3, 1, -1]);
    expect(Object.keys(f.metadata)).toHaveLength(5);
    expect(f.tensors.map((t) => [t.name, t.shape, t.typeName, t.dtype, t.byteLength])).toEqual([
      ['token_embd.weight', [3, 5], 'F32', 'f32', 60],
      ['norm.weight', [2, 3], 'F16', 'f16', 12],
      ['bf.weight', [4], 'BF16', 'bf16', 8],
      ['blk.0.attn_q.weight', [2, 64], 'Q8_0', 'q8_0', 136],
      ['blk.0.ffn_up.weight', [3, 32], 'Q4_0', 'q4_0', 54],
    ]);
    expect(f.tensors.map((t) => t.offset - f.dataOffset)).toEqual([0, 64, 96, 128, 288]);
  });

  it('reads F32, F16 and BF16 tensors exactly', async () => {
    const f = await readGgufHeader(bytesSource(model()));
    const a = await readGgufTensor(f, 'token_embd.weight');
    expect(Array.from(decode(a.dtype, a.bytes, a.shape))).toEqual(f32vals.map(Math.fround));
    const b = await readGgufTensor(f, 'norm.weight');
    expect(b.dtype).toBe('f16');
    expect(Array.from(decode(b.dtype, b.bytes, b.shape))).toEqual(f16vals);
    const c = await readGgufTensor(f, 'bf.weight');
    expect(Array.from(decode(c.dtype, c.bytes, c.shape))).toEqual(bf16vals.map((v) => bf16BitsToF32(f32ToBf16Bits(v))));
  });

  it('rearranges Q8_0 blocks into our row layout; decode gives d*q exactly', async () => {
    const f = await readGgufHeader(bytesSource(model()));
    const t = await readGgufTensor(f, 'blk.0.attn_q.weight');
    expect(t.dtype).toBe('q8_0');
    expect(t.bytes.length).toBe(2 * (64 + 4));
    // row r = blocks 2r, 2r+1: quant bytes verbatim, then the two f16 scales
    for (let r = 0; r < 2; r++) {
      expect(Array.from(t.bytes.subarray(r * 68, r * 68 + 64))).toEqual(Array.from(q8qs.subarray(r * 64, r * 64 + 64)));
      expect(Array.from(new Uint16Array(t.bytes.slice(r * 68 + 64, r * 68 + 68).buffer))).toEqual([q8d[2 * r], q8d[2 * r + 1]]);
    }
    const expected = Array.from({ length: 128 }, (_, i) => {
      const q = q8qs[i] >= 128 ? q8qs[i] - 256 : q8qs[i];
      return Math.fround(f16BitsToF32(q8d[i >> 5]) * q);
    });
    expect(Array.from(decode('q8_0', t.bytes, t.shape))).toEqual(expected);
  });

  it('rearranges Q4_0 blocks (GGUF nibble order) into our row layout; decode gives d*(q-8) exactly', async () => {
    const f = await readGgufHeader(bytesSource(model()));
    const t = await readGgufTensor(f, 'blk.0.ffn_up.weight');
    expect(t.dtype).toBe('q4_0');
    expect(t.bytes.length).toBe(3 * (16 + 4));
    const expected = Array.from({ length: 96 }, (_, i) => {
      const b = i >> 5, j = i & 31;
      const byte = q4qs[b * 16 + (j & 15)];
      const q = (j < 16 ? byte & 15 : byte >> 4) - 8; // ggml: low nibbles are elements 0..15
      return Math.fround(f16BitsToF32(q4d[b]) * q);
    });
    expect(Array.from(decode('q4_0', t.bytes, t.shape))).toEqual(expected);
  });

  it('dequantizes Q4_K and Q6_K blocks to f32 as ggml does', async () => {
    // Q4_K: pack 8 known 6-bit scales/mins the way ggml's quantize_row_q4_K_ref does.
    const ls = [1, 17, 63, 5, 40, 33, 2, 63], lm = [0, 9, 63, 31, 48, 7, 60, 1];
    const s = new Uint8Array(12);
    for (let j = 0; j < 8; j++) {
      if (j < 4) { s[j] = ls[j]; s[j + 4] = lm[j]; } else {
        s[j + 4] = (ls[j] & 15) | ((lm[j] & 15) << 4); s[j - 4] |= (ls[j] >> 4) << 6; s[j] |= (lm[j] >> 4) << 6;
      }
    }
    const q4k = new Uint8Array(144);
    q4k.set(u16le([0x3000, 0x2400]), 0); // d = 0.125, dmin = 0.015625
    q4k.set(s, 4);
    q4k.set(pattern(128, (i) => i * 29 + 5), 16);
    // Q6_K: ql, qh, int8 scales, d.
    const q6k = new Uint8Array(210);
    q6k.set(pattern(192, (i) => i * 53 + 17), 0);
    q6k.set(Int8Array.from({ length: 16 }, (_, i) => (i * 23) % 127 - 60).map((v) => v & 255), 192);
    q6k.set(u16le([0x3555]), 208);
    const file = writeGguf([], [
      { name: 'k4', ne: [256], type: GGML_TYPE.Q4_K, data: q4k },
      { name: 'k6', ne: [256], type: GGML_TYPE.Q6_K, data: q6k },
    ]);
    const f = await readGgufHeader(bytesSource(file));
    const a = await readGgufTensor(f, 'k4');
    expect(a.dtype).toBe('f32');
    const fr = Math.fround;
    // Element e: sub-block g = e >> 5 (scale ls[g], min lm[g]); byte 32*(g>>1) + (e&31), low nibble for even g.
    const e4 = Array.from({ length: 256 }, (_, e) => {
      const g = e >> 5, byte = q4k[16 + 32 * (g >> 1) + (e & 31)];
      const q = g & 1 ? byte >> 4 : byte & 15;
      return fr(fr(fr(0.125 * ls[g]) * q) - fr(0.015625 * lm[g]));
    });
    expect(Array.from(decode('f32', a.bytes, a.shape))).toEqual(e4);
    const b = await readGgufTensor(f, 'k6');
    const d6 = f16BitsToF32(0x3555);
    // Element e: half h = e >> 7, r = e & 127, group g = r >> 5, l = r & 31.
    const e6 = Array.from({ length: 256 }, (_, e) => {
      const h = e >> 7, g = (e & 127) >> 5, l = e & 31;
      const lo = q6k[64 * h + l + 32 * (g & 1)];
      const nib = g >= 2 ? lo >> 4 : lo & 15;
      const hi = (q6k[128 + 32 * h + l] >> (2 * g)) & 3;
      const sc = (q6k[192 + 8 * h + (l >> 4) + 2 * g] << 24) >> 24;
      return fr(fr(d6 * sc) * ((nib | (hi << 4)) - 32));
    });
    expect(Array.from(decode('f32', b.bytes, b.shape))).toEqual(e6);
  });

  it('honours general.alignment', async () => {
    const bytes = writeGguf(
      [{ key: 'general.alignment', type: 'u32', value: 64 }],
      [{ name: 'a', ne: [3], type: GGML_TYPE.F32, data: new Uint8Array(new Float32Array([1, 2, 3]).buffer) },
        { name: 'b', ne: [2], type: GGML_TYPE.F32, data: new Uint8Array(new Float32Array([4, 5]).buffer) }],
      { alignment: 64 },
    );
    const f = await readGgufHeader(bytesSource(bytes));
    expect(f.alignment).toBe(64);
    expect(f.dataOffset % 64).toBe(0);
    expect(f.tensors[1].offset - f.dataOffset).toBe(64);
    const t = await readGgufTensor(f, 'b');
    expect(Array.from(decode('f32', t.bytes, t.shape))).toEqual([4, 5]);
  });

  describe('rejects damaged files with CorruptCheckpoint', () => {
    const expectCorrupt = async (bytes: Uint8Array, msg: RegExp) => {
      await expect(readGgufHeader(bytesSource(bytes), 'bad.gguf')).rejects.toMatchObject({
        name: 'CorruptCheckpoint',
        message: expect.stringMatching(msg),
      });
    };
    it('bad magic', async () => {
      const b = model(); b[0] = 0x50;
      await expectCorrupt(b, /bad\.gguf: bad magic 50 47 55 46/);
    });
    it('unsupported version', async () => {
      await expectCorrupt(writeGguf([], [], { version: 4 }), /unsupported GGUF version 4/);
      await expectCorrupt(writeGguf([], [], { version: 1 }), /unsupported GGUF version 1/);
    });
    it('tiny or truncated header', async () => {
      await expectCorrupt(model().subarray(0, 10), /only 10 bytes/);
      await expectCorrupt(model().subarray(0, 200), /truncated|does not parse/);
    });
    it('truncated tensor data / tensor beyond the file', async () => {
      const b = model();
      await expectCorrupt(b.subarray(0, b.length - 40), /tensor "blk\.0\.ffn_up\.weight" spans bytes .* but the file has/);
    });
    it('misaligned tensor offset', async () => {
      const b = writeGguf([], [{ name: 'a', ne: [1], type: GGML_TYPE.F32, data: new Uint8Array(4) }]);
      // the tensor's u64 offset is the last 8 header bytes before the data padding
      const s = new TextDecoder().decode(b);
      const at = s.indexOf('a', 24) + 1 + 4 + 8 + 4;
      b[at] = 4;
      await expectCorrupt(b, /offset 4 is not aligned to 32/);
    });
  });

  it('names unsupported tensor types and missing tensors', async () => {
    const b = writeGguf([], [{ name: 'x', ne: [32], type: GGML_TYPE.Q5_0, data: new Uint8Array(22) }]);
    const f = await readGgufHeader(bytesSource(b), 'q5.gguf');
    expect(f.tensors[0].dtype).toBeNull();
    await expect(readGgufTensor(f, 'x')).rejects.toMatchObject({
      name: 'UnsupportedFeature',
      message: expect.stringMatching(/"x" is Q5_0.*f16, q8_0 or q4_0/),
    });
    await expect(readGgufTensor(f, 'y')).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringMatching(/no tensor "y"/),
    });
  });
});
