/**
 * A stand-in Hugging Face hub on 127.0.0.1 for tests: the endpoints hub clients use (resolve, api info, api tree), the
 * hub's error codes, LFS files redirected to a second server that plays the CDN, CORS for the page, a log of every
 * request on both servers, and faults (dropped connections, error statuses, slow bodies) injected on demand.
 * Repo files are read once at start; a test that changes a folder afterwards starts another hub.
 */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface HubRepoSpec {
  id: string;                 // 'Org/Name'
  dir: string;                // local folder whose files (recursively, relative paths with '/') are the repo's files
  type?: 'model' | 'dataset'; // default 'model'
  gated?: boolean;            // needs the hub's token (Authorization: Bearer <token>)
}

export interface HubRequest {
  server: 'hub' | 'cdn';
  method: string;
  path: string;               // includes the query string
  status: number;             // 0 until the head is written
  range: string | null;
  authorization: string | null;
  bytes: number;              // body bytes written to the socket, counted as each chunk is flushed
  repo: string | null;        // the repo id the request names (or, on the CDN, the one the blob belongs to)
  file: string | null;        // the repo-relative file path it names, if any
}

type FaultScope = { repo?: string; times?: number };
/**
 * Faults are consumed in the order given, each `times` times (default 1). `file` is a repo-relative path or its last
 * segments ('adapter(math).pt' matches 'adapters/adapter(math).pt'). A status fault answers before any other check, so
 * it reaches a gated or missing file too; otherwise one drop and one slow fault may act on the same body together. A drop
 * waits for a body longer than its afterBytes (a one-byte size probe passes it by).
 */
export type HubFault =
  | ({ kind: 'drop'; file: string; afterBytes: number } & FaultScope)
  | ({ kind: 'status'; status: number; file?: string; retryAfter?: number } & FaultScope)
  | ({ kind: 'slow'; file?: string; bytesPerSecond: number } & FaultScope);

export interface StandInHub {
  url: string;                // what HF_ENDPOINT is set to
  cdnUrl: string;             // where LFS files redirect to
  token: string;              // opens gated repos
  log: HubRequest[];
  fault(f: HubFault): void;
  /** Body bytes served for files whose path ends with `file` (both servers, 200/206 only), since log index `from`. */
  bytesServed(file: string, from?: number): number;
  commit(repo: string): string;
  /** The CDN URL an LFS file redirects to, for tests that resume a download there. */
  cdnLocation(repo: string, file: string): string;
  close(): Promise<void>;
}

interface RepoFile { path: string; bytes: Buffer; oid: string; sha256: string; lfs: boolean; pointerSize: number }
interface Repo { id: string; type: 'model' | 'dataset'; gated: boolean; files: Map<string, RepoFile>; sha: string; cdnDir: string }
interface Exchange { req: IncomingMessage; res: ServerResponse; entry: HubRequest }
type Route =
  | { kind: 'resolve'; type: Repo['type']; id: string; rev: string; file: string }
  | { kind: 'info'; type: Repo['type']; id: string; rev: string; blobs: boolean }
  | { kind: 'tree'; type: Repo['type']; id: string; rev: string; dir: string; recursive: boolean };

const EXPOSED = ['ETag', 'X-Linked-Etag', 'X-Linked-Size', 'X-Repo-Commit', 'X-Error-Code', 'X-Error-Message', 'Content-Range',
  'Content-Length', 'Accept-Ranges', 'Location', 'Retry-After'];
const CORS = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': EXPOSED.join(', ') };
const CHUNK = 64 * 1024;

const sha1 = (b: Uint8Array | string) => createHash('sha1').update(b).digest('hex');
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
/** git's object id of a blob: what the hub sends as a small file's ETag and lists as a file's oid. */
const blobOid = (b: Uint8Array) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
const lfsPointer = (hash: string, size: number) => `version https://git-lfs.github.com/spec/v1\noid sha256:${hash}\nsize ${size}\n`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function listFiles(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) => {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    return e.isDirectory() ? listFiles(dir, rel) : e.isFile() ? [rel] : [];
  });
}

