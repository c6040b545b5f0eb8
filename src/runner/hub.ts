/**
 * The runner's side of the hub client (store/hub.ts, store/hub-cache.ts): settings from the environment (HF_ENDPOINT,
 * HF_TOKEN, HF_HUB_OFFLINE, HF_HUB_CACHE / HF_HOME), the progress lines on stderr, the folders of a released
 * style's repos (fetched into the Hugging Face cache when missing), and `rmas download`.
 */
import { getStyle, STYLES, type StyleSpec } from '../mas/styles';
import { type DownloadEvent, defaultCacheDir, downloadRepo } from '../store/hub-cache';
import { type HubSettings, type RepoType, checkRepoId, hubSettingsFromEnv } from '../store/hub';
import { InvalidArgument, UsageError } from '../errors';
import type { Values } from './args';

/** What the loader reads of a role repo (model, tokenizer, chat template, manifests, inner links); a README or `original/` is left. */
export const ROLE_FILES = ['*.json', '*.safetensors', '*.jinja', 'adapter*.pt'] as const;
/** What the loader reads of an outer-links repo. */
export const OUTER_FILES = ['*.json', '*.pt', '*.safetensors'] as const;

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
export function formatBytes(n: number): string {
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

const secs = (s: number) => (s < 90 ? `${Math.max(0, s).toFixed(0)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`);

/**
 * Progress of downloads as stderr lines: on a terminal one line per file redrawn in place (bytes, speed, ETA); elsewhere
 * a line when a file is done (and when a transfer resumes or retries), so that logs stay short.
 */
export function progressPrinter(err: (s: string) => void, tty: boolean, now = () => performance.now()): (e: DownloadEvent) => void {
  let start = 0;
  let from = 0;
  let last = 0;
  return (e) => {
    if (e.type === 'cached') return err(`${e.repo}: the hub did not answer (${e.why}); using the cached snapshot ${e.dir}\n`);
    const name = `${e.repo}/${e.file}`;
    if (e.type === 'file') {
      start = now();
      from = e.from;
      last = 0;
      if (e.from > 0) err(`${name}: resuming at ${formatBytes(e.from)} of ${formatBytes(e.total)}\n`);
    } else if (e.type === 'progress' && tty) {
      const t = now();
      if (t - last < 200 && e.loaded < e.total) return;
      last = t;
      const rate = (e.loaded - from) / Math.max((t - start) / 1000, 1e-3);
      err(`\r\x1b[2K${name}: ${formatBytes(e.loaded)} / ${formatBytes(e.total)}, ${formatBytes(rate)}/s, ETA ${secs((e.total - e.loaded) / Math.max(rate, 1))}`);
    } else if (e.type === 'done') {
      err(`${tty ? '\r\x1b[2K' : ''}${name}: ${formatBytes(e.total)} in ${e.seconds.toFixed(1)} s ` +
        `(${formatBytes(e.fetched / Math.max(e.seconds, 1e-3))}/s)\n`);
    } else if (e.type === 'retry') {
      err(`${tty ? '\r\x1b[2K' : ''}${name}: ${e.why}${e.waitMs ? `; waiting ${secs(e.waitMs / 1000)}` : ''}\n`);
    } else if (e.type === 'wait') {
      err(`${name}: waiting for process ${e.pid}, which is downloading it\n`);
    }
  };
}

export interface RunnerHub {
  settings: HubSettings;
  /** A released repo's snapshot folder in the cache, fetched when missing (loadSystem's repoFolder). */
  repoFolder(repo: string, what?: string, include?: readonly string[]): Promise<string>;
}

/** The hub as the environment sets it, printing progress through `err`. */
export function runnerHub(
  err: (s: string) => void, tty = !!process.stderr?.isTTY, env: Record<string, string | undefined> = process.env,
): RunnerHub {
  const settings = hubSettingsFromEnv(env);
  const onEvent = progressPrinter(err, tty);
  return {
    settings,
    async repoFolder(repo, _what, include) {
      const files = include ?? (Object.values(STYLES).some((s) => s.outerRepo === repo) ? OUTER_FILES : ROLE_FILES);
      return (await downloadRepo(settings, repo, { include: files, onEvent })).dir;
    },
  };
}

/** The repos a style loads (its roles', then its outer links'), with the files each needs. */
export function styleRepos(style: StyleSpec): { repo: string; include: readonly string[] }[] {
  return [...style.roles.map((r) => ({ repo: r.repo, include: ROLE_FILES })), { repo: style.outerRepo, include: OUTER_FILES }];
}

export const DOWNLOAD_OPTIONS = {
  repo: { type: 'string', multiple: true },
  include: { type: 'string', multiple: true },
  exclude: { type: 'string', multiple: true },
  revision: { type: 'string' },
  repo_type: { type: 'string' },
  cache_dir: { type: 'string' },
} as const;

export const DOWNLOAD_USAGE = `  rmas download STYLE|REPO… [--include PATTERN]… [--exclude PATTERN]… [--revision REV]
      [--repo_type model|dataset] [--cache_dir DIR]   fetch a released style's repos (the files its agents load) or whole
      repos into the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub), as huggingface-cli download does; HF_ENDPOINT,
      HF_TOKEN and HF_HUB_OFFLINE apply`;

/** `rmas download`: prints each snapshot folder on stdout, progress on stderr. */
export async function downloadCmd(a: Values<typeof DOWNLOAD_OPTIONS>, out: (s: string) => void, err: (s: string) => void, tty: boolean) {
  const names = a.repo ?? [];
  if (!names.length) throw new UsageError('download: name a style (e.g. sequential_light) or a repo id (Org/Name)');
  const type = (a.repo_type ?? 'model') as RepoType;
  if (type !== 'model' && type !== 'dataset') throw new UsageError(`--repo_type ${a.repo_type}: expected model or dataset`);
  const hub = runnerHub(err, tty);
  const cacheDir = a.cache_dir ?? (await defaultCacheDir());
  const jobs = names.flatMap((n) => {
    if (Object.hasOwn(STYLES, n)) {
      const style = getStyle(n);
      if (style.embedded) throw new UsageError(`download: ${n} ships in the package; there is nothing to download`);
      return styleRepos(style).map((j) => ({ ...j, include: a.include ?? j.include }));
    }
    return [{ repo: repoArg(n, 'download'), include: a.include ?? [] }];
  });
  let fetched = 0;
  for (const j of jobs) {
    const r = await downloadRepo(hub.settings, j.repo, {
      cacheDir, type, include: j.include, ...(a.exclude ? { exclude: a.exclude } : {}), ...(a.revision ? { revision: a.revision } : {}),
      onEvent: progressPrinter(err, tty),
    });
    fetched += r.fetched;
    err(`${j.repo}: ${r.files.length} file(s) at ${r.commit.slice(0, 12)}${r.fetched ? `, ${formatBytes(r.fetched)} fetched` : ', all cached'}\n`);
    out(`${r.dir}\n`);
  }
  if (jobs.length > 1) err(`${formatBytes(fetched)} fetched in all\n`);
}

/** A repo id, or InvalidArgument naming the flag (for the runner's positional repo arguments). */
function repoArg(v: string, flag: string): string {
  try {
    return checkRepoId(v);
  } catch {
    throw new InvalidArgument(`${flag} ${v}: expected a style name or a Hugging Face repo id of the form Org/Name`);
  }
}
