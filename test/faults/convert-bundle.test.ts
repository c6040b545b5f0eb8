/**
 * Writes of bundles and conversions under faults. `rmas convert` (.pt → .safetensors, a link folder → a bundle, a
 * bundle → a folder) and the extraction of a `.zip` bundle given where a checkpoint folder is expected
 * (src/store/bundle-node.ts materialize) get ENOSPC from each file-system call that writes (a file half written
 * first, a mkdir, mkdtemp, link or rename), and --out appears (as another process would make it) just before each
 * call: the conversion or extraction fails, with the disk's error or by name, and leaves nothing partial (no --out, no
 * temporary file or folder, no `rmas-bundle-*` folder), an --out that appeared is kept as it was, and the same
 * command then gives the uninterrupted output. The tab's checkpoint registry imports a bundle over a store that
 * crashes or is full at each call: a checkpoint is listed whole, with the bundle's bytes, or not at all.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { InvalidArgument } from '../../src/errors';
import { convertCmd } from '../../src/runner/convert-cmd';
import { exportBundle, importBundle } from '../../src/store/bundle';
import { materialize, removeExtracted } from '../../src/store/bundle-node';
import { checkpointRegistry } from '../../src/store/checkpoint-registry';
import { memoryStore } from '../../src/train/file-store';
import { Faults, type FaultMode, InjectedCrash, faultyStore, isEnospc, sameBytes } from './inject';

/** The writing calls of node:fs/promises: counted on `faults`, and `appear` runs just before each (then the call). */
const hook = vi.hoisted(() => ({
  faults: null as null | { tick(op: string, path: string): void; alive(): void },
  appear: null as null | ((op: string, path: string) => void),
}));
vi.mock(import('node:fs/promises'), async (orig) => {
  const real = await orig();
  const at = (op: string, path: unknown) => {
    hook.appear?.(op, String(path));
    hook.faults?.tick(`${op} ${String(path)}`, String(path));
  };
  const mod = {
    ...real,
    writeFile: (async (path, data, o) => {
      try {
        at('write', path);
      } catch (e) {
        const b = data as Uint8Array;
        await real.writeFile(path, b.subarray(0, b.length >> 1), o); // the disk filled up half way
        throw e;
      }
      return real.writeFile(path, data, o);
    }) as typeof real.writeFile,
    mkdir: (async (p, o) => (at('mkdir', p), real.mkdir(p, o))) as typeof real.mkdir,
    mkdtemp: (async (p: string) => (at('mkdtemp', p), real.mkdtemp(p))) as typeof real.mkdtemp,
    rename: (async (a, b) => (at('rename', b), real.rename(a, b))) as typeof real.rename,
    link: (async (a, b) => (at('link', b), real.link(a, b))) as typeof real.link,
    rm: (async (p, o) => (hook.faults?.alive(), real.rm(p, o))) as typeof real.rm,
  };
  return { ...mod, default: mod };
});

