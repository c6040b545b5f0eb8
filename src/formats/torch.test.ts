/**
 * PyTorch .pt state dicts. Fixtures in ./fixtures were made by scripts/golden/torch_fixtures.py with Debian's
 * torch 1.13 (`torch.save`), except torch_ours.pt, which is OUR writer's output for torch_small.pt's tensors.
 *
 * Writer check, run once during development (CI has no Python):
 *   /usr/bin/python3 -c "import torch; sd = torch.load('src/formats/fixtures/torch_ours.pt', weights_only=True)"
 * with torch 1.13.0a0 returned an OrderedDict with the same 10 keys in order, and every tensor's dtype, shape
 * and raw bytes equal to torch_small.json (bf16 0-d `scalar` = 3.5, f16 [0, 3] `empty`, f32 `f32_tail`);
 * `zipfile.ZipFile(...).testzip()` found no CRC errors. The test below pins the writer to those exact bytes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CorruptCheckpoint, InvalidArgument, UnsafeCheckpoint } from '../errors';
import { bf16BitsToF32, f32ToBf16Bits } from './dtype';
import { type PtTensor, readTorchStateDict, writeTorchStateDict } from './torch';

const fixture = (f: string) => new Uint8Array(readFileSync(fileURLToPath(new URL(`./fixtures/${f}`, import.meta.url))));
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
type Ref = Record<string, { dtype: string; shape: number[]; hex: string }>;
const ref = JSON.parse(new TextDecoder().decode(fixture('torch_small.json'))) as Ref;

function expectThrow(fn: () => unknown, cls: new (m: string) => Error, ...parts: (string | RegExp)[]) {
  let err: unknown;
  try { fn(); } catch (e) { err = e; }
  expect(err).toBeInstanceOf(cls);
  for (const p of parts) expect((err as Error).message).toMatch(p);
}

describe('readTorchStateDict (files written by torch 1.13)', () => {
  const sd = readTorchStateDict(fixture('torch_small.pt'), 'torch_small.pt');

  it('reads every tensor with the dtype, shape and bytes torch saved, in file order', () => {
    expect([...sd.keys()]).toEqual(Object.keys(ref));
    for (const [k, t] of sd) {
      expect({ k, dtype: t.dtype, shape: t.shape, hex: hex(t.bytes) }).toEqual({ k, ...ref[k] });
    }
  });

  it('decodes to the values the script built', () => {
    const f32 = (t: PtTensor) => Array.from(new Float32Array(t.bytes.slice().buffer));
    // f32 = arange(12) * 0.25 - 1, reshaped [3, 4]; f32_tail = f32[1:] (storage offset 4, shared storage)
    expect(f32(sd.get('f32')!)).toEqual(Array.from({ length: 12 }, (_, i) => i * 0.25 - 1));
    expect(sd.get('f32_tail')!.shape).toEqual([2, 4]);
    expect(f32(sd.get('f32_tail')!)).toEqual(Array.from({ length: 8 }, (_, i) => (i + 4) * 0.25 - 1));
    expect(f32(sd.get('one')!)).toEqual([-7.25]);
    const scalar = sd.get('scalar')!;
    expect(scalar.shape).toEqual([]);
    expect(bf16BitsToF32(scalar.bytes[0]! | (scalar.bytes[1]! << 8))).toBe(3.5);
    expect(sd.get('layer_norm.bias')!.bytes.every((b) => b === 0)).toBe(true); // LayerNorm β = 0
    expect(sd.get('empty')!.bytes.length).toBe(0);
  });

  it('refuses a pickle that calls builtins.eval, naming it, without executing anything', () => {
    expectThrow(() => readTorchStateDict(fixture('torch_evil.pt'), 'evil.pt'), UnsafeCheckpoint,
      'evil.pt', 'builtins.eval', 'nothing in it was executed');
  });

  it('refuses os.system inside an otherwise valid state dict, and INST', () => {
    const pwnedBefore = existsSync('/tmp/pwned');
    expectThrow(() => readTorchStateDict(fixture('torch_evil_os.pt'), 'evil_os.pt'), UnsafeCheckpoint, 'os.system');
    expectThrow(() => readTorchStateDict(fixture('torch_evil_inst.pt'), 'evil_inst.pt'), UnsafeCheckpoint, 'opcode INST');
    if (!pwnedBefore) expect(existsSync('/tmp/pwned')).toBe(false);
  });

  it('names the file of a truncated checkpoint, wherever it is cut', () => {
    expectThrow(() => readTorchStateDict(fixture('torch_truncated.pt'), 'torch_truncated.pt'), CorruptCheckpoint,
      'torch_truncated.pt', /truncated/);
    const full = fixture('torch_small.pt');
    for (const n of [0, 21, 100, 1000, full.length - 30, full.length - 1]) {
      expectThrow(() => readTorchStateDict(full.subarray(0, n), 'cut.pt'), CorruptCheckpoint, 'cut.pt');
    }
  });

  it('refuses a non-contiguous tensor (saved transpose) with the fix', () => {
    expectThrow(() => readTorchStateDict(fixture('torch_transposed.pt'), 't.pt'), CorruptCheckpoint,
      'strides [1,2]', 'not contiguous', 'contiguous()');
  });

  it('refuses compressed zip entries (a repacked file)', () => {
    const b = fixture('torch_small.pt').slice();
    const cd = Buffer.from(b).indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])); // first central directory entry
    b[cd + 10] = 8; // method: deflate
    expectThrow(() => readTorchStateDict(b, 'zipped.pt'), CorruptCheckpoint, 'zipped.pt', 'compressed', 'zip -0');
  });

  it('refuses a file that is not a zip', () => {
    expectThrow(() => readTorchStateDict(fixture('torch_ours.pt').slice(0, 10), 'x.pt'), CorruptCheckpoint, 'not a zip');
  });
});

describe('writeTorchStateDict', () => {
  const sd = readTorchStateDict(fixture('torch_small.pt'), 'torch_small.pt');

  it('writes exactly the bytes torch 1.13 loaded with weights_only=True (see header)', () => {
    expect(hex(writeTorchStateDict(sd))).toBe(hex(fixture('torch_ours.pt')));
  });

  it('round-trips through the reader, 64-byte aligned like torch', () => {
    const out = writeTorchStateDict(sd);
    const back = readTorchStateDict(out, 'ours.pt');
    expect([...back.keys()]).toEqual([...sd.keys()]);
    for (const [k, t] of sd) expect(back.get(k)).toEqual(t);
    // every local header's data starts on a 64-byte boundary
    for (let p = 0; p + 30 <= out.length && out[p] === 0x50 && out[p + 2] === 3;) {
      const start = p + 30 + (out[p + 26]! | (out[p + 27]! << 8)) + (out[p + 28]! | (out[p + 29]! << 8));
      expect(start % 64).toBe(0);
      p = start + (out[p + 18]! | (out[p + 19]! << 8) | (out[p + 20]! << 16));
    }
  });

  it('round-trips sizes that need 2- and 4-byte pickle ints and a large bf16 link', () => {
    const n = 70_001; // numel > 65535: BININT
    const bits = new Uint16Array(n).map((_, i) => f32ToBf16Bits(Math.sin(i) * 3));
    const tensors = new Map<string, PtTensor>([
      ['inner.w', { dtype: 'bf16', shape: [n], bytes: new Uint8Array(bits.buffer) }],
      ['m', { dtype: 'f32', shape: [300, 1, 2], bytes: new Uint8Array(new Float32Array(600).map((_, i) => i - 0.5).buffer) }],
    ]);
    const back = readTorchStateDict(writeTorchStateDict(tensors), 'big.pt');
    expect([...back.keys()]).toEqual([...tensors.keys()]);
    for (const [k, t] of tensors) { // hex compare: toEqual on 140 KB typed arrays takes half a second
      const b = back.get(k)!;
      expect({ dtype: b.dtype, shape: b.shape, hex: hex(b.bytes) }).toEqual({ dtype: t.dtype, shape: t.shape, hex: hex(t.bytes) });
    }
  });

  it('rejects a byte length that disagrees with the shape', () => {
    expectThrow(() => writeTorchStateDict(new Map([['w', { dtype: 'f16' as const, shape: [3], bytes: new Uint8Array(4) }]])),
      InvalidArgument, '"w"', 'expected 3 × 2');
  });
});
