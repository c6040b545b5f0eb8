/**
 * Checkpoint bundles on the runner (Node): a `.zip` bundle given where a checkpoint folder is expected is
 * extracted once per process (per path, size and mtime) into a temp folder, which is used in its place
 * and removed when the process exits, also when it is stopped by SIGTERM, SIGINT or SIGHUP. A role's bundle holds
 * its inner link only; the role keeps the style's model.
 */
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { CorruptCheckpoint, MissingCheckpoint } from '../errors';
import { importBundle } from './bundle';

const cache = new Map<string, Promise<string>>();
const made: string[] = [];
let cleanupHooked = false;

const isZipPath = (p: string) => /\.zip$/i.test(p);

async function extract(path: string): Promise<string> {
  const { files } = await importBundle(new Uint8Array(await readFile(path)), path);
  const dir = await mkdtemp(join(tmpdir(), 'rmas-bundle-'));
  made.push(dir);
  if (!cleanupHooked) {
    cleanupHooked = true;
    process.once('exit', removeExtracted);
    for (const sig of STOP_SIGNALS) process.on(sig, onStopSignal);
  }
  try {
    for (const [name, bytes] of Object.entries(files)) {
      // importBundle checked every name; this keeps a write inside `dir` whatever a future check misses
      const to = resolve(dir, name);
      if (!to.startsWith(dir + sep)) throw new CorruptCheckpoint(`${path}: file '${name}' would land outside the extraction folder`);
      await mkdir(dirname(to), { recursive: true });
      await writeFile(to, bytes, { flag: 'wx' });
    }
  } catch (e) {
    // a bundle that cannot be extracted whole leaves nothing behind
    rmSync(dir, { recursive: true, force: true });
    made.splice(made.indexOf(dir), 1);
    throw e;
  }
  return dir;
}

const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/**
 * A stop signal: the extracted folders go, then the signal takes its course. When no other handler listens, ours
 * is removed and the signal raised again, so the process ends as it would have (killed by that signal); another
 * handler (mpirun's RankLost line) decides itself how the process exits.
 */
function onStopSignal(sig: NodeJS.Signals) {
  removeExtracted();
  if (process.listenerCount(sig) > 1) return;
  for (const s of STOP_SIGNALS) process.removeListener(s, onStopSignal);
  process.kill(process.pid, sig);
}

/** Deletes every folder materialize() extracted (also run at process exit) and forgets them. */
export function removeExtracted(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
  cache.clear();
}

/**
 * The folder to read a checkpoint from: for a `.zip` bundle (or a zipped folder) the folder it was
 * extracted to (checked against bundle.json first); any other path unchanged.
 */
export async function materialize(path: string): Promise<string> {
  if (!isZipPath(path)) return path;
  const abs = resolve(path);
  const st = await stat(abs).catch(() => null);
  if (!st) throw new MissingCheckpoint(`checkpoint bundle ${path} does not exist; export it again or fix the path`);
  if (st.isDirectory()) return path;
  const key = `${abs}\0${st.size}\0${st.mtimeMs}`;
  let p = cache.get(key);
  if (!p) {
    p = extract(abs);
    cache.set(key, p);
    p.catch(() => cache.delete(key));
  }
  return p;
}

/**
 * `--ckpt_override` entries with every bundle extracted: the outer links', or a role's inner link (a bundle holds
 * links only, so that role keeps the style's model; see holdsLinksOnly in src/mas/upstream.ts).
 */
export async function materializeOverrides(o: Readonly<Record<string, string>>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) out[k] = await materialize(v);
  return out;
}