const ROOT = resolve(import.meta.dirname, '../..');
const OUTER = join(ROOT, 'models/tiny/system/outer');
const dir = mkdtempSync(join(tmpdir(), 'rmas-faults-convert-'));
const savedTmp = process.env.TMPDIR;
afterAll(() => {
  removeExtracted();
  process.env.TMPDIR = savedTmp;
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => Object.assign(hook, { faults: null, appear: null }));

/** Every file under `d`, relative path → bytes. */
function files(d: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (p: string, rel: string) => {
    for (const e of readdirSync(p, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(p, e.name), `${rel}${e.name}/`);
      else out.set(`${rel}${e.name}`, readFileSync(join(p, e.name)));
    }
  };
  walk(d, '');
  return out;
}
const equalFiles = (a: Map<string, Buffer>, b: Map<string, Buffer>) =>
  a.size === b.size && [...a].every(([k, v]) => b.has(k) && v.equals(b.get(k)!));
/** A bundle's files as a map (its bundle.json holds the export time, which differs between two exports). */
const bundled = async (zip: string) => new Map(Object.entries((await importBundle(readFileSync(zip), zip)).files).map(([k, v]) =>
  [k, Buffer.from(v)] as const));

interface Conversion {
  name: string;
  in: string;
  out: string;
  /** What the output holds, to compare with the uninterrupted conversion's. */
  read(out: string): Promise<Map<string, Buffer>>;
  /** The calls it makes (writes, mkdirs, links, renames) once it works. */
  points: number;
}

let n = 0;
/** A folder of its own for each attempt: whatever a failure leaves is there to see. */
const place = () => {
  const d = join(dir, `a${++n}`);
  mkdirSync(d);
  return d;
};

describe('rmas convert under faults', () => {
  const linkDir = join(dir, 'links');
  mkdirSync(linkDir);
  for (const f of readdirSync(OUTER)) writeFileSync(join(linkDir, f), readFileSync(join(OUTER, f)));
  const zip = join(dir, 'links.zip');
  const conversions: Conversion[] = [
    { name: '.pt -> .safetensors', in: join(OUTER, 'outer_12.pt'), out: 'out.safetensors', points: 2,
      read: async (o) => new Map([['', readFileSync(o)]]) },
    { name: 'folder -> bundle', in: linkDir, out: 'out.zip', points: 2, read: bundled },
    { name: 'bundle -> folder', in: zip, out: 'out', points: 2 + 2 * 5 + 1, read: async (o) => files(o) },
  ];

  it('the conversions work and make the calls counted', async () => {
    await convertCmd({ in: linkDir, out: zip });
    for (const c of conversions) {
      const faults = new Faults();
      faults.arm(0);
      hook.faults = faults;
      await convertCmd({ in: c.in, out: join(place(), c.out) });
      hook.faults = null;
      expect(faults.ops.length, `${c.name}: ${faults.ops.join(', ')}`).toBe(c.points);
    }
  });

  for (const mode of ['enospc', 'crash'] as const) {
    it(`${mode} at each call: no output, nothing partial, and the same command then works`, async () => {
      for (const c of conversions) {
        const want = await (async () => {
          const o = join(place(), c.out);
          await convertCmd({ in: c.in, out: o });
          return c.read(o);
        })();
        for (let k = 1; k <= c.points; k++) {
          const d = place();
          const faults = new Faults();
          faults.arm(k, mode);
          hook.faults = faults;
          const err = await convertCmd({ in: c.in, out: join(d, c.out) }).then(() => null, (e: unknown) => e);
          hook.faults = null;
          const where = `${c.name}, ${mode} at ${k} (${faults.hit})`;
          expect(mode === 'enospc' ? isEnospc(err) : err instanceof InjectedCrash, `${where}: ${String(err)}`).toBe(true);
          // ENOSPC: the error is handled and nothing is left; a crash (nothing ran after it) may leave a temporary
          // name, never --out
          if (mode === 'enospc') expect(readdirSync(d), where).toEqual([]);
          else expect(readdirSync(d).filter((f) => !/\.partial-/.test(f)), where).toEqual([]);
          await convertCmd({ in: c.in, out: join(d, c.out) });
          expect(equalFiles(await c.read(join(d, c.out)), want), where).toBe(true);
        }
      }
    });
  }

  it('an --out that appears during the conversion is never replaced: the conversion stops by name', async () => {
    const shapes = {
      file: (p: string) => writeFileSync(p, 'theirs'),
      folder: (p: string) => (mkdirSync(p), writeFileSync(join(p, 'theirs.txt'), 'theirs')),
      'empty folder': (p: string) => mkdirSync(p),
    };
    for (const c of conversions) {
      for (const [shape, make] of Object.entries(shapes)) {
        for (let k = 1; k <= c.points; k++) {
          const d = place();
          const out = join(d, c.out);
          let calls = 0;
          hook.appear = () => void (++calls === k && make(out));
          const err = await convertCmd({ in: c.in, out }).then(() => null, (e: unknown) => e);
          hook.appear = null;
          const where = `${c.name}: --out appears as a ${shape} before call ${k}`;
          // an empty folder made in the instant of the final rename of a folder output is the one case POSIX rename
          // cannot refuse (nothing is in it to lose); every other case stops by name
          if (shape === 'empty folder' && c.out === 'out' && k === c.points) continue;
          expect(err, where).toBeInstanceOf(InvalidArgument);
          expect((err as Error).message, where).toMatch(/^--out .* appeared while converting; nothing was replaced/);
          expect(readdirSync(d), where).toEqual([c.out]);
          if (shape === 'file') expect(readFileSync(out, 'utf8'), where).toBe('theirs');
          else expect([...files(out).keys()], where).toEqual(shape === 'folder' ? ['theirs.txt'] : []);
        }
      }
    }
  });
});

describe('a bundle extracted for a checkpoint path, under faults', () => {
  it('ENOSPC at each call of the extraction leaves no folder, and the next attempt extracts it whole', async () => {
    const zip = join(dir, 'extract.zip');
    const links = Object.fromEntries(readdirSync(OUTER).map((f) => [f, new Uint8Array(readFileSync(join(OUTER, f)))]));
    writeFileSync(zip, await exportBundle(links, { kind: 'outer', style: 'tiny_sequential' }));
    process.env.TMPDIR = join(dir, 'tmp');
    mkdirSync(process.env.TMPDIR);
    const want = new Map(Object.entries(links).map(([k, v]) => [k, Buffer.from(v)] as const));
    // mkdtemp, then a mkdir and a write per file
    const points = 1 + 2 * Object.keys(links).length;
    for (let k = 1; k <= points; k++) {
      const faults = new Faults();
      faults.arm(k, 'enospc');
      hook.faults = faults;
      const err = await materialize(zip).then(() => null, (e: unknown) => e);
      hook.faults = null;
      expect(isEnospc(err), `at ${k} (${faults.hit}): ${String(err)}`).toBe(true);
      expect(readdirSync(process.env.TMPDIR), `at ${k}`).toEqual([]);
      const got = await materialize(zip); // a failed extraction is not remembered
      expect(equalFiles(files(got), want), `at ${k}`).toBe(true);
      removeExtracted();
      expect(existsSync(got)).toBe(false);
    }
  });
});

describe('the tab\'s checkpoint registry importing a bundle, under faults', () => {
  for (const mode of ['crash', 'enospc'] as const satisfies readonly FaultMode[]) {
    it(`${mode} at each store call: the bundle is listed whole with its bytes, or not at all`, async () => {
      const links = Object.fromEntries(readdirSync(OUTER).map((f) => [f, new Uint8Array(readFileSync(join(OUTER, f)))]));
      const zip = await exportBundle(links, { kind: 'outer', style: 'tiny_sequential', step: 7, created: '2026-01-01T00:00:00.000Z' });
      // a second checkpoint (the same files but one: an import of the same files returns the first)
      const links2: Record<string, Uint8Array> = { ...links, 'outer_adapter_config.json': new TextEncoder().encode('{"second": true}\n') };
      const zip2 = await exportBundle(links2, { kind: 'outer', style: 'tiny_sequential', step: 8, created: '2026-01-01T00:00:00.000Z' });
      let points = 0;
      for (let k = 1; ; k++) {
        const mem = memoryStore();
        const base = checkpointRegistry(mem);
        const first = await base.importFile(zip, 'first.zip');
        const faults = new Faults();
        faults.arm(k, mode);
        const err = await checkpointRegistry(faultyStore(mem, faults)).importFile(zip2, 'second.zip').then(() => null, (e: unknown) => e);
        faults.disarm();
        const listed = await base.listCheckpoints();
        if (!faults.hit) {
          expect(err).toBeNull();
          expect(listed.map((c) => c.name).sort()).toEqual(['first', 'second']);
          break;
        }
        points++;
        const where = `${mode} at ${k} (${faults.hit})`;
        expect(mode === 'crash' ? err instanceof InjectedCrash : isEnospc(err), `${where}: ${String(err)}`).toBe(true);
        expect(listed.map((c) => c.id), where).toEqual([first.id]);
        const kept = await base.files(first.id);
        for (const [name, b] of Object.entries(kept)) expect(sameBytes(b, links[name]!), `${where}: ${name}`).toBe(true);
        // after ENOSPC the import cleans up after itself; after a crash its staging folder stays, never listed
        const left = (await mem.list('')).filter((x) => x !== first.id);
        if (mode === 'enospc') expect(left, where).toEqual([]);
        else expect(left.every((x) => x.startsWith('.incoming-')), where).toBe(true);
        const again = await base.importFile(zip2, 'again.zip');
        expect(again.existing, where).toBeUndefined();
        const got = await base.files(again.id);
        expect(Object.keys(got).sort(), where).toEqual(Object.keys(links2).sort());
        for (const [name, b] of Object.entries(got)) expect(sameBytes(b, links2[name]!), `${where}: again ${name}`).toBe(true);
      }
      // a write per file and the registry's own metadata, then the rename that lists it
      expect(points).toBe(Object.keys(links).length + 2);
    });
  }
  it('a staging folder a dead save left is removed by the first listing an hour after it was made, not before', async () => {
    const links = Object.fromEntries(readdirSync(OUTER).map((f) => [f, new Uint8Array(readFileSync(join(OUTER, f)))]));
    const zip = await exportBundle(links, { kind: 'outer', style: 'tiny_sequential', step: 7, created: '2026-01-01T00:00:00.000Z' });
    const mem = memoryStore();
    const reg = checkpointRegistry(mem);
    const kept = await reg.importFile(zip, 'kept.zip');
    const stage = (ms: number) => `.incoming-ckpt-${ms.toString(36)}-abc1`;
    const [old, recent] = [stage(Date.now() - 3600_000 - 5000), stage(Date.now() - 3000_000)];
    for (const d of [old, recent]) await mem.write(`${d}/adapter.pt`, new Uint8Array(100));
    expect((await reg.listCheckpoints()).map((c) => c.id)).toEqual([kept.id]);
    expect((await mem.list('')).sort()).toEqual([recent, kept.id].sort());
  });
});
