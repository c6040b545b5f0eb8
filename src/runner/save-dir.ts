/**
 * Whose a training --save_dir is, checked (under its output lock) before anything loads. A new or empty folder, or one
 * holding only the remains of a save that never committed, is this run's. A folder with an earlier run's checkpoints
 * is continued with --resume (pointing at it or at one of its checkpoints) or started over with --overwrite_output_dir
 * (upstream's trainers' flag), which deletes those checkpoints first, so that a later --resume can never continue the
 * earlier run under the new run's train_args.json. Other files are refused unless --overwrite_output_dir, which then
 * writes beside them. A model folder that no training run of ours wrote (config.json with weights or tokenizer files)
 * and the obviously wrong places (the root, system folders, the home folder and its parents) are never written into.
 */
import { existsSync, readFileSync, readdirSync, realpathSync, rmSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { OutputDirNotEmpty } from '../errors';
import { listCheckpoints, TRAIN_ARGS_FILE, TRAINER_STATE_FILE } from '../train/checkpoint';
import { nodeStore } from '../train/file-store';

/** Folders no training run writes into, whatever the flags. */
const SYSTEM_DIRS = ['/bin', '/boot', '/dev', '/etc', '/lib', '/lib32', '/lib64', '/proc', '/run', '/sbin', '/sys', '/usr', '/var',
  '/home', '/root', '/tmp', '/opt', '/srv', '/mnt', '/media'];

/** What an interrupted save leaves (file-store.ts, checkpoint.ts, model-files.ts): not another run's work. */
const LEFTOVER = /^(\.ckpt-staging|\.ckpt-commit\.json(\.part-\d+)?|\.pruned-.*|\..*\.rmas-partial|checkpoint-\d+)$/;
/** Files that make a folder a model: its config beside weights or a tokenizer. */
const MODEL_FILES = /^(model.*\.safetensors(\.index\.json)?|pytorch_model.*\.bin|.*\.gguf|tokenizer(\.json|\.model|_config\.json))$/;

const real = (p: string) => {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
};

/** Refused whatever the flags: the root, a system folder, the home folder or one above it. */
export function checkSavePlace(flag: string, saveDir: string) {
  const at = real(saveDir);
  const home = real(homedir());
  const why = at === sep ? 'the file system\'s root'
    : SYSTEM_DIRS.includes(at) ? 'a system folder'
      : at === home || home.startsWith(`${at}${sep}`) ? 'your home folder or a folder above it' : null;
  if (why)
    throw new OutputDirNotEmpty(`--${flag} ${saveDir} is ${why}; a training run writes only into a folder of its own (e.g. out/NAME): ` +
      'give one (nothing was written)');
}

/** train_args.json of one of our training runs (command train-inner or train-outer) in `dir`, or null. */
function ourArgs(dir: string): { command: string; model_files?: { files?: Record<string, string> } } | null {
  try {
    const a = JSON.parse(readFileSync(join(dir, TRAIN_ARGS_FILE), 'utf8')) as { command?: unknown };
    return a.command === 'train-inner' || a.command === 'train-outer' ? (a as { command: string }) : null;
  } catch {
    return null;
  }
}

const list = (names: string[]) => (names.length > 4 ? `${names.slice(0, 4).join(', ')} and ${names.length - 4} more` : names.join(', '));

/** Deletes the earlier run's checkpoints from `dir`: its checkpoint-<step> folders, best/, and the one at its top. */
function removeEarlierRun(dir: string): string[] {
  const gone: string[] = [];
  for (const n of readdirSync(dir)) {
    if (!/^checkpoint-\d+$/.test(n) && n !== 'best' && !/^(\.ckpt-staging|\.ckpt-commit\.json.*|\.pruned-.*)$/.test(n)) continue;
    if (n === 'best' && !ourArgs(join(dir, n))) continue;
    rmSync(join(dir, n), { recursive: true, force: true });
    gone.push(n);
  }
  const top: string[] = [];
  try {
    const st = JSON.parse(readFileSync(join(dir, TRAINER_STATE_FILE), 'utf8')) as { files?: unknown };
    if (Array.isArray(st.files)) top.push(...st.files.filter((f): f is string => typeof f === 'string'));
  } catch {
    // no checkpoint at the top
  }
  top.push(...Object.keys(ourArgs(dir)?.model_files?.files ?? {}), TRAINER_STATE_FILE);
  for (const f of new Set(top)) {
    if (!/^[^/\\]+$/.test(f) || f === '.' || f === '..' || !existsSync(join(dir, f))) continue;
    rmSync(join(dir, f), { force: true });
    gone.push(f);
  }
  return gone;
}

/**
 * Checks that `saveDir` may be written by this run (see the file's comment); with --overwrite_output_dir deletes an
 * earlier run's checkpoints first and says so. `resume` is --resume as given. Call it holding the folder's lock.
 */
export async function claimSaveDir(saveDir: string, o: { resume?: string; overwrite: boolean; say: (s: string) => void }) {
  checkSavePlace('save_dir', saveDir);
  if (!existsSync(saveDir) || !statSync(saveDir).isDirectory()) return;
  const names = readdirSync(saveDir).sort();
  if (!names.length) return;
  const at = real(saveDir);
  // --resume of the folder itself or of one of its checkpoint folders continues this folder's run
  const from = o.resume !== undefined && existsSync(o.resume) ? real(o.resume) : null;
  const fromHere = from !== null && (from === at || dirname(from) === at);
  const earlier = [saveDir, ...names.filter((n) => /^checkpoint-\d+$/.test(n) || n === 'best').map((n) => join(saveDir, n))]
    .filter((d) => ourArgs(d) !== null);
  const complete = await listCheckpoints(nodeStore(saveDir), '.').catch(() => []);
  const isModel = names.includes('config.json') && names.some((n) => MODEL_FILES.test(n));
  if (isModel && !earlier.length) {
    const model = list(names.filter((n) => n === 'config.json' || MODEL_FILES.test(n)));
    throw new OutputDirNotEmpty(`--save_dir ${saveDir} holds a model (${model}) ` +
      'that no training run of rmas wrote; it is never written into, with or without --overwrite_output_dir. Give a new folder ' +
      '(nothing was written)');
  }
  if (earlier.length || complete.length) {
    if (fromHere) return;
    const what = complete.length
      ? `the checkpoints of an earlier run (${complete.map((c) => c.dir || `step ${c.step} at its top`).join(', ')})`
      : `the files of an earlier run (${list(earlier.map((d) => join(d, TRAIN_ARGS_FILE)))})`;
    if (!o.overwrite) {
      throw new OutputDirNotEmpty(`--save_dir ${saveDir} holds ${what}. Pass --resume ${saveDir} to continue that run, or ` +
        '--overwrite_output_dir to start over (its checkpoints are deleted first), or give a new folder (nothing was written)');
    }
    const gone = removeEarlierRun(saveDir);
    o.say(`--overwrite_output_dir: deleted the earlier run's ${list(gone)} from ${saveDir}\n`);
    return;
  }
  const others = names.filter((n) => !LEFTOVER.test(n));
  if (others.length && !o.overwrite) {
    throw new OutputDirNotEmpty(`--save_dir ${saveDir} is not empty (it holds ${list(others)}) and holds no checkpoint of this run. Give ` +
      `a new or empty folder, or pass --overwrite_output_dir to write the checkpoints beside those files${o.resume ? '' : ' (or --resume ' +
      'to continue a run saved there)'} (nothing was written)`);
  }
}
