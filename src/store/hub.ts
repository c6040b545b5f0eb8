/**
 * The Hugging Face hub client that the runner and the page share: where the hub is (HF_ENDPOINT, the page's `?hub=`),
 * the token (sent to the hub's own origin only, never to the CDN its large files redirect to), retries with backoff on
 * 429/5xx and dropped connections (honouring Retry-After), the hub's error codes as named errors, offline mode, and
 * the two metadata calls a download needs (a file's size, hash and commit; a repository's file list). No node:fs here:
 * the runner's cache writer (hub-cache.ts) and the page's chunk store (models.ts) both download through `hubFetch`.
 *
 * Why not @huggingface/hub: its cache download (downloadFileToCacheDir) writes the same layout, but it restarts an
 * interrupted file from byte 0, retries nothing, writes no refs/, has no offline mode and reports no progress; the
 * page would use none of it (its files live in IndexedDB). Protocol facts come from huggingface_hub's file_download.py.
 */
import { Cancelled, DownloadFailed, GatedRepo, HubOffline, InvalidArgument, RepoNotFound } from '../errors';

export const DEFAULT_ENDPOINT = 'https://huggingface.co';

export type RepoType = 'model' | 'dataset';

export interface HubSettings {
  /** The hub's address without a trailing slash (default DEFAULT_ENDPOINT). */
  endpoint: string;
  /** An access token (hf_…), sent as `Authorization: Bearer` to the endpoint's origin only. */
  token?: string;
  /** Nothing is requested; a file not in the cache is HubOffline. */
  offline?: boolean;
}

const TRUTHY = new Set(['1', 'on', 'yes', 'true']);