function loadRepo(spec: HubRepoSpec, lfsThreshold: number): Repo {
  if (!/^[^/]+\/[^/]+$/.test(spec.id)) throw new Error(`stand-in hub: repo id "${spec.id}" is not of the form Org/Name`);
  const type = spec.type ?? 'model';
  const files = new Map<string, RepoFile>();
  for (const path of listFiles(spec.dir).sort()) {
    const bytes = readFileSync(join(spec.dir, path));
    const hash = sha256(bytes);
    const lfs = bytes.length >= lfsThreshold;
    // In git an LFS file's blob is its pointer, so the tree lists the pointer's oid, as the real hub does.
    const pointer = Buffer.from(lfsPointer(hash, bytes.length));
    files.set(path, { path, bytes, sha256: hash, lfs, oid: blobOid(lfs ? pointer : bytes), pointerSize: pointer.length });
  }
  const sha = sha1(`${type}/${spec.id}\n${[...files.values()].map((f) => `${f.path}\0${f.oid}\n`).join('')}`);
  const h = sha1(`${type}/${spec.id}`);
  return { id: spec.id, type, gated: spec.gated ?? false, files, sha, cdnDir: `/repos/${h.slice(0, 2)}/${h.slice(2, 4)}/${h}` };
}

/** The hub route a path names, or null; segments are decoded one by one so that `%28`, `%29` and `%2F` all work. */
function parseRoute(url: URL): Route | null {
  const seg = url.pathname.split('/').slice(1).map(decodeURIComponent);
  if (seg[0] === 'api' && (seg[1] === 'models' || seg[1] === 'datasets') && seg.length >= 4) {
    const type = seg[1] === 'models' ? 'model' : 'dataset';
    const id = `${seg[2]}/${seg[3]}`;
    const rest = seg.slice(4);
    const blobs = url.searchParams.get('blobs') === 'true';
    if (rest.length === 0 || (rest.length === 1 && rest[0] === '')) return { kind: 'info', type, id, rev: 'main', blobs };
    if (rest[0] === 'revision' && rest.length === 2) return { kind: 'info', type, id, rev: rest[1]!, blobs };
    if (rest[0] === 'tree' && rest.length >= 2) {
      const dir = rest.slice(2).filter((s) => s !== '').join('/');
      return { kind: 'tree', type, id, rev: rest[1]!, dir, recursive: url.searchParams.get('recursive') === 'true' };
    }
    return null;
  }
  const type = seg[0] === 'datasets' ? 'dataset' : 'model';
  const s = type === 'dataset' ? seg.slice(1) : seg;
  if (s.length >= 5 && s[2] === 'resolve') return { kind: 'resolve', type, id: `${s[0]}/${s[1]}`, rev: s[3]!, file: s.slice(4).join('/') };
  return null;
}

/** The bytes a Range header asks of `size`: null for the whole body (absent, malformed or multi-range), 'bad' if unsatisfiable. */
function parseRange(header: string | undefined, size: number): [number, number] | null | 'bad' {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header?.trim() ?? '');
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const n = Number(m[2]);
    return n === 0 || size === 0 ? 'bad' : [Math.max(0, size - n), size - 1];
  }
  const a = Number(m[1]);
  const b = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (m[2] !== '' && Number(m[2]) < a) return null;
  return a >= size ? 'bad' : [a, b];
}

