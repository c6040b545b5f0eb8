// The stand-in hub against values computed here from the fixture bytes: git blob ids, sha256, sizes, ranges,
// the real hub's error codes, and what each fault does to the bytes that reach the client.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandInHub, startHub } from './hub';

const gitBlob = (b: Uint8Array) => createHash('sha1').update(Buffer.concat([Buffer.from(`blob ${b.length}\0`), b])).digest('hex');
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const pattern = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed * 7 + (i >> 8)) & 255));
const lfsPointerOid = (b: Uint8Array) =>
  gitBlob(Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha256(b)}\nsize ${b.length}\n`));

const OPEN: Record<string, Buffer> = {
  'config.json': Buffer.from('{"model_type":"qwen2","hidden_size":64}\n'),
  'adapters/adapter(math).pt': pattern(300, 1),
  'Planner-Critic-Outerlink(math).pt': pattern(2048, 2),
  'model.safetensors': pattern(5000, 3),
  'docs/deep/notes.txt': Buffer.from('why the adapters exist\n'),
};
const GATED: Record<string, Buffer> = { 'config.json': Buffer.from('{"gated":true}'), 'weights.bin': pattern(3000, 4) };
const DATA: Record<string, Buffer> = { 'train.jsonl': Buffer.from('{"q":"1+1","a":"2"}\n'), 'data/part-0.parquet': pattern(1500, 5) };

let root: string;
let hub: StandInHub;

function writeRepo(name: string, files: Record<string, Buffer>): string {
  const dir = join(root, name);
  for (const [path, bytes] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), bytes);
  }
  return dir;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'rmas-hub-'));
  hub = await startHub({
    repos: [
      { id: 'Org/Open', dir: writeRepo('open', OPEN) },
      { id: 'Org/Gated', dir: writeRepo('gated', GATED), gated: true },
      { id: 'Org/Data', dir: writeRepo('data', DATA), type: 'dataset' },
    ],
    token: 'hf_test_token',
  });
});
afterAll(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

const get = (path: string, init: RequestInit = {}) => fetch(`${hub.url}${path}`, { redirect: 'manual', ...init });
const bytesOf = async (res: Response) => Buffer.from(await res.arrayBuffer());
const errorOf = async (res: Response) => ({ status: res.status, code: res.headers.get('x-error-code'), body: await res.json() });
const bearer = (t: string) => ({ headers: { Authorization: `Bearer ${t}` } });

/** Reads a body until it ends or fails; the bytes that arrived and whether it failed. */
async function readUntilError(res: Response): Promise<{ bytes: Buffer; failed: boolean }> {
  const reader = res.body!.getReader();
  const parts: Uint8Array[] = [];
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value);
    return { bytes: Buffer.concat(parts), failed: false };
  } catch {
    return { bytes: Buffer.concat(parts), failed: true };
  }
}

describe('stand-in hub: files', () => {
  it('serves a small file with its git blob ETag and the repo commit, by main and by commit, HEAD alike', async () => {
    const sha = hub.commit('Org/Open');
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    for (const rev of ['main', sha]) {
      const res = await get(`/Org/Open/resolve/${rev}/config.json`);
      expect(res.status).toBe(200);
      expect(await bytesOf(res)).toEqual(OPEN['config.json']);
      expect(res.headers.get('etag')).toBe(`"${gitBlob(OPEN['config.json']!)}"`);
      expect(res.headers.get('x-repo-commit')).toBe(sha);
      expect(res.headers.get('content-length')).toBe(String(OPEN['config.json']!.length));
      expect(res.headers.get('accept-ranges')).toBe('bytes');
    }
    const head = await get('/Org/Open/resolve/main/config.json', { method: 'HEAD' });
    expect([head.status, head.headers.get('etag'), head.headers.get('content-length')])
      .toEqual([200, `"${gitBlob(OPEN['config.json']!)}"`, String(OPEN['config.json']!.length)]);
    expect(hub.log.at(-1)).toMatchObject({ server: 'hub', method: 'HEAD', status: 200, bytes: 0 });
  });

  it('decodes percent-encoded names such as adapter%28math%29.pt', async () => {
    const res = await get('/Org/Open/resolve/main/adapters/adapter%28math%29.pt');
    expect(res.status).toBe(200);
    expect(await bytesOf(res)).toEqual(OPEN['adapters/adapter(math).pt']);
    expect(hub.log.at(-1)!.file).toBe('adapters/adapter(math).pt');
  });

  it('redirects an LFS file to the CDN with its linked etag and size; the CDN serves the bytes', async () => {
    const bytes = OPEN['model.safetensors']!;
    const head = await get('/Org/Open/resolve/main/model.safetensors', { method: 'HEAD' });
    expect(head.status).toBe(302);
    const location = head.headers.get('location')!;
    expect(location.startsWith(`${hub.cdnUrl}/repos/`)).toBe(true);
    expect(location.endsWith(`/${sha256(bytes)}`)).toBe(true);
    expect(location).toBe(hub.cdnLocation('Org/Open', 'model.safetensors'));
    expect(head.headers.get('x-linked-etag')).toBe(`"${sha256(bytes)}"`);
    expect(head.headers.get('x-linked-size')).toBe('5000');
    expect(head.headers.get('etag')).toBe(`"${sha256(bytes)}"`);
    expect(head.headers.get('x-repo-commit')).toBe(hub.commit('Org/Open'));

    const cdn = await fetch(location);
    const body = await bytesOf(cdn);
    expect([cdn.status, cdn.headers.get('etag'), cdn.headers.get('content-length')]).toEqual([200, `"${sha256(bytes)}"`, '5000']);
    expect(sha256(body)).toBe(sha256(bytes));
    expect(hub.log.at(-1)).toMatchObject({ server: 'cdn', status: 200, bytes: 5000, file: 'model.safetensors', repo: 'Org/Open' });

    const followed = await fetch(`${hub.url}/Org/Open/resolve/main/Planner-Critic-Outerlink%28math%29.pt`);
    expect(followed.url.startsWith(hub.cdnUrl)).toBe(true);
    expect(await bytesOf(followed)).toEqual(OPEN['Planner-Critic-Outerlink(math).pt']);
  });

  it('answers Range with 206 and Content-Range on both servers, and 416 past the end', async () => {
    const small = OPEN['config.json']!;
    const r1 = await get('/Org/Open/resolve/main/config.json', { headers: { Range: 'bytes=3-9' } });
    expect([r1.status, r1.headers.get('content-range'), r1.headers.get('content-length')])
      .toEqual([206, `bytes 3-9/${small.length}`, '7']);
    expect(await bytesOf(r1)).toEqual(small.subarray(3, 10));

    const big = OPEN['model.safetensors']!;
    const at = hub.cdnLocation('Org/Open', 'model.safetensors');
    const r2 = await fetch(at, { headers: { Range: 'bytes=4000-' } });
    expect([r2.status, r2.headers.get('content-range')]).toEqual([206, 'bytes 4000-4999/5000']);
    expect(await bytesOf(r2)).toEqual(big.subarray(4000));
    const r3 = await fetch(at, { headers: { Range: 'bytes=-10' } });
    expect([r3.status, r3.headers.get('content-range')]).toEqual([206, 'bytes 4990-4999/5000']);
    expect(await bytesOf(r3)).toEqual(big.subarray(4990));
    const r4 = await fetch(at, { headers: { Range: 'bytes=4990-7000' } });
    expect([r4.status, r4.headers.get('content-range')]).toEqual([206, 'bytes 4990-4999/5000']);
    await r4.arrayBuffer();

    const bad = await fetch(at, { headers: { Range: 'bytes=5000-' } });
    expect([bad.status, bad.headers.get('content-range')]).toEqual([416, 'bytes */5000']);
    await bad.arrayBuffer();
  });
});

describe('stand-in hub: api', () => {
  // An LFS pointer is 125 bytes plus the digits of the size; the tree lists the pointer's blob id as the file's oid.
  const fileEntry = (path: string, b: Buffer, lfs: boolean) => ({
    type: 'file', path, size: b.length, oid: lfs ? lfsPointerOid(b) : gitBlob(b),
    ...(lfs ? { lfs: { oid: sha256(b), size: b.length, pointerSize: 125 + String(b.length).length } } : {}) });
  const dirEntry = (path: string) => ({ type: 'directory', path, size: 0, oid: expect.stringMatching(/^[0-9a-f]{40}$/) });

  it('lists the tree: top level, recursive, a folder, and a dataset', async () => {
    const top = await (await get('/api/models/Org/Open/tree/main')).json();
    expect(top).toEqual([
      fileEntry('Planner-Critic-Outerlink(math).pt', OPEN['Planner-Critic-Outerlink(math).pt']!, true),
      dirEntry('adapters'), fileEntry('config.json', OPEN['config.json']!, false), dirEntry('docs'),
      fileEntry('model.safetensors', OPEN['model.safetensors']!, true),
    ]);
    expect(top[0].lfs.pointerSize).toBe(129);
    const all = await (await get(`/api/models/Org/Open/tree/${hub.commit('Org/Open')}?recursive=true`)).json();
    expect(all.map((e: { path: string }) => e.path)).toEqual(['Planner-Critic-Outerlink(math).pt', 'adapters', 'adapters/adapter(math).pt',
      'config.json', 'docs', 'docs/deep', 'docs/deep/notes.txt', 'model.safetensors']);
    expect(all[2]).toEqual(fileEntry('adapters/adapter(math).pt', OPEN['adapters/adapter(math).pt']!, false));
    expect(await (await get('/api/models/Org/Open/tree/main/docs')).json()).toEqual([dirEntry('docs/deep')]);
    expect(await (await get('/api/models/Org/Open/tree/main/docs/deep')).json())
      .toEqual([fileEntry('docs/deep/notes.txt', OPEN['docs/deep/notes.txt']!, false)]);
    expect(await (await get('/api/datasets/Org/Data/tree/main?recursive=true')).json()).toEqual([
      dirEntry('data'), fileEntry('data/part-0.parquet', DATA['data/part-0.parquet']!, true),
      fileEntry('train.jsonl', DATA['train.jsonl']!, false),
    ]);
    const missing = await errorOf(await get('/api/models/Org/Open/tree/main/nope'));
    expect([missing.status, missing.code]).toEqual([404, 'EntryNotFound']);
  });

  it('describes a repo: sha, siblings, gated; by revision too; sizes with blobs=true', async () => {
    const sha = hub.commit('Org/Open');
    const info = await (await get('/api/models/Org/Open')).json();
    expect(info).toMatchObject({ id: 'Org/Open', modelId: 'Org/Open', sha, private: false, gated: false });
    expect(info.siblings).toEqual(Object.keys(OPEN).sort().map((rfilename) => ({ rfilename })));
    expect((await (await get(`/api/models/Org/Open/revision/${sha}`)).json()).sha).toBe(sha);
    const blobs = await (await get('/api/models/Org/Open?blobs=true')).json();
    expect(blobs.siblings.find((s: { rfilename: string }) => s.rfilename === 'model.safetensors'))
      .toMatchObject({ size: 5000, lfs: { sha256: sha256(OPEN['model.safetensors']!), size: 5000 } });
    const gated = await (await get('/api/models/Org/Gated', bearer('hf_test_token'))).json();
    expect([gated.gated, gated.sha]).toEqual(['manual', hub.commit('Org/Gated')]);
    const data = await (await get('/api/datasets/Org/Data')).json();
    expect([data.id, data.sha, data.siblings.length]).toEqual(['Org/Data', hub.commit('datasets/Org/Data'), 2]);
    expect(hub.commit('Org/Data')).toBe(data.sha);
    expect(new Set([hub.commit('Org/Open'), hub.commit('Org/Gated'), data.sha]).size).toBe(3);
  });

  it('answers the real hub error codes', async () => {
    for (const path of ['/Org/Nope/resolve/main/config.json', '/api/models/Org/Nope', '/Org/Data/resolve/main/train.jsonl']) {
      expect(await errorOf(await get(path))).toEqual({ status: 401, code: 'RepoNotFound', body: { error: 'Repository not found' } });
    }
    const entry = await get('/Org/Open/resolve/main/nope.bin');
    expect([entry.status, entry.headers.get('x-error-code'), entry.headers.get('x-repo-commit')])
      .toEqual([404, 'EntryNotFound', hub.commit('Org/Open')]);
    expect((await entry.json()).error).toMatch(/nope\.bin/);
    for (const path of ['/Org/Open/resolve/v9/config.json', `/api/models/Org/Open/revision/${'0'.repeat(40)}`]) {
      const rev = await errorOf(await get(path));
      expect([rev.status, rev.code]).toEqual([404, 'RevisionNotFound']);
    }
    const dataset = await get('/datasets/Org/Data/resolve/main/train.jsonl');
    expect(await bytesOf(dataset)).toEqual(DATA['train.jsonl']);
  });

  it('opens a gated repo only with the token, on resolve and api; others need none', async () => {
    for (const path of ['/Org/Gated/resolve/main/config.json', '/api/models/Org/Gated', '/api/models/Org/Gated/tree/main']) {
      const none = await errorOf(await get(path));
      expect([none.status, none.code]).toEqual([401, 'GatedRepo']);
      expect(none.body.error).toMatch(/Org\/Gated is restricted/);
      const wrong = await errorOf(await get(path, bearer('hf_wrong')));
      expect([wrong.status, wrong.code]).toEqual([403, 'GatedRepo']);
      expect((await get(path, bearer('hf_test_token'))).status).toBe(200);
    }
    expect(await bytesOf(await get('/Org/Gated/resolve/main/config.json', bearer(hub.token)))).toEqual(GATED['config.json']);
    expect((await get('/Org/Open/resolve/main/config.json', bearer('hf_wrong'))).status).toBe(200);
  });

  it('logs the Authorization each server saw: the token reaches the hub, never the CDN', async () => {
    const from = hub.log.length;
    const res = await fetch(`${hub.url}/Org/Gated/resolve/main/weights.bin`, bearer(hub.token));
    expect(sha256(await bytesOf(res))).toBe(sha256(GATED['weights.bin']!));
    expect(hub.log.slice(from).map((e) => [e.server, e.status, e.authorization, e.bytes])).toEqual([
      ['hub', 302, 'Bearer hf_test_token', 0], ['cdn', 200, null, 3000],
    ]);
  });

  it('sends CORS headers on every response, the CDN and redirects included, and answers preflights', async () => {
    for (const base of [hub.url, hub.cdnUrl]) {
      const pre = await fetch(`${base}/Org/Open/resolve/main/config.json`, { method: 'OPTIONS',
        headers: { Origin: 'http://page.test', 'Access-Control-Request-Method': 'GET',
          'Access-Control-Request-Headers': 'authorization,range' } });
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe('*');
      expect(pre.headers.get('access-control-allow-headers')).toBe('Authorization, Range, Content-Type');
      expect(pre.headers.get('access-control-allow-methods')).toMatch(/GET, HEAD/);
    }
    const cdn = hub.cdnLocation('Org/Open', 'model.safetensors');
    for (const res of [await get('/Org/Open/resolve/main/model.safetensors'), await fetch(cdn), await get('/Org/Nope/resolve/main/x')]) {
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      const exposed = res.headers.get('access-control-expose-headers')!.split(', ');
      for (const h of ['ETag', 'X-Linked-Etag', 'X-Linked-Size', 'X-Repo-Commit', 'X-Error-Code', 'Content-Range', 'Content-Length',
        'Accept-Ranges', 'Location', 'Retry-After']) expect(exposed).toContain(h);
      await res.arrayBuffer();
    }
  });
});

describe('stand-in hub: faults', () => {
  it('drops an LFS download on the CDN after exactly afterBytes; a Range request then completes the file', async () => {
    const bytes = OPEN['model.safetensors']!;
    hub.fault({ kind: 'drop', file: 'model.safetensors', afterBytes: 1000 });
    const from = hub.log.length;
    const res = await fetch(`${hub.url}/Org/Open/resolve/main/model.safetensors`);
    expect(res.status).toBe(200);
    const first = await readUntilError(res);
    expect([first.failed, first.bytes.length]).toEqual([true, 1000]);
    expect(hub.bytesServed('model.safetensors', from)).toBe(1000);
    expect(hub.log.slice(from).map((e) => [e.server, e.status, e.bytes])).toEqual([['hub', 302, 0], ['cdn', 200, 1000]]);

    const rest = await fetch(res.url, { headers: { Range: 'bytes=1000-' } });
    expect([rest.status, rest.headers.get('content-range')]).toEqual([206, 'bytes 1000-4999/5000']);
    const whole = Buffer.concat([first.bytes, await bytesOf(rest)]);
    expect(sha256(whole)).toBe(sha256(bytes));
    expect(hub.bytesServed('model.safetensors', from)).toBe(5000);
  });

  it('drops a small file on the hub, honours times and repo, and drops before any byte with afterBytes 0', async () => {
    hub.fault({ kind: 'drop', file: 'adapter(math).pt', afterBytes: 100, times: 2, repo: 'Org/Open' });
    hub.fault({ kind: 'drop', file: 'config.json', afterBytes: 0, repo: 'Org/Gated' });
    const from = hub.log.length;
    for (let i = 0; i < 2; i++) {
      const got = await readUntilError(await get('/Org/Open/resolve/main/adapters/adapter(math).pt'));
      expect([got.failed, got.bytes.length]).toEqual([true, 100]);
    }
    const third = await readUntilError(await get('/Org/Open/resolve/main/adapters/adapter(math).pt'));
    expect([third.failed, third.bytes.length]).toEqual([false, 300]);
    expect(hub.bytesServed('adapter(math).pt', from)).toBe(500);

    expect(await bytesOf(await get('/Org/Open/resolve/main/config.json'))).toEqual(OPEN['config.json']);
    const gated = await readUntilError(await get('/Org/Gated/resolve/main/config.json', bearer(hub.token)));
    expect([gated.failed, gated.bytes.length]).toEqual([true, 0]);
  });

  it('answers a status fault `times` times with Retry-After, on the hub and then the CDN, then serves the file', async () => {
    hub.fault({ kind: 'status', status: 429, file: 'model.safetensors', retryAfter: 7, times: 2 });
    const from = hub.log.length;
    const hit = await get('/Org/Open/resolve/main/model.safetensors');
    expect([hit.status, hit.headers.get('retry-after'), hit.headers.get('access-control-allow-origin')]).toEqual([429, '7', '*']);
    await hit.arrayBuffer();
    const cdn = await fetch(hub.cdnLocation('Org/Open', 'model.safetensors'), { method: 'HEAD' });
    expect([cdn.status, cdn.headers.get('retry-after')]).toEqual([429, '7']);
    const ok = await fetch(`${hub.url}/Org/Open/resolve/main/model.safetensors`);
    expect(sha256(await bytesOf(ok))).toBe(sha256(OPEN['model.safetensors']!));
    expect(hub.log.slice(from).map((e) => [e.server, e.method, e.status])).toEqual([
      ['hub', 'GET', 429], ['cdn', 'HEAD', 429], ['hub', 'GET', 302], ['cdn', 'GET', 200],
    ]);
  });

  it('a status fault without a file hits the next request of any kind; one for another repo waits', async () => {
    hub.fault({ kind: 'status', status: 500, repo: 'Org/Gated' });
    hub.fault({ kind: 'status', status: 503 });
    const first = await get('/api/models/Org/Open');
    expect([first.status, first.headers.get('retry-after')]).toEqual([503, null]);
    await first.arrayBuffer();
    expect((await get('/api/models/Org/Open')).status).toBe(200);
    expect((await get('/api/models/Org/Gated')).status).toBe(500);
    expect((await get('/api/models/Org/Gated')).status).toBe(401);
  });

  it('throttles a body to bytesPerSecond', async () => {
    hub.fault({ kind: 'slow', file: 'weights.bin', bytesPerSecond: 10_000 });
    const t0 = performance.now();
    const res = await fetch(`${hub.url}/Org/Gated/resolve/main/weights.bin`, bearer(hub.token));
    expect(await bytesOf(res)).toEqual(GATED['weights.bin']);
    // 3000 bytes at 10 kB/s: 300 ms give or take the last chunk's wait.
    expect(performance.now() - t0).toBeGreaterThan(250);
  });

  it('close() shuts both servers', async () => {
    const other = await startHub({ repos: [{ id: 'Org/Open', dir: join(root, 'open') }] });
    const url = `${other.url}/Org/Open/resolve/main/config.json`;
    expect((await fetch(url)).status).toBe(200);
    await other.close();
    await expect(fetch(url)).rejects.toThrow();
    await expect(fetch(`${other.cdnUrl}/`)).rejects.toThrow();
  });
});
