/** `rmas download`: a released style's repos or whole repos into the Hugging Face cache, through the runner's hub (hub.ts). */
import { InvalidArgument, UsageError } from '../errors';
import { getStyle, STYLES } from '../mas/styles';
import { type RepoType, checkRepoId } from '../store/hub';
import { defaultCacheDir, downloadRepo } from '../store/hub-cache';
import type { Values } from './args';
import { formatBytes, progressPrinter, runnerHub, styleRepos } from './hub';

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