function treeEntries(repo: Repo, dir: string, recursive: boolean): object[] | null {
  const prefix = dir === '' ? '' : `${dir}/`;
  const under = [...repo.files.values()].filter((f) => f.path.startsWith(prefix));
  if (dir !== '' && under.length === 0) return null;
  const dirs = new Set<string>();
  const files: RepoFile[] = [];
  for (const f of under) {
    const parts = f.path.slice(prefix.length).split('/');
    const depth = recursive ? parts.length - 1 : Math.min(1, parts.length - 1);
    for (let i = 1; i <= depth; i++) dirs.add(prefix + parts.slice(0, i).join('/'));
    if (recursive || parts.length === 1) files.push(f);
  }
  // A directory's oid only has to be stable and change with its contents, as a git tree id does.
  const treeOid = (d: string) => sha1(under.filter((f) => f.path.startsWith(`${d}/`)).map((f) => `${f.path}\0${f.oid}\n`).join(''));
  const entries = [
    ...[...dirs].map((d) => ({ type: 'directory', oid: treeOid(d), size: 0, path: d })),
    ...files.map((f) => ({ type: 'file', oid: f.oid, size: f.bytes.length, path: f.path,
      ...(f.lfs ? { lfs: { oid: f.sha256, size: f.bytes.length, pointerSize: f.pointerSize } } : {}) })),
  ];
  return entries.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
}

