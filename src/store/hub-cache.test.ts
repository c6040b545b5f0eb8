import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandInHub, startHub } from '../../test/util/hub';
import { type DownloadEvent, cachedSnapshot, downloadRepo, repoFolderName } from './hub-cache';

const root = mkdtempSync(join(tmpdir(), 'rmas-hub-cache-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const REPO = 'RecursiveMAS/Tiny-Role';
/** Bytes that differ per file and position, so that a resumed file stitched at the wrong offset cannot pass. */
const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed * 7 + (i >> 8)) & 255);
const FILES: Record<string, Uint8Array> = {
  'config.json': new TextEncoder().encode('{"model_type":"qwen3"}\n'),
  'model.safetensors': bytes(300_000, 1),
  'adapter(math).pt': bytes(5000, 2),
  'sub/dir/tokenizer.json': new TextEncoder().encode('{"version":"1.0"}'),
  'README.md': new TextEncoder().encode('# tiny\n'),
};
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const gitSha1 = (b: Uint8Array) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

let hub: StandInHub;
beforeAll(async () => {
  const dir = join(root, 'repo');
  for (const [f, b] of Object.entries(FILES)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), b);
  }
  hub = await startHub({ repos: [{ id: REPO, dir }, { id: 'RecursiveMAS/Gated', dir, gated: true }], lfsThreshold: 1024 });
});
afterAll(() => hub.close());

let n = 0;
const freshCache = () => join(root, `cache${++n}`);
const noWait = { sleep: async () => {} };

describe('cachedSnapshot', () => {
  it('follows refs/main (or a commit asked for), else the only snapshot; null when absent', async () => {
    const cache = join(root, 'layout');
    const repo = join(cache, 'models--RecursiveMAS--Sequential-Light-Outerlinks');
    await mkdir(join(repo, 'snapshots/abc123'), { recursive: true });
    await mkdir(join(repo, 'snapshots/def456'), { recursive: true });
    await mkdir(join(repo, 'refs'), { recursive: true });
    await writeFile(join(repo, 'refs/main'), 'def456\n');
    const one = join(cache, 'models--Qwen--Qwen3-1.7B');
    await mkdir(join(one, 'snapshots/0011'), { recursive: true });
    expect(await cachedSnapshot('RecursiveMAS/Sequential-Light-Outerlinks', { cacheDir: cache })).toBe(`${repo}/snapshots/def456`);
    expect(await cachedSnapshot('Qwen/Qwen3-1.7B', { cacheDir: cache })).toBe(`${one}/snapshots/0011`);
    expect(await cachedSnapshot('Qwen/Absent', { cacheDir: cache })).toBeNull();
    await writeFile(join(repo, 'refs/main'), 'gone\n');
    expect(await cachedSnapshot('RecursiveMAS/Sequential-Light-Outerlinks', { cacheDir: cache })).toBeNull(); // two snapshots, no ref
    await expect(cachedSnapshot('no-slash', { cacheDir: cache })).rejects.toMatchObject({ name: 'InvalidArgument' });
    expect(repoFolderName('a/b', 'dataset')).toBe('datasets--a--b');
  });
});

