/**
 * Checkpoint bundles (platform-neutral part): export/import round trip with equal bytes and the exact
 * bundle.json, tampering caught (data byte → CRC, re-zipped file → SHA-256, unlisted and missing files),
 * bare upstream .pt links (and a refused evil one), and plain zips of a folder.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CorruptCheckpoint, InvalidArgument, UnsafeCheckpoint } from '../errors';
import { readZip, writeZip } from '../formats/zip';
import { sha256Hex } from '../util/sha256';
import { exportBundle, importBundle } from './bundle';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-bundle-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const enc = (s: string) => new TextEncoder().encode(s);
const has = (cmd: string) => { try { execFileSync('sh', ['-c', `command -v ${cmd}`]); return true; } catch { return false; } };
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const fixture = (f: string) => new Uint8Array(readFileSync(new URL(`../formats/fixtures/${f}`, import.meta.url)));

const FILES = {
  'adapter.pt': fixture('torch_small.pt'),
  'adapter.safetensors': Uint8Array.from({ length: 300 }, (_, i) => (i * 7) & 0xff),
  'adapter_config.json': enc('{"adapter_type":"ln_res_adapter"}\n'),
  'trainer_state.json': enc('{"kind":"inner","state":{"step":4}}\n'),
};
const INFO = { kind: 'inner' as const, style: 'sequential_light', role: 'planner', step: 4, created: '2026-01-02T03:04:05.000Z' };

async function expectReject(p: Promise<unknown>, cls: new (m: string) => Error, ...parts: (string | RegExp)[]) {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(cls);
  for (const s of parts) expect((e as Error).message).toMatch(s);
}

describe('exportBundle / importBundle', () => {
  it('round-trips every file byte for byte, with bundle.json first and the hashes of the files', async () => {
    const z = await exportBundle(FILES, INFO);
    const entries = readZip(z, 'b.zip', { verifyCrc: true });
    expect([...entries.keys()]).toEqual(['bundle.json', 'adapter.pt', 'adapter.safetensors', 'adapter_config.json', 'trainer_state.json']);
    const meta = JSON.parse(new TextDecoder().decode(entries.get('bundle.json')!)) as Record<string, unknown>;
    expect(meta.files).toEqual(
      Object.fromEntries(
        await Promise.all(Object.entries(FILES).map(async ([n, b]) => [n, { bytes: b.length, sha256: await sha256Hex(b) }])),
      ),
    );
    expect({ ...meta, files: undefined }).toEqual({ format: 'rmas-checkpoint-bundle', version: 1, ...INFO, files: undefined });
    // SHA-256 check value
    expect(await sha256Hex(enc('abc'))).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');

    const back = await importBundle(z, 'b.zip');
    expect(Object.keys(back.files).sort()).toEqual(Object.keys(FILES).sort());
    for (const [n, b] of Object.entries(FILES)) expect(hex(back.files[n]!)).toBe(hex(b));
    expect(back.meta).toEqual(meta);
    // the same input gives the same bytes (created fixed)
    expect(hex(await exportBundle(FILES, INFO))).toBe(hex(z));
  });

  it.skipIf(!has('unzip'))('is a zip that unzip -t accepts', async () => {
    const f = join(tmp, 'b.zip');
    writeFileSync(f, await exportBundle(FILES, INFO));
    expect(execFileSync('unzip', ['-t', f], { encoding: 'utf8' })).toMatch(/testing: trainer_state.json +OK[\s\S]*No errors detected/);
  });

  it('a damaged file is named: a flipped byte (CRC) and a re-zipped changed file (SHA-256)', async () => {
    const z = await exportBundle(FILES, INFO);
    const flipped = z.slice();
    const at = Buffer.from(flipped).indexOf(Buffer.from(FILES['adapter.safetensors'].subarray(0, 32)));
    flipped[at + 10] ^= 0x40;
    await expectReject(importBundle(flipped, 'dl/b.zip'), CorruptCheckpoint, 'b.zip', '"adapter.safetensors"', 'CRC-32');

    const entries = [...readZip(z, 'b.zip')].map(([n, b]): [string, Uint8Array] => [
      n,
      n === 'adapter_config.json' ? enc('{"adapter_type":"other"}\n') : b,
    ]);
    const changed = enc('{"adapter_type":"other"}\n');
    // the message is made before the import starts: awaiting it after would leave the import's rejection unhandled
    const [got, want] = [await sha256Hex(changed), await sha256Hex(FILES['adapter_config.json'])];
    const message = `b.zip: 'adapter_config.json' does not match its SHA-256 in bundle.json (sha256 ${got}, expected ${want}; ` +
      `${changed.length} bytes, expected ${FILES['adapter_config.json'].length})`;
    await expectReject(importBundle(writeZip(entries), 'b.zip'), CorruptCheckpoint, message, 'export or download the bundle again');
    const extra = [...readZip(z, 'b.zip')].concat([['evil.sh', enc('x')]]) as [string, Uint8Array][];
    await expectReject(importBundle(writeZip(extra), 'b.zip'), CorruptCheckpoint, "file 'evil.sh' is not listed");
    const missing = [...readZip(z, 'b.zip')].filter(([n]) => n !== 'adapter.pt');
    await expectReject(importBundle(writeZip(missing), 'b.zip'), CorruptCheckpoint, "'adapter.pt' is listed in bundle.json but missing");
    const v2 = [...readZip(z, 'b.zip')].map(([n, b]): [string, Uint8Array] => [
      n,
      n === 'bundle.json' ? enc(new TextDecoder().decode(b).replace('"version": 1', '"version": 2')) : b,
    ]);
    await expectReject(importBundle(writeZip(v2), 'b.zip'), CorruptCheckpoint, 'bundle version 2 is not supported');
  });

  it('imports a bare upstream .pt link as a one-file checkpoint; refuses an unsafe one', async () => {
    const pt = fixture('torch_small.pt');
    const a = await importBundle(pt, '/x/adapter(math).pt');
    expect(Object.keys(a.files)).toEqual(['adapter(math).pt']);
    expect(hex(a.files['adapter(math).pt']!)).toBe(hex(pt));
    expect(a.meta.kind).toBe('inner');
    expect(a.meta.files['adapter(math).pt']).toEqual({ bytes: pt.length, sha256: await sha256Hex(pt) });
    expect((await importBundle(pt, 'Planner-Critic-Outerlink(math).pt')).meta.kind).toBe('outer');
    expect((await importBundle(pt, 'outer_12.pt')).meta.kind).toBe('outer');
    await expectReject(importBundle(fixture('torch_evil.pt'), 'evil.pt'), UnsafeCheckpoint, 'evil.pt', 'builtins.eval');
    // a file picked by mistake is named as what it is, with what to pick instead; a damaged link file says to get it again
    const pick = 'import a bundle (.zip) exported by the playground or `rmas convert`, or an upstream link file (.pt, .safetensors)';
    const text = enc('not a checkpoint at all');
    await expectReject(importBundle(text, 'x.bin'), InvalidArgument, `x.bin is not a checkpoint (it looks like text): ${pick}`);
    const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 73, 72, 68, 82]);
    await expectReject(importBundle(png, 'shot.png'), InvalidArgument, `shot.png is not a checkpoint (it looks like a PNG image): ${pick}`);
    await expectReject(importBundle(png, 'links.zip'), InvalidArgument, `links.zip is not a zip file (it looks like a PNG image): ${pick}`);
    await expectReject(importBundle(pt.slice(0, 40), 'adapter.pt'), CorruptCheckpoint, 'adapter.pt');
    const noise = Uint8Array.from({ length: 64 }, (_, i) => (i * 37 + 200) & 0xff);
    await expectReject(importBundle(noise, 'adapter.pt'), CorruptCheckpoint, 'adapter.pt');
  });

  it('imports a plain zip of a folder (top folder stripped) and reads kind and step from trainer_state.json', async () => {
    const z = writeZip([
      ['ckpt/', new Uint8Array(0)],
      ['ckpt/outer_12.pt', FILES['adapter.pt']],
      ['ckpt/trainer_state.json', enc('{"kind":"outer","state":{"step":7}}')],
    ]);
    const r = await importBundle(z, 'ckpt.zip');
    expect(Object.keys(r.files).sort()).toEqual(['outer_12.pt', 'trainer_state.json']);
    expect([r.meta.kind, r.meta.step]).toEqual(['outer', 7]);
  });

  it('refuses hostile entry names by name, as CorruptCheckpoint: NUL and control characters, over-long names, ' +
    'a file that is also a folder, two entries of one name', async () => {
    /** A bundle whose bundle.json lists exactly these files, as an altered or hand-made bundle would. */
    const hand = async (files: [string, Uint8Array][]) => {
      const rows = await Promise.all(files.map(async ([n, b]) => [n, { bytes: b.length, sha256: await sha256Hex(b) }] as const));
      const table = Object.fromEntries(rows);
      const meta = { format: 'rmas-checkpoint-bundle', version: 1, kind: 'inner', created: INFO.created, files: table };
      return writeZip([['bundle.json', enc(JSON.stringify(meta))], ...files]);
    };
    const x = enc('x');
    await expectReject(importBundle(await hand([['a\0.pt', x]]), 'nul.zip'), CorruptCheckpoint,
      'nul.zip: zip entry "a\\u0000.pt" has a NUL character in its name');
    await expectReject(importBundle(await hand([['a\u0001.pt', x]]), 'ctl.zip'), CorruptCheckpoint,
      "ctl.zip: file name 'a\\u0001.pt' must be a relative '/'-separated path without '.', '..', empty parts or control characters");
    const part = 'p'.repeat(300);
    await expectReject(importBundle(await hand([[`${part}.pt`, x]]), 'long.zip'), CorruptCheckpoint,
      `long.zip: file name '${'p'.repeat(120)}…' is too long: a part of 303 bytes, over 255; give the file a shorter name`);
    const deep = Array.from({ length: 11 }, () => 'd'.repeat(99)).join('/');
    await expectReject(importBundle(await hand([[deep, x]]), 'deep.zip'), CorruptCheckpoint, 'is too long: 1099 bytes, over 1024');
    await expectReject(importBundle(await hand([['links', x], ['links/adapter.pt', x]]), 'both.zip'), CorruptCheckpoint,
      "both.zip: 'links' is both a file and the folder of 'links/adapter.pt'; export the checkpoint again");
    // the same without bundle.json (a plain zip of a folder), and on export
    await expectReject(importBundle(writeZip([['ck/a', x], ['ck/a/b.pt', x]]), 'plain.zip'), CorruptCheckpoint,
      "plain.zip: 'a' is both a file and the folder of 'a/b.pt'");
    await expectReject(exportBundle({ a: x, 'a/b.pt': x }, INFO), InvalidArgument,
      "exportBundle: 'a' is both a file and the folder of 'a/b.pt'");
    // two entries of one name: the last one used to win; the manifest matches it, so only the duplicate gives it away
    const two = await hand([['adapter.pt', enc('second')]]);
    const dup = writeZip([...readZip(two, 'd.zip')].flatMap(([n, b]): [string, Uint8Array][] =>
      n === 'adapter.pt' ? [[n, enc('first!')], [n, b]] : [[n, b]]));
    await expectReject(importBundle(dup, 'dup.zip'), CorruptCheckpoint, 'dup.zip: zip entry "adapter.pt" appears twice (entries 1 and 2)');
    // a name that is long but within the limits imports
    const ok = `${'q'.repeat(252)}.pt`;
    expect(Object.keys((await importBundle(await hand([[ok, x]]), 'ok.zip')).files)).toEqual([ok]);
  });

  it('refuses bad export input', async () => {
    await expectReject(exportBundle({ '../x': enc('a') }, INFO), InvalidArgument, "'../x'");
    await expectReject(exportBundle({ 'bundle.json': enc('a') }, INFO), InvalidArgument, 'bundle.json');
    await expectReject(exportBundle({}, INFO), InvalidArgument, 'at least one file');
    await expectReject(exportBundle(FILES, { ...INFO, kind: 'both' as 'inner' }), InvalidArgument, 'inner or outer');
  });
});