/** The endpoint as `scheme://host[:port][/path]` without a trailing slash; anything but http(s) is InvalidArgument. */
export function normalizeEndpoint(raw: string, what = 'the hub address'): string {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new InvalidArgument(`${what} '${raw}' is not a URL; give one like ${DEFAULT_ENDPOINT}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new InvalidArgument(`${what} '${raw}' must be an http(s) URL, like ${DEFAULT_ENDPOINT}`);
  if (u.username || u.password || u.search || u.hash)
    throw new InvalidArgument(`${what} '${raw}' must not carry credentials, a query or a fragment; give the token separately`);
  return u.href.replace(/\/+$/, '');
}

/** The runner's settings from the environment: HF_ENDPOINT, HF_TOKEN (or the older HUGGING_FACE_HUB_TOKEN), HF_HUB_OFFLINE. */
export function hubSettingsFromEnv(env: Record<string, string | undefined>): HubSettings {
  const token = (env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || '').trim();
  return {
    endpoint: normalizeEndpoint(env.HF_ENDPOINT || DEFAULT_ENDPOINT, 'HF_ENDPOINT'),
    ...(token ? { token } : {}),
    ...(TRUTHY.has((env.HF_HUB_OFFLINE ?? '').trim().toLowerCase()) ? { offline: true } : {}),
  };
}

/** Refuses anything but `Org/Name` (letters, digits, `.`, `_`, `-`), so that a repo id never walks out of a URL or a folder. */
export function checkRepoId(repo: string): string {
  if (!/^[\w.-]+\/[\w.-]+$/.test(repo) || repo.split('/').some((p) => p === '.' || p === '..'))
    throw new InvalidArgument(`'${repo}' is not a Hugging Face repo id of the form Org/Name`);
  return repo;
}

const prefix = (type: RepoType) => (type === 'dataset' ? 'datasets/' : '');
/** A repo-relative path with each segment escaped, so names like `adapter(math).pt` or spaces survive. */
const escapePath = (file: string) => file.split('/').map(encodeURIComponent).join('/');

/** The download URL of `file` in `repo` at `revision`: `{endpoint}/[datasets/]{repo}/resolve/{revision}/{file}`. */
export function resolveUrl(s: Pick<HubSettings, 'endpoint'>, repo: string, file: string, revision = 'main', type: RepoType = 'model') {
  return `${s.endpoint}/${prefix(type)}${checkRepoId(repo)}/resolve/${encodeURIComponent(revision)}/${escapePath(file)}`;
}

/** The folder URL (ending in '/') of `repo`'s files at `revision`, for loaders that take a folder. */
export const repoFolderUrl = (s: Pick<HubSettings, 'endpoint'>, repo: string, revision = 'main', type: RepoType = 'model') =>
  `${s.endpoint}/${prefix(type)}${checkRepoId(repo)}/resolve/${encodeURIComponent(revision)}/`;

/**
 * The repo id and type a resolve URL (`[datasets/]Org/Name/resolve/…`) or an API URL (`api/models|datasets/Org/Name…`) of
 * this endpoint names, or null (another server, another kind of URL).
 */
export function repoOfUrl(s: Pick<HubSettings, 'endpoint'>, url: string): { repo: string; type: RepoType } | null {
  if (!url.startsWith(`${s.endpoint}/`)) return null;
  const path = url.slice(s.endpoint.length + 1);
  const m = /^(datasets\/)?([\w.-]+\/[\w.-]+)\/resolve\//.exec(path);
  if (m) return { repo: m[2]!, type: m[1] ? 'dataset' : 'model' };
  const api = /^api\/(models|datasets)\/([\w.-]+\/[\w.-]+)/.exec(path);
  return api ? { repo: api[2]!, type: api[1] === 'datasets' ? 'dataset' : 'model' } : null;
}

export interface HubFetchOptions {
  fetch?: typeof fetch;
  /** Attempts after the first, on 408, 429, 5xx and network errors (default 5). */
  retries?: number;
  /**
   * Of those, at most this many on network errors (default 2, within `retries`): a hub that cannot be reached at all (no
   * network, a name that does not resolve, a page's CORS refusal) is said within seconds, not after half a minute.
   */
  networkRetries?: number;
  /** First backoff in ms, doubled each attempt, at most 30 s (default 1000); Retry-After wins when the server sends it. */
  backoffMs?: number;
  /** Told before each wait: the reason and the milliseconds. */
  onRetry?: (why: string, waitMs: number) => void;
  /**
   * 'manual' (Node): redirects are followed here, so the token is dropped on the way to another origin by our own rule;
   * 'follow' (the page, where a manual redirect is opaque): the browser follows them and, as the Fetch standard says,
   * drops Authorization on a cross-origin hop. Default: 'manual' where `process.versions.node` exists, else 'follow'.
   */
  redirect?: 'manual' | 'follow';
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

const inNode = () => typeof process !== 'undefined' && !!process.versions?.node;

const abortable = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(new Cancelled('the download was cancelled'));
    const t = setTimeout(() => { signal?.removeEventListener('abort', stop); resolve(); }, ms);
    const stop = () => { clearTimeout(t); reject(new Cancelled('the download was cancelled')); };
    signal?.addEventListener('abort', stop, { once: true });
  });

/** Retry-After as milliseconds (seconds or an HTTP date), capped at 5 minutes; null when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | null {
  if (!value) return null;
  const v = value.trim();
  const ms = /^\d+(\.\d+)?$/.test(v) ? Number(v) * 1000 : Date.parse(v) - now;
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), 300_000) : null;
}

const RETRIED = new Set([408, 429, 500, 502, 503, 504]);
const urlOf = (input: RequestInfo | URL) => (typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);

/**
 * The hub's refusal as a named error (null for a response that is not one): X-Error-Code GatedRepo → GatedRepo,
 * RepoNotFound / RevisionNotFound → RepoNotFound, and a 401/403 without a code → GatedRepo when a token was sent
 * (it lacks access) or RepoNotFound when none was (the hub hides private repos behind 401).
 */
export function hubError(s: HubSettings, url: string, res: Response): Error | null {
  const code = res.headers.get('x-error-code');
  const where = repoOfUrl(s, url);
  const repo = where?.repo ?? url;
  const page = `${s.endpoint}/${where?.type === 'dataset' ? 'datasets/' : ''}${repo}`;
  const tokenHint = 'HF_TOKEN for the runner, the token field under Environment in the page';
  if (code === 'GatedRepo' || ((res.status === 401 || res.status === 403) && !code && s.token)) {
    return new GatedRepo(
      `${repo} is gated or private (HTTP ${res.status}): accept its terms on ${page} with your account, then give an access token ` +
        `that can read it (${tokenHint})${s.token ? '; the token given was refused for it' : ''}`,
    );
  }
  if (code === 'RepoNotFound' || code === 'RevisionNotFound' || ((res.status === 401 || res.status === 403) && !code)) {
    const rev = code === 'RevisionNotFound' ? ' at the revision asked for' : '';
    return new RepoNotFound(
      `${repo} does not exist on ${s.endpoint}${rev} (HTTP ${res.status}${code ? ` ${code}` : ''}): check the repo id and HF_ENDPOINT; ` +
        `a private repo needs an access token (${tokenHint})`,
    );
  }
  return null;
}

/**
 * `fetch` for the hub: the token to the endpoint's origin only, redirects (see HubFetchOptions.redirect), retries on
 * 429/5xx/network errors with backoff, and the hub's refusals thrown as named errors (an EntryNotFound 404 is returned
 * as is: callers probe optional files). Offline settings refuse every request with HubOffline.
 */
export function hubFetch(s: HubSettings, opts: HubFetchOptions = {}): typeof fetch {
  const inner = opts.fetch ?? globalThis.fetch.bind(globalThis);
  const retries = opts.retries ?? 5;
  const networkRetries = Math.min(opts.networkRetries ?? 2, retries);
  const base = opts.backoffMs ?? 1000;
  const sleep = opts.sleep ?? abortable;
  const mode = opts.redirect ?? (inNode() ? 'manual' : 'follow');
  const hubOrigin = new URL(s.endpoint).origin;
  const headersFor = (url: string, init?: RequestInit) => {
    const h = new Headers(init?.headers);
    if (s.token && new URL(url).origin === hubOrigin) h.set('authorization', `Bearer ${s.token}`);
    else h.delete('authorization');
    return h;
  };
  const once = async (url: string, init: RequestInit | undefined): Promise<{ res: Response; url: string }> => {
    let at = url;
    for (let hop = 0; hop <= 10; hop++) {
      const res = await inner(at, { ...init, headers: headersFor(at, init), redirect: mode });
      const loc = res.headers.get('location');
      if (mode !== 'manual' || res.status < 300 || res.status >= 400 || !loc) return { res, url: at };
      void res.body?.cancel();
      at = new URL(loc, at).href;
    }
    throw new DownloadFailed(`${url}: more than 10 redirects; check HF_ENDPOINT`);
  };
  return async (input, init) => {
    const url = urlOf(input);
    if (s.offline)
      throw new HubOffline(`offline mode is on (HF_HUB_OFFLINE, or the page's cache-only mode): ${url} was not requested`);
    const signal = init?.signal ?? undefined;
    let networkFails = 0;
    for (let attempt = 0; ; attempt++) {
      let why: string;
      let wait: number | null = null;
      try {
        const { res, url: final } = await once(url, init);
        const named = res.status === 401 || res.status === 403 || res.status === 404 ? hubError(s, url, res) : null;
        if (named) {
          void res.body?.cancel();
          throw named;
        }
        if (!RETRIED.has(res.status) || attempt >= retries) return res;
        void res.body?.cancel();
        why = `HTTP ${res.status} from ${new URL(final).host}`;
        wait = retryAfterMs(res.headers.get('retry-after'));
      } catch (e) {
        if (e instanceof GatedRepo || e instanceof RepoNotFound || e instanceof DownloadFailed || e instanceof HubOffline) throw e;
        if (signal?.aborted) throw Object.assign(new Cancelled(`the request for ${url} was cancelled or timed out`), { cause: e });
        if (networkFails++ >= networkRetries) {
          const lost = new DownloadFailed(
            `${url}: network error (${(e as Error).message}) after ${attempt + 1} attempt(s); check the connection and run again`,
          );
          throw Object.assign(lost, { cause: e });
        }
        why = `network error (${(e as Error).message})`;
      }
      const ms = wait ?? Math.min(base * 2 ** attempt, 30_000);
      opts.onRetry?.(`${why}; retry ${attempt + 1} of ${retries}`, ms);
      await sleep(ms, signal);
    }
  };
}

export interface RepoFile {
  path: string;
  size: number;
  /** The cache's blob name: the LFS sha256, else the git blob sha1. */
  etag: string;
  lfs: boolean;
}

/** `repo`'s commit at `revision` and every file in it, from the hub's API (revision, then the recursive tree). */
export async function listRepo(
  s: HubSettings,
  repo: string,
  opts: HubFetchOptions & { revision?: string; type?: RepoType; signal?: AbortSignal } = {},
): Promise<{ commit: string; files: RepoFile[] }> {
  const type = opts.type ?? 'model';
  const api = `${s.endpoint}/api/${type}s/${checkRepoId(repo)}`;
  const f = hubFetch(s, opts);
  const get = async (url: string): Promise<unknown> => {
    const res = await f(url, { ...(opts.signal ? { signal: opts.signal } : {}), headers: { accept: 'application/json' } });
    if (!res.ok) {
      void res.body?.cancel();
      if (res.status === 404) throw new RepoNotFound(`${url}: HTTP 404; check the repo id, the revision and HF_ENDPOINT`);
      throw new DownloadFailed(`${url}: HTTP ${res.status} ${res.statusText}; run again later`);
    }
    try {
      return await res.json();
    } catch (e) {
      throw new DownloadFailed(`${url} did not answer JSON (${(e as Error).message}); HF_ENDPOINT must be a Hugging Face hub`);
    }
  };
  const rev = encodeURIComponent(opts.revision ?? 'main');
  const info = (await get(`${api}/revision/${rev}`)) as { sha?: unknown };
  if (typeof info?.sha !== 'string' || !/^[0-9a-f]{40}$/.test(info.sha))
    throw new DownloadFailed(`${api}/revision/${rev} names no commit; HF_ENDPOINT must be a Hugging Face hub`);
  // at the commit, so that the listing and the files downloaded next agree even if main moves meanwhile
  const tree = await get(`${api}/tree/${info.sha}?recursive=true`);
  if (!Array.isArray(tree)) throw new DownloadFailed(`${api}/tree/${info.sha} is not a file list; HF_ENDPOINT must be a Hugging Face hub`);
  const files: RepoFile[] = [];
  for (const e of tree as Record<string, unknown>[]) {
    if (e?.type !== 'file') continue;
    const lfs = e.lfs as { oid?: unknown } | undefined;
    const path = String(e.path);
    if (!path || path.startsWith('/') || path.split('/').some((p) => p === '..' || p === '.' || p === ''))
      throw new DownloadFailed(`${api}/tree lists the file '${path}', which would leave the repository's folder; refusing it`);
    const size = Number(e.size);
    const etag = String(lfs?.oid ?? e.oid ?? '');
    if (!Number.isSafeInteger(size) || size < 0 || !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(etag))
      throw new DownloadFailed(`${api}/tree: file '${path}' has no usable size or object id; HF_ENDPOINT must be a Hugging Face hub`);
    files.push({ path, size, etag, lfs: lfs !== undefined });
  }
  return { commit: info.sha, files };
}

/**
 * Whether `path` matches a glob as huggingface_hub's allow_patterns do (Python's fnmatch: `*` also crosses '/',
 * `?` one character, `[…]` a set).
 */
export function matchesPattern(path: string, pattern: string): boolean {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '[') {
      const j = pattern.indexOf(']', i + 2);
      if (j < 0) re += '\\[';
      else {
        const body = pattern.slice(i + 1, j);
        re += `[${body.startsWith('!') ? `^${body.slice(1)}` : body}]`.replace(/\\/g, '\\\\');
        i = j;
      }
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`, 's').test(path);
}
