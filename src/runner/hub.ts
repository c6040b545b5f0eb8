/**
 * The runner's side of the hub client (store/hub.ts, store/hub-cache.ts): settings from the environment (HF_ENDPOINT,
 * HF_TOKEN, HF_HUB_OFFLINE, HF_HUB_CACHE / HF_HOME), the progress lines on stderr, the folders of a released
 * style's repos (fetched into the Hugging Face cache when missing); `rmas download` is download-cmd.ts.
 */
import { STYLES, type StyleSpec } from '../mas/styles';
import { type DownloadEvent, downloadRepo } from '../store/hub-cache';
import { type HubSettings, hubSettingsFromEnv } from '../store/hub';

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
