/**
 * STORED zip reader/writer: CRC-32 check value, round trips (empty, binary, UTF-8 names, alignment), the
 * system's `unzip -t` and Python's zipfile accepting our archives, our reader accepting `zip -0` archives,
 * and the refusals (compressed entry, damaged CRC when asked, not a zip).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CorruptCheckpoint } from '../errors';
import { crc32, readZip, writeZip } from './zip';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-zip-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const has = (cmd: string) => { try { execFileSync('sh', ['-c', `command -v ${cmd}`]); return true; } catch { return false; } };
const enc = (s: string) => new TextEncoder().encode(s);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

const binary = Uint8Array.from({ length: 1000 }, (_, i) => (i * 37 + 11) & 0xff);
const ENTRIES: [string, Uint8Array][] = [
  ['bundle.json', enc('{"a":1}\n')], ['empty.bin', new Uint8Array(0)], ['sub/data.bin', binary], ['größe(math).pt', enc('ü')],
];

describe('crc32', () => {
  it('matches the standard check values', () => {
    expect(crc32(enc('123456789'))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
    expect(crc32(enc('The quick brown fox jumps over the lazy dog'))).toBe(0x414fa339);
  });
});

describe('writeZip / readZip', () => {
  it('round-trips names (UTF-8 included), order and bytes; CRCs verify', () => {
    const z = writeZip(ENTRIES);
    const back = readZip(z, 'x.zip', { verifyCrc: true });
    expect([...back.keys()]).toEqual(ENTRIES.map(([n]) => n));
    for (const [n, b] of ENTRIES) expect(hex(back.get(n)!)).toBe(hex(b));
    // 4 entries: local headers 30 + name each, central 46 + name each, end record 22
    const names = ENTRIES.reduce((a, [n]) => a + enc(n).length, 0);
    expect(z.length).toBe(4 * 76 + 2 * names + ENTRIES.reduce((a, [, b]) => a + b.length, 0) + 22);
  });

  it('aligns every entry\'s data when asked', () => {
    const z = writeZip(ENTRIES, { align: 64 });
    const back = readZip(z, 'a.zip');
    for (const [n, b] of ENTRIES) {
      const v = back.get(n)!;
      expect(v.byteOffset % 64).toBe(0);
      expect(hex(v)).toBe(hex(b));
    }
  });

  it.skipIf(!has('unzip'))('unzip -t finds no errors in our archive, and extracts the same bytes', () => {
    const f = join(tmp, 'ours.zip');
    writeFileSync(f, writeZip(ENTRIES, { align: 64 }));
    const out = execFileSync('unzip', ['-t', f], { encoding: 'utf8' });
    expect(out).toMatch(/No errors detected/);
    execFileSync('unzip', ['-o', '-q', f, 'sub/data.bin', '-d', join(tmp, 'x')]);
    expect(hex(readFileSync(join(tmp, 'x/sub/data.bin')))).toBe(hex(binary));
  });

  it.skipIf(!has('python3'))('Python zipfile.testzip finds no bad CRC and reads the UTF-8 name', () => {
    const f = join(tmp, 'py.zip');
    writeFileSync(f, writeZip(ENTRIES));
    const out = execFileSync(
      'python3',
      ['-S', '-c', 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); print(z.testzip()); print(z.namelist()[3])', f],
      { encoding: 'utf8' },
    );
    expect(out).toBe('None\ngröße(math).pt\n');
  });

  it.skipIf(!has('zip'))('reads an archive written by `zip -0`; refuses one written by `zip -9`', () => {
    const d = join(tmp, 'src');
    execFileSync('mkdir', ['-p', d]);
    writeFileSync(join(d, 'a.txt'), 'a'.repeat(5000));
    writeFileSync(join(d, 'b.bin'), binary);
    execFileSync('zip', ['-0', '-q', '-X', join(tmp, 'z0.zip'), 'a.txt', 'b.bin'], { cwd: d });
    const back = readZip(new Uint8Array(readFileSync(join(tmp, 'z0.zip'))), 'z0.zip', { verifyCrc: true });
    expect(back.get('a.txt')!.length).toBe(5000);
    expect(hex(back.get('b.bin')!)).toBe(hex(binary));
    execFileSync('zip', ['-9', '-q', '-X', join(tmp, 'z9.zip'), 'a.txt'], { cwd: d });
    expect(() => readZip(new Uint8Array(readFileSync(join(tmp, 'z9.zip'))), 'z9.zip')).toThrow(
      /z9\.zip: zip entry "a\.txt" is compressed \(method 8\)/,
    );
  });

  it('a flipped data byte fails verifyCrc with the entry named; without it the bytes come back as stored', () => {
    const z = writeZip(ENTRIES);
    const at = Buffer.from(z).indexOf(Buffer.from(binary.subarray(0, 16)));
    z[at + 5] ^= 1;
    expect(() => readZip(z, 'bad.zip', { verifyCrc: true })).toThrow(CorruptCheckpoint);
    expect(() => readZip(z, 'bad.zip', { verifyCrc: true })).toThrow('bad.zip: zip entry "sub/data.bin" fails its CRC-32 check');
    expect(readZip(z, 'bad.zip').get('sub/data.bin')![5]).toBe(binary[5]! ^ 1);
  });

  it('refuses two entries of one name (which one is meant?) and a NUL in a name, naming the entry', () => {
    const dup = writeZip([['a.pt', enc('first')], ['b.json', enc('{}')], ['a.pt', enc('second')]]);
    expect(() => readZip(dup, 'dup.zip')).toThrow(new CorruptCheckpoint(
      'dup.zip: zip entry "a.pt" appears twice (entries 0 and 2); re-download the file, or export it again',
    ));
    const nul = writeZip([['ok.pt', enc('x')], ['evil\0.pt', enc('y')]]);
    expect(() => readZip(nul, 'nul.zip', { fix: 'export it again' })).toThrow(new CorruptCheckpoint(
      'nul.zip: zip entry "evil\\u0000.pt" has a NUL character in its name; export it again',
    ));
    for (const z of [dup, nul]) expect(() => readZip(z, 'x.zip')).toThrow(CorruptCheckpoint);
  });

  it('refuses bytes that are not a zip, and truncated archives', () => {
    expect(() => readZip(enc('hello'), 'h.zip')).toThrow(/h\.zip: not a zip archive.*no end-of-central-directory/);
    const z = writeZip(ENTRIES);
    for (const n of [0, 30, z.length - 23, z.length - 1]) expect(() => readZip(z.subarray(0, n), 'cut.zip')).toThrow(CorruptCheckpoint);
  });
});
