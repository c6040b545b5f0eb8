/**
 * `rmas convert` on the committed tiny system's links: .pt ↔ .safetensors keeps keys and values
 * (bf16 rounds to nearest even), a link folder becomes a checkpoint bundle and back byte for byte, and bad
 * inputs fail by name without leaving or replacing anything.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SafetensorsFile } from '../src/formats/safetensors';
import { fileSource } from '../src/formats/sources';
import { parseLinkBytes } from '../src/mas/upstream';
import { convertCmd } from '../src/runner/convert-cmd';
import { importBundle } from '../src/store/bundle';

const ROOT = resolve(import.meta.dirname, '..');
const OUTER = join(ROOT, 'models/tiny/system/outer');
const PLANNER = join(ROOT, 'models/tiny/system/planner');
const dir = mkdtempSync(join(tmpdir(), 'rmas-convert-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const bf16 = (x: number) => {
  const u = new Uint32Array(new Float32Array([x]).buffer)[0]!;
  const r = (u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000;
  return new Float32Array(new Uint32Array([r]).buffer)[0]!;
};

describe('rmas convert', () => {
  it('.pt -> .safetensors -> .pt keeps every key and its f32 values', async () => {
    const src = parseLinkBytes(readFileSync(join(OUTER, 'outer_12.pt')), 'outer_12.pt');
    const st = join(dir, 'outer_12.safetensors');
    expect(await convertCmd({ in: join(OUTER, 'outer_12.pt'), out: st })).toMatch(
      /^wrote .*outer_12\.safetensors: \d+ tensors \(.+\), f32\n$/,
    );
    const f = await SafetensorsFile.open(fileSource(st));
    expect([...f.names()].sort()).toEqual([...src.keys()].sort());
    const back = join(dir, 'outer_12.pt');
    await convertCmd({ in: st, out: back });
    const again = parseLinkBytes(readFileSync(back), back);
    expect([...again.keys()].sort()).toEqual([...src.keys()].sort());
    for (const [k, t] of src) {
      expect(again.get(k)!.shape).toEqual(t.shape);
      expect(Array.from(again.get(k)!.data)).toEqual(Array.from(t.data));
      expect((await f.read(k)).dtype).toBe('F32');
    }
    await f.close();
  });

  it('--dtype bf16 writes BF16 rounded to nearest even', async () => {
    const src = parseLinkBytes(readFileSync(join(PLANNER, 'adapter.pt')), 'adapter.pt');
    const out = join(dir, 'adapter-bf16.safetensors');
    await convertCmd({ in: join(PLANNER, 'adapter.pt'), out, dtype: 'bf16' });
    const f = await SafetensorsFile.open(fileSource(out));
    const got = parseLinkBytes(readFileSync(out), out);
    let checked = 0;
    for (const [k, t] of src) {
      expect((await f.read(k)).dtype).toBe('BF16');
      const g = got.get(k)!.data;
      for (let i = 0; i < t.data.length; i++) expect(g[i]).toBe(bf16(t.data[i]!));
      checked += t.data.length;
    }
    await f.close();
    expect(checked).toBeGreaterThan(1000);
  });

  it('a link folder -> bundle -> folder, byte for byte, with its kind and role recorded', async () => {
    const zip = join(dir, 'outer.zip');
    expect(await convertCmd({ in: OUTER, out: zip, role: 'all', style: 'tiny_sequential' })).toBe(
      `wrote ${zip}: outer bundle of 5 files (outer_12.pt, outer_23.pt, outer_31.pt, outer_adapter_config.json, outerlink_config.json)\n`);
    const { meta, files } = await importBundle(new Uint8Array(readFileSync(zip)), zip);
    expect(meta).toMatchObject({ kind: 'outer', style: 'tiny_sequential', role: 'all' });
    const out = join(dir, 'outer-back');
    await convertCmd({ in: zip, out });
    expect(readdirSync(out).sort()).toEqual(Object.keys(files).sort());
    for (const n of readdirSync(OUTER)) expect(readFileSync(join(out, n)).equals(readFileSync(join(OUTER, n))), n).toBe(true);
    // a role folder: only its link files go in, never the model weights
    const inner = join(dir, 'planner.zip');
    expect(await convertCmd({ in: PLANNER, out: inner })).toBe(
      `wrote ${inner}: inner bundle of 2 files (adapter.pt, adapter_config.json)\n`,
    );
  });

  it('fails by name and leaves nothing behind', async () => {
    const existing = join(dir, 'exists.safetensors');
    writeFileSync(existing, 'keep me');
    await expect(convertCmd({ in: join(OUTER, 'outer_12.pt'), out: existing })).rejects.toThrow(
      /exists; name a new file or folder \(nothing was changed\)/,
    );
    expect(readFileSync(existing, 'utf8')).toBe('keep me');
    await expect(convertCmd({ in: join(dir, 'none.pt'), out: join(dir, 'x.safetensors') })).rejects.toThrow(
      /--in .*none\.pt does not exist/,
    );
    const empty = mkdtempSync(join(dir, 'empty-'));
    await expect(convertCmd({ in: empty, out: join(dir, 'e.zip') })).rejects.toThrow(/holds no link files/);
    const bad = join(dir, 'bad.zip');
    const zip = new Uint8Array(readFileSync(join(dir, 'outer.zip')));
    zip[zip.length >> 1] ^= 0xff;
    writeFileSync(bad, zip);
    await expect(convertCmd({ in: bad, out: join(dir, 'bad-out') })).rejects.toThrow(/CRC|sha256|differs|corrupt/i);
    expect(existsSync(join(dir, 'bad-out'))).toBe(false);
    expect(readdirSync(dir).filter((n) => n.includes('partial'))).toEqual([]);
  });

  it('runs from the command line: usage errors exit 2, a missing file exits 1 with its error name', () => {
    const rmas = (...args: string[]) => spawnSync(process.execPath, [join(ROOT, 'bin/rmas.js'), 'convert', ...args], { encoding: 'utf8' });
    const usage = rmas('--in', join(OUTER, 'outer_12.pt'), '--out', join(dir, 'x.gguf'));
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/expected FILE\.pt\|\.safetensors -> FILE\.pt\|\.safetensors, DIR -> FILE\.zip or FILE\.zip -> DIR/);
    const missing = rmas('--in', join(dir, 'none.pt'), '--out', join(dir, 'y.safetensors'));
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/^rmas: MissingCheckpoint: --in .*none\.pt does not exist/);
    const ok = rmas('--in', join(OUTER, 'outer_23.pt'), '--out', join(dir, 'o23.safetensors'), '--dtype', 'bf16');
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/, bf16\n$/);
  }, 60_000);
});