describe('downloadRepo', () => {
  it('writes the layout Python reads: blobs by sha256 or git sha1, relative snapshot links, refs/main', async () => {
    const cacheDir = freshCache();
    const events: DownloadEvent[] = [];
    const r = await downloadRepo({ endpoint: hub.url }, REPO, { cacheDir, include: ['*.json', '*.safetensors', 'adapter*.pt'],
      onEvent: (e) => events.push(e) });
    const sha = hub.commit(REPO);
    const folder = join(cacheDir, 'models--RecursiveMAS--Tiny-Role');
    expect(r).toEqual({ dir: `${folder}/snapshots/${sha}`, commit: sha, fetched: 305_000 + 23 + 17,
      files: ['adapter(math).pt', 'config.json', 'model.safetensors', 'sub/dir/tokenizer.json'] });
    expect(readFileSync(join(folder, 'refs/main'), 'utf8')).toBe(sha);
    for (const f of r.files) {
      const b = FILES[f]!;
      const etag = b.length >= 1024 ? sha256(b) : gitSha1(b);
      expect(readlinkSync(join(r.dir, f))).toBe(`${'../'.repeat(f.split('/').length + 1)}blobs/${etag}`);
      expect(new Uint8Array(readFileSync(join(r.dir, f)))).toEqual(b);
    }
    expect(existsSync(join(r.dir, 'README.md'))).toBe(false);
    expect(readdirSync(join(folder, 'blobs')).some((b) => b.endsWith('.incomplete'))).toBe(false);
    expect(events.filter((e) => e.type === 'done').map((e) => e.file)).toEqual(r.files);

    // a second run asks for the file list and no file body; offline it asks nothing at all
    const from = hub.log.length;
    const again = await downloadRepo({ endpoint: hub.url }, REPO, { cacheDir, include: ['*.json', '*.safetensors', 'adapter*.pt'] });
    expect(again).toEqual({ ...r, fetched: 0 });
    expect(hub.log.slice(from).map((q) => q.path)).toEqual([
      `/api/models/${REPO}/revision/main`, `/api/models/${REPO}/tree/${sha}?recursive=true`,
    ]);
    const offline = await downloadRepo({ endpoint: hub.url, offline: true }, REPO, { cacheDir });
    expect(offline).toEqual({ ...r, fetched: 0 });
    expect(hub.log.length).toBe(from + 2);
    await expect(downloadRepo({ endpoint: hub.url, offline: true }, 'RecursiveMAS/Absent', { cacheDir })).rejects.toMatchObject({
      name: 'HubOffline',
      message: `RecursiveMAS/Absent is not in the Hugging Face cache at ${cacheDir} and HF_HUB_OFFLINE is set, so nothing is downloaded; ` +
        'unset HF_HUB_OFFLINE, or fetch it first while online (rmas download RecursiveMAS/Absent)',
    });
  });

  it('falls back to the cached snapshot when the hub does not answer, and fails by name when none is cached', async () => {
    const cacheDir = freshCache();
    const r = await downloadRepo({ endpoint: hub.url }, REPO, { cacheDir, include: ['config.json'] });
    const events: DownloadEvent[] = [];
    const down = { endpoint: 'http://127.0.0.1:9' }; // nothing listens on the discard port
    const again = await downloadRepo(down, REPO, { cacheDir, ...noWait, onEvent: (e) => events.push(e) });
    expect(again).toEqual({ ...r, fetched: 0 });
    expect(events.map((e) => e.type)).toEqual(['cached']);
    expect(events[0]).toMatchObject({ repo: REPO, dir: r.dir, why: expect.stringContaining('network error') });
    await expect(downloadRepo(down, REPO, { cacheDir: freshCache(), ...noWait, retries: 1 })).rejects.toMatchObject({
      name: 'DownloadFailed', message: expect.stringMatching(/network error .* after 2 attempt\(s\); check the connection and run again$/),
    });
  });

  it('continues a dropped transfer from its last byte and fetches each byte once', async () => {
    const cacheDir = freshCache();
    hub.fault({ kind: 'drop', file: 'model.safetensors', afterBytes: 120_000 });
    hub.fault({ kind: 'drop', file: 'model.safetensors', afterBytes: 100_000 });
    const from = hub.log.length;
    const retries: string[] = [];
    const r = await downloadRepo({ endpoint: hub.url }, REPO, {
      cacheDir, include: ['model.safetensors'], ...noWait, onEvent: (e) => e.type === 'retry' && retries.push(e.why),
    });
    expect(r.fetched).toBe(300_000);
    expect(hub.bytesServed('model.safetensors', from)).toBe(300_000);
    expect(hub.log.slice(from).filter((q) => q.server === 'cdn').map((q) => q.range)).toEqual([null, 'bytes=120000-', 'bytes=220000-']);
    expect(retries.map((w) => w.replace(/ \(.*/, ''))).toEqual(['connection lost at byte 120000', 'connection lost at byte 220000']);
    expect(new Uint8Array(readFileSync(join(r.dir, 'model.safetensors')))).toEqual(FILES['model.safetensors']);
  });

  it('resumes an .incomplete file left by an earlier run with a Range request', async () => {
    const cacheDir = freshCache();
    const blobs = join(cacheDir, 'models--RecursiveMAS--Tiny-Role', 'blobs');
    mkdirSync(blobs, { recursive: true });
    const b = FILES['model.safetensors']!;
    writeFileSync(join(blobs, `${sha256(b)}.incomplete`), b.subarray(0, 77_777));
    const events: DownloadEvent[] = [];
    const from = hub.log.length;
    const r = await downloadRepo({ endpoint: hub.url }, REPO, {
      cacheDir, include: ['model.safetensors'], onEvent: (e) => events.push(e),
    });
    expect(events[0]).toEqual({ type: 'file', repo: REPO, file: 'model.safetensors', total: 300_000, from: 77_777 });
    expect([r.fetched, hub.bytesServed('model.safetensors', from)]).toEqual([300_000 - 77_777, 300_000 - 77_777]);
    expect(new Uint8Array(readFileSync(join(r.dir, 'model.safetensors')))).toEqual(b);
  });

  it('retries 429 and 503 as told, and refuses bytes that do not hash to the hub\'s etag, keeping nothing', async () => {
    const cacheDir = freshCache();
    hub.fault({ kind: 'status', status: 429, file: 'adapter(math).pt', retryAfter: 3 });
    hub.fault({ kind: 'status', status: 503, file: 'adapter(math).pt' });
    const waits: number[] = [];
    const sleep = async (ms: number) => void waits.push(ms);
    const r = await downloadRepo({ endpoint: hub.url }, REPO, { cacheDir, include: ['adapter*.pt'], sleep });
    expect(waits).toEqual([3000, 2000]);
    expect(new Uint8Array(readFileSync(join(r.dir, 'adapter(math).pt')))).toEqual(FILES['adapter(math).pt']);

    const flip: typeof fetch = async (u, i) => {
      const res = await fetch(u, i);
      if (!String(u).startsWith(hub.cdnUrl)) return res;
      const b = new Uint8Array(await res.arrayBuffer());
      b[4000] ^= 1;
      return new Response(b, { status: res.status, headers: res.headers });
    };
    const other = freshCache();
    const flipped = downloadRepo({ endpoint: hub.url }, REPO, { cacheDir: other, include: ['adapter*.pt'], fetch: flip });
    await expect(flipped).rejects.toMatchObject({
      name: 'DownloadFailed',
      message: expect.stringMatching(/the bytes hash to [0-9a-f]{64}, not the hub's [0-9a-f]{64}; the damaged file was removed: run again$/),
    });
    expect(readdirSync(join(other, 'models--RecursiveMAS--Tiny-Role', 'blobs'))).toEqual([]);
  });

  it('sends the token to the hub only, never to the CDN; a gated repo without it is GatedRepo', async () => {
    const from = hub.log.length;
    const hubWithToken = { endpoint: hub.url, token: hub.token };
    await downloadRepo(hubWithToken, 'RecursiveMAS/Gated', { cacheDir: freshCache(), include: ['model.safetensors'] });
    const seen = hub.log.slice(from).map((q) => [q.server, q.authorization]);
    expect(seen).toEqual([['hub', `Bearer ${hub.token}`], ['hub', `Bearer ${hub.token}`], ['hub', `Bearer ${hub.token}`], ['cdn', null]]);
    await expect(downloadRepo({ endpoint: hub.url }, 'RecursiveMAS/Gated', { cacheDir: freshCache() })).rejects.toMatchObject({
      name: 'GatedRepo',
    });
  });

  it('waits while a live process holds the blob\'s lock, and takes over a lock whose process is gone', async () => {
    const cacheDir = freshCache();
    const b = FILES['model.safetensors']!;
    const locks = join(cacheDir, '.locks', 'models--RecursiveMAS--Tiny-Role');
    mkdirSync(locks, { recursive: true });
    const holder = spawn('sleep', ['1']);
    writeFileSync(join(locks, `${sha256(b)}.rmas-lock`), String(holder.pid));
    const events: DownloadEvent[] = [];
    const t0 = performance.now();
    await downloadRepo({ endpoint: hub.url }, REPO, { cacheDir, include: ['model.safetensors'], onEvent: (e) => events.push(e) });
    expect(performance.now() - t0).toBeGreaterThan(500);
    expect(events[0]).toEqual({ type: 'wait', repo: REPO, file: 'model.safetensors', pid: holder.pid });
    expect(existsSync(join(locks, `${sha256(b)}.rmas-lock`))).toBe(false);

    const dead = freshCache();
    const deadLocks = join(dead, '.locks', 'models--RecursiveMAS--Tiny-Role');
    mkdirSync(deadLocks, { recursive: true });
    writeFileSync(join(deadLocks, `${sha256(b)}.rmas-lock`), '999999999');
    const seen: DownloadEvent[] = [];
    await downloadRepo({ endpoint: hub.url }, REPO, { cacheDir: dead, include: ['model.safetensors'], onEvent: (e) => seen.push(e) });
    expect(seen.some((e) => e.type === 'wait')).toBe(false);
  });
});
