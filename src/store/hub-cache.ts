/**
 * The Hugging Face cache on disk (Node), in the layout Python's huggingface_hub reads and writes, so that one cache
 * serves this runner and upstream's PyTorch code alike:
 *
 *   $HF_HUB_CACHE (else $HF_HOME/hub, else ~/.cache/huggingface/hub)
 *     models--Org--Name/                 (datasets--Org--Name for a dataset)
 *       blobs/<etag>                     one file's bytes, named by its LFS sha256 or git blob sha1
 *       blobs/<etag>.incomplete          a download in progress: the next run continues it with a Range request
 *       snapshots/<commit>/<path>        a relative symlink to ../../blobs/<etag>
 *       refs/main                        the commit that main pointed at when last downloaded
 *
 * A blob is checked against the hub's size and hash before it is renamed into place. Two processes fetching one blob
 * take turns through a lock file beside huggingface_hub's own (.locks/<repo folder>/<etag>.rmas-lock, holding the pid;
 * a lock whose process is gone is taken over).
 */
import { DownloadFailed, HubOffline } from '../errors';
import { nodeImport } from '../util/node-import';
import {
  type HubFetchOptions, type HubSettings, type RepoFile, type RepoType, checkRepoId, hubFetch, listRepo, matchesPattern, resolveUrl,
} from './hub';

const fsp = () => nodeImport('node:fs/promises');
const join = (...parts: string[]) => parts.join('/').replace(/\/+/g, '/');

/** The hub cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. */
export function hfHubCacheDir(env: Record<string, string | undefined>, home: string): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  if (env.HF_HOME) return join(env.HF_HOME, 'hub');
  return join(home, '.cache/huggingface/hub');
}

/** The cache folder of the process's environment. */
export async function defaultCacheDir(): Promise<string> {
  return hfHubCacheDir(process.env, (await nodeImport('node:os')).homedir());
}

/** `models--Org--Name` (or `datasets--…`): a repo's folder under the cache. */
export const repoFolderName = (repo: string, type: RepoType = 'model') => `${type}s--${checkRepoId(repo).replace('/', '--')}`;

export interface CacheOptions {
  /** The cache folder (default: defaultCacheDir()). */
  cacheDir?: string;
  /** A branch, tag or commit (default 'main'). */
  revision?: string;
  type?: RepoType;
}

/** Where `repo` lies in the cache: snapshots/<the revision's commit, or the only snapshot>; null if absent. */
export async function cachedSnapshot(repo: string, opts: CacheOptions = {}): Promise<string | null> {
  const fs = await fsp();
  const root = join(opts.cacheDir ?? (await defaultCacheDir()), repoFolderName(repo, opts.type));
  const revision = opts.revision ?? 'main';
  const isDir = async (p: string) => (await fs.stat(p).catch(() => null))?.isDirectory() ?? false;
  const commit = /^[0-9a-f]{40}$/.test(revision)
    ? revision
    : (await fs.readFile(join(root, 'refs', revision), 'utf8').catch(() => '')).trim();
  if (commit && /^[\w.-]+$/.test(commit) && (await isDir(join(root, 'snapshots', commit)))) return join(root, 'snapshots', commit);
  if (revision !== 'main') return null;
  const snaps = await fs.readdir(join(root, 'snapshots')).catch(() => [] as string[]);
  return snaps.length === 1 && (await isDir(join(root, 'snapshots', snaps[0]!))) ? join(root, 'snapshots', snaps[0]!) : null;
}

/** What a download tells as it goes, one file at a time. */
export type DownloadEvent =
  | { type: 'file'; repo: string; file: string; total: number; from: number }
  | { type: 'progress'; repo: string; file: string; loaded: number; total: number }
  | { type: 'done'; repo: string; file: string; total: number; fetched: number; seconds: number }
  | { type: 'retry'; repo: string; file: string; why: string; waitMs: number }
  | { type: 'wait'; repo: string; file: string; pid: number }
  /** The hub did not answer; the snapshot already in the cache is used as it is. */
  | { type: 'cached'; repo: string; why: string; dir: string };