/** Starts the hub and its CDN on ephemeral ports of 127.0.0.1. */
export async function startHub(opts: { repos: HubRepoSpec[]; lfsThreshold?: number; token?: string }): Promise<StandInHub> {
  const token = opts.token ?? 'hf_standin_token';
  const repos = new Map<string, Repo>();
  for (const spec of opts.repos) {
    const repo = loadRepo(spec, opts.lfsThreshold ?? 1024);
    repos.set(`${repo.type}:${repo.id}`, repo);
  }
  const blobs = new Map<string, { repo: Repo; file: RepoFile }>();
  for (const repo of repos.values()) {
    for (const file of repo.files.values()) if (file.lfs) blobs.set(`${repo.cdnDir}/${file.sha256}`, { repo, file });
  }
  const log: HubRequest[] = [];
  const faults: { fault: HubFault; left: number }[] = [];
  let cdnUrl = '';

  /** The first pending fault of `kind` that fits, consumed once. Drop and slow act on file bodies only. */
  function takeFault<K extends HubFault['kind']>(
    kind: K, entry: HubRequest, body: boolean, bodyBytes = Infinity,
  ): Extract<HubFault, { kind: K }> | null {
    for (const p of faults) {
      const f = p.fault;
      if (p.left <= 0 || f.kind !== kind || (kind !== 'status' && !body)) continue;
      // a drop cuts a body after afterBytes: a shorter body (a one-byte size probe) passes and leaves the fault for the next
      if (f.kind === 'drop' && f.afterBytes >= bodyBytes) continue;
      if (f.repo !== undefined && f.repo !== entry.repo) continue;
      if (f.file !== undefined && !(entry.file === f.file || entry.file?.endsWith(`/${f.file}`))) continue;
      p.left--;
      return f as Extract<HubFault, { kind: K }>;
    }
    return null;
  }

  function head(x: Exchange, status: number, headers: Record<string, string | number>): void {
    const { res, entry } = x;
    entry.status = status;
    res.writeHead(status, { ...CORS, ...headers });
  }

  /** Writes `body` in chunks, counting each once flushed; a drop cuts the socket after `dropAfter` bytes have gone out. */
  async function send(x: Exchange, body: Uint8Array, dropAfter?: number, bytesPerSecond?: number) {
    const { req, res, entry } = x;
    if (req.method === 'HEAD') return void res.end();
    const limit = dropAfter === undefined ? body.length : Math.min(dropAfter, body.length);
    const step = bytesPerSecond ? Math.max(1, Math.floor(bytesPerSecond / 20)) : CHUNK;
    const closed = new Promise<Error>((r) => res.once('close', () => r(new Error('closed'))));
    for (let off = 0; off < limit && !res.destroyed; off += step) {
      const chunk = body.subarray(off, Math.min(limit, off + step));
      const err = await Promise.race([new Promise<Error | null | undefined>((r) => res.write(chunk, r)), closed]);
      if (err) return;
      entry.bytes += chunk.length;
      if (bytesPerSecond) await sleep((chunk.length / bytesPerSecond) * 1000);
    }
    if (res.destroyed) return;
    if (dropAfter === undefined) return void res.end();
    // With nothing written yet the head may still sit in the stream; an empty write's callback says it has gone out.
    res.flushHeaders();
    await new Promise<unknown>((r) => res.socket?.write(Buffer.alloc(0), r) ?? r(null));
    res.socket?.destroy();
  }

  function json(x: Exchange, status: number, value: unknown, headers = {}) {
    const body = Buffer.from(JSON.stringify(value));
    head(x, status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': body.length, ...headers });
    return send(x, body);
  }

  function hubError(x: Exchange, status: number, code: string, message: string, extra: Record<string, string> = {}) {
    return json(x, status, { error: message }, { 'X-Error-Code': code, 'X-Error-Message': message, ...extra });
  }

  /** 200, 206 or 416 for `bytes`, with the faults that act on bodies. */
  function serveBytes(x: Exchange, bytes: Uint8Array, headers: Record<string, string>) {
    const { req, entry } = x;
    const size = bytes.length;
    const range = parseRange(req.headers.range, size);
    if (range === 'bad') return json(x, 416, { error: 'Range Not Satisfiable' }, { 'Content-Range': `bytes */${size}` });
    const [a, b] = range ?? [0, size - 1];
    const body = bytes.subarray(a, b + 1);
    head(x, range ? 206 : 200, {
      ...headers, 'Content-Type': 'application/octet-stream', 'Content-Length': body.length, 'Accept-Ranges': 'bytes',
      ...(range ? { 'Content-Range': `bytes ${a}-${b}/${size}` } : {}),
    });
    const isBody = req.method === 'GET';
    const drop = takeFault('drop', entry, isBody, body.length);
    const slow = takeFault('slow', entry, isBody);
    return send(x, body, drop?.afterBytes, slow?.bytesPerSecond);
  }

  /** The common front of both servers: log, CORS preflight, methods, status faults. True when the request is answered. */
  async function front(x: Exchange): Promise<boolean> {
    const { req, res, entry } = x;
    if (req.method === 'OPTIONS') {
      // Preflights are never faulted: a browser reports a failed preflight as a bare network error, not the status.
      head(x, 204, { 'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS',
        'Access-Control-Allow-Headers': 'Authorization, Range, Content-Type', 'Access-Control-Max-Age': '600' });
      res.end();
      return true;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      await json(x, 405, { error: 'Method Not Allowed' }, { Allow: 'GET, HEAD, OPTIONS' });
      return true;
    }
    const f = takeFault('status', entry, false);
    if (!f) return false;
    await json(x, f.status, { error: `stand-in hub: injected status ${f.status}` },
      f.retryAfter === undefined ? {} : { 'Retry-After': String(f.retryAfter) });
    return true;
  }

  async function onHub(x: Exchange): Promise<void> {
    const { req, res, entry } = x;
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    let route: Route | null;
    try {
      route = parseRoute(url);
    } catch {
      return void (await json(x, 400, { error: 'Bad Request' }));
    }
    entry.repo = route?.id ?? null;
    entry.file = route?.kind === 'resolve' ? route.file : null;
    if (await front(x)) return;
    if (!route) return json(x, 404, { error: 'Not Found' });
    const repo = repos.get(`${route.type}:${route.id}`);
    if (!repo) return hubError(x, 401, 'RepoNotFound', 'Repository not found');
    const auth = req.headers.authorization;
    if (repo.gated && auth !== `Bearer ${token}`) {
      const message = `Access to ${repo.type} ${repo.id} is restricted. You must have access to it and be authenticated to access it.`;
      return hubError(x, auth ? 403 : 401, 'GatedRepo', message);
    }
    if (route.rev !== 'main' && route.rev !== repo.sha) {
      return hubError(x, 404, 'RevisionNotFound', `Invalid rev id: ${route.rev}`);
    }
    const commit = { 'X-Repo-Commit': repo.sha };
    if (route.kind === 'info') {
      const siblings = [...repo.files.values()].map((f) => (route.blobs
        ? { rfilename: f.path, size: f.bytes.length, blobId: f.oid,
          ...(f.lfs ? { lfs: { sha256: f.sha256, size: f.bytes.length, pointerSize: f.pointerSize } } : {}) }
        : { rfilename: f.path }));
      return json(x, 200, { _id: repo.sha.slice(0, 24), id: repo.id, ...(repo.type === 'model' ? { modelId: repo.id } : {}),
        author: repo.id.split('/')[0], sha: repo.sha, private: false, gated: repo.gated ? 'manual' : false, disabled: false,
        tags: [], siblings }, commit);
    }
    if (route.kind === 'tree') {
      const entries = treeEntries(repo, route.dir, route.recursive);
      if (!entries) return hubError(x, 404, 'EntryNotFound', `${route.dir} does not exist on "${route.rev}"`, commit);
      return json(x, 200, entries, commit);
    }
    const file = repo.files.get(route.file);
    // The real hub names the commit on EntryNotFound too; huggingface_hub caches the miss under it.
    if (!file) return hubError(x, 404, 'EntryNotFound', `Entry not found: ${route.file}`, commit);
    if (!file.lfs) return serveBytes(x, file.bytes, { ETag: `"${file.oid}"`, ...commit });
    head(x, 302, { ...commit, Location: `${cdnUrl}${repo.cdnDir}/${file.sha256}`, 'X-Linked-Etag': `"${file.sha256}"`,
      'X-Linked-Size': String(file.bytes.length), ETag: `"${file.sha256}"`, 'Content-Length': 0 });
    res.end();
  }

  async function onCdn(x: Exchange): Promise<void> {
    const { req, entry } = x;
    const blob = blobs.get(new URL(req.url ?? '/', 'http://127.0.0.1').pathname);
    entry.repo = blob?.repo.id ?? null;
    entry.file = blob?.file.path ?? null;
    if (await front(x)) return;
    if (!blob) return json(x, 404, { error: 'NoSuchKey' });
    return serveBytes(x, blob.file.bytes, { ETag: `"${blob.file.sha256}"` });
  }

  function serve(server: 'hub' | 'cdn', handle: typeof onHub): Promise<Server> {
    const s = createServer((req, res) => {
      const entry: HubRequest = { server, method: req.method ?? '', path: req.url ?? '', status: 0, range: req.headers.range ?? null,
        authorization: req.headers.authorization ?? null, bytes: 0, repo: null, file: null };
      log.push(entry);
      const x = { req, res, entry };
      handle(x).catch((e: unknown) => {
        if (!res.headersSent) json(x, 500, { error: String(e) }).catch(() => res.destroy());
        else res.destroy();
      });
    });
    return new Promise((resolve, reject) => {
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => resolve(s));
    });
  }

  const hub = await serve('hub', onHub);
  const cdn = await serve('cdn', onCdn);
  const port = (s: Server) => (s.address() as AddressInfo).port;
  cdnUrl = `http://127.0.0.1:${port(cdn)}`;
  const find = (id: string) => {
    const repo = repos.get(id.startsWith('datasets/') ? `dataset:${id.slice(9)}` : `model:${id}`) ?? repos.get(`dataset:${id}`);
    if (!repo) throw new Error(`stand-in hub: no repo ${id}`);
    return repo;
  };
  return {
    url: `http://127.0.0.1:${port(hub)}`,
    cdnUrl,
    token,
    log,
    fault: (f) => void faults.push({ fault: f, left: f.times ?? 1 }),
    bytesServed: (file, from = 0) => log.slice(from)
      .filter((e) => (e.status === 200 || e.status === 206) && e.file?.endsWith(file))
      .reduce((n, e) => n + e.bytes, 0),
    commit: (id) => find(id).sha,
    cdnLocation: (id, file) => {
      const repo = find(id);
      const f = repo.files.get(file);
      if (!f?.lfs) throw new Error(`stand-in hub: ${id} has no LFS file ${file}`);
      return `${cdnUrl}${repo.cdnDir}/${f.sha256}`;
    },
    close: async () => {
      await Promise.all([hub, cdn].map((s) => new Promise<void>((r) => {
        s.close(() => r());
        s.closeAllConnections();
      })));
    },
  };
}