export interface DownloadOptions extends CacheOptions, Omit<HubFetchOptions, 'onRetry' | 'redirect'> {
  /** Globs (fnmatch, as huggingface_hub's allow_patterns) of the files to fetch; default all. */
  include?: readonly string[];
  exclude?: readonly string[];
  onEvent?: (e: DownloadEvent) => void;
  signal?: AbortSignal;
}

export interface RepoDownload {
  /** The snapshot folder (snapshots/<commit>). */
  dir: string;
  commit: string;
  /** The repo-relative paths the snapshot holds for the patterns asked. */
  files: string[];
  /** Body bytes received in this call (0 when everything was cached). */
  fetched: number;
}

/**
 * `repo`'s files matching the patterns in the cache at `revision`, fetching what is missing (or, offline, the snapshot
 * already there; none is HubOffline). Files already in the cache are not requested again: a second call asks the API
 * for the file list and nothing else.
 */
export async function downloadRepo(s: HubSettings, repo: string, opts: DownloadOptions = {}): Promise<RepoDownload> {
  const type = opts.type ?? 'model';
  const revision = opts.revision ?? 'main';
  const cacheDir = opts.cacheDir ?? (await defaultCacheDir());
  if (s.offline) {
    const dir = await cachedSnapshot(repo, { cacheDir, revision, type });
    if (!dir)
      throw new HubOffline(
        `${repo} is not in the Hugging Face cache at ${cacheDir} and HF_HUB_OFFLINE is set, so nothing is downloaded; ` +
          `unset HF_HUB_OFFLINE, or fetch it first while online (rmas download ${repo}${type === 'dataset' ? ' --repo_type dataset' : ''})`,
      );
    return { dir, commit: dir.replace(/^.*\//, ''), files: await listSnapshot(dir), fetched: 0 };
  }
  const cached = await cachedSnapshot(repo, { cacheDir, revision, type });
  let listing: Awaited<ReturnType<typeof listRepo>>;
  try {
    // with a snapshot to fall back on, one retry: a hub out of reach should not hold up a run the cache can serve
    listing = await listRepo(s, repo, { ...opts, revision, type, ...(cached ? { retries: Math.min(opts.retries ?? 1, 1) } : {}) });
  } catch (e) {
    // as huggingface_hub does: no answer at all (not a refusal) and a snapshot in the cache → that snapshot
    if (!cached || !(e instanceof DownloadFailed) || !(e as { cause?: unknown }).cause) throw e;
    opts.onEvent?.({ type: 'cached', repo, why: (e as Error).message, dir: cached });
    return { dir: cached, commit: cached.replace(/^.*\//, ''), files: await listSnapshot(cached), fetched: 0 };
  }
  const any = (patterns: readonly string[] | undefined, path: string) => !!patterns?.some((p) => matchesPattern(path, p));
  const wanted = listing.files.filter((f) => (!opts.include?.length || any(opts.include, f.path)) && !any(opts.exclude, f.path));
  const root = join(cacheDir, repoFolderName(repo, type));
  const dir = join(root, 'snapshots', listing.commit);
  let fetched = 0;
  for (const f of wanted) fetched += await cacheFile(s, repo, f, root, dir, listing.commit, { ...opts, type, cacheDir });
  if (revision !== listing.commit) await writeAtomic(join(root, 'refs', revision), listing.commit);
  return { dir, commit: listing.commit, files: wanted.map((f) => f.path), fetched };
}

/** Every file path under a snapshot folder (following its symlinks), '/'-separated. */
async function listSnapshot(dir: string): Promise<string[]> {
  const fs = await fsp();
  const out: string[] = [];
  const walk = async (rel: string) => {
    for (const e of await fs.readdir(join(dir, rel), { withFileTypes: true })) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      const st = await fs.stat(join(dir, p)).catch(() => null);
      if (st?.isDirectory()) await walk(p);
      else if (st?.isFile()) out.push(p);
    }
  };
  await walk('');
  return out.sort();
}

async function writeAtomic(path: string, text: string): Promise<void> {
  const fs = await fsp();
  await fs.mkdir(path.replace(/\/[^/]*$/, ''), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  await fs.writeFile(tmp, text);
  await fs.rename(tmp, path);
}

const sizeOf = async (p: string): Promise<number | null> => (await (await fsp()).stat(p).catch(() => null))?.size ?? null;

/** One file into blobs/ and its snapshot link; returns the body bytes fetched. */
async function cacheFile(
  s: HubSettings, repo: string, f: RepoFile, root: string, snapshot: string, commit: string,
  opts: DownloadOptions & { type: RepoType; cacheDir: string },
): Promise<number> {
  const fs = await fsp();
  const pointer = join(snapshot, f.path);
  const blob = join(root, 'blobs', f.etag);
  if ((await sizeOf(pointer)) === f.size && (await sizeOf(blob)) === f.size) return 0;
  await fs.mkdir(join(root, 'blobs'), { recursive: true });
  let fetched = 0;
  if ((await sizeOf(blob)) !== f.size) {
    const lock = join(opts.cacheDir, '.locks', repoFolderName(repo, opts.type), `${f.etag}.rmas-lock`);
    const release = await takeLock(lock, (pid) => opts.onEvent?.({ type: 'wait', repo, file: f.path, pid }), opts.signal);
    try {
      // another process may have finished it while this one waited
      if ((await sizeOf(blob)) !== f.size) fetched = await fetchBlob(s, repo, f, blob, commit, opts);
    } finally {
      await release();
    }
  }
  await fs.mkdir(pointer.replace(/\/[^/]*$/, ''), { recursive: true });
  const depth = f.path.split('/').length + 1; // snapshots/<commit>/<path…>
  const tmp = `${pointer}.tmp-${process.pid}`;
  await fs.rm(tmp, { force: true });
  await fs.symlink(`${'../'.repeat(depth)}blobs/${f.etag}`, tmp);
  await fs.rename(tmp, pointer);
  return fetched;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Creates `path` exclusively (holding this pid), waiting while a live process holds it; returns the release. */
async function takeLock(path: string, onWait: (pid: number) => void, signal?: AbortSignal): Promise<() => Promise<void>> {
  const fs = await fsp();
  await fs.mkdir(path.replace(/\/[^/]*$/, ''), { recursive: true });
  let told = false;
  for (;;) {
    try {
      await fs.writeFile(path, String(process.pid), { flag: 'wx' });
      return () => fs.rm(path, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const pid = Number((await fs.readFile(path, 'utf8').catch(() => '')).trim());
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || !alive(pid)) {
      await fs.rm(path, { force: true }); // left by a process that died (or half-written): take it over
      continue;
    }
    if (!told) onWait(pid);
    told = true;
    if (signal?.aborted) throw new DownloadFailed(`gave up waiting for process ${pid}, which is downloading the same file (${path})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Downloads (or continues) `f` into `blob`.incomplete, checks size and hash, renames it into place; returns bytes fetched. */
async function fetchBlob(
  s: HubSettings, repo: string, f: RepoFile, blob: string, commit: string, opts: DownloadOptions & { type: RepoType },
): Promise<number> {
  const fs = await fsp();
  const part = `${blob}.incomplete`;
  const url = resolveUrl(s, repo, f.path, commit, opts.type);
  const get = hubFetch(s, {
    ...opts,
    onRetry: (why, waitMs) => opts.onEvent?.({ type: 'retry', repo, file: f.path, why, waitMs }),
  });
  const t0 = performance.now();
  let fetched = 0;
  let have = (await sizeOf(part)) ?? 0;
  if (have > f.size) {
    await fs.rm(part, { force: true });
    have = 0;
  }
  opts.onEvent?.({ type: 'file', repo, file: f.path, total: f.size, from: have });
  let stalls = 0;
  while (have < f.size) {
    const res = await get(url, { headers: have > 0 ? { range: `bytes=${have}-` } : {}, ...(opts.signal ? { signal: opts.signal } : {}) });
    if (res.status === 416) {
      void res.body?.cancel();
      await fs.rm(part, { force: true }); // the kept part does not fit the file any more: start over
      have = 0;
      if (++stalls > 3) throw new DownloadFailed(`${url}: the server refused every range asked; run again later`);
      continue;
    }
    if (res.status !== 200 && res.status !== 206) {
      void res.body?.cancel();
      if (res.status === 404)
        throw new DownloadFailed(`${url}: HTTP 404, though the repository's file list names it; run again (the repo may have changed)`);
      throw new DownloadFailed(`${url}: HTTP ${res.status} ${res.statusText}; ${have} bytes are kept in the cache: run again to resume`);
    }
    const start = res.status === 206 ? Number(/^bytes (\d+)-/.exec(res.headers.get('content-range') ?? '')?.[1] ?? NaN) : 0;
    if (start !== have && start !== 0) {
      void res.body?.cancel();
      throw new DownloadFailed(`${url}: the server resumed at byte ${start}, not ${have}; run again to resume`);
    }
    have = start;
    const before = have;
    const out = await fs.open(part, have === 0 ? 'w' : 'a');
    try {
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        await out.write(value);
        have += value.byteLength;
        fetched += value.byteLength;
        opts.onEvent?.({ type: 'progress', repo, file: f.path, loaded: have, total: f.size });
      }
    } catch (e) {
      if (opts.signal?.aborted)
        throw new DownloadFailed(`the download of ${f.path} was cancelled; ${have} bytes are kept: run again to resume`);
      // a dropped connection: continue from what arrived, unless nothing arrives again and again
      stalls = have > before ? 0 : stalls + 1;
      if (stalls > (opts.retries ?? 5))
        throw new DownloadFailed(`${url}: ${(e as Error).message}; ${have} bytes are kept in the cache: run again to resume`);
      opts.onEvent?.({ type: 'retry', repo, file: f.path, why: `connection lost at byte ${have} (${(e as Error).message})`, waitMs: 0 });
      continue;
    } finally {
      await out.close();
    }
    if (have < f.size && have === before && ++stalls > (opts.retries ?? 5))
      throw new DownloadFailed(`${url}: the body ended at byte ${have} of ${f.size}; ${have} bytes are kept: run again to resume`);
  }
  if (have !== f.size) {
    await fs.rm(part, { force: true });
    throw new DownloadFailed(`${url}: received ${have} bytes but the hub lists ${f.size}; run again to download it anew`);
  }
  const got = await fileHash(part, f.etag.length === 64 ? 'sha256' : 'git-sha1', f.size);
  if (got !== f.etag) {
    await fs.rm(part, { force: true });
    throw new DownloadFailed(`${url}: the bytes hash to ${got}, not the hub's ${f.etag}; the damaged file was removed: run again`);
  }
  await fs.rename(part, blob);
  opts.onEvent?.({ type: 'done', repo, file: f.path, total: f.size, fetched, seconds: (performance.now() - t0) / 1000 });
  return fetched;
}

/** sha256 of a file, or its git blob sha1 (sha1 of `blob <size>\0` and the bytes), read in a stream. */
async function fileHash(path: string, kind: 'sha256' | 'git-sha1', size: number): Promise<string> {
  const { createHash } = await nodeImport('node:crypto');
  const h = createHash(kind === 'sha256' ? 'sha256' : 'sha1');
  if (kind === 'git-sha1') h.update(`blob ${size}\0`);
  const fh = await (await fsp()).open(path, 'r');
  try {
    const buf = new Uint8Array(4 * 2 ** 20);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      h.update(buf.subarray(0, bytesRead));
    }
  } finally {
    await fh.close();
  }
  return h.digest('hex');
}
