/**
 * `rmas convert`: links between the forms the tab, the runner and PyTorch use.
 *   FILE.pt ↔ FILE.safetensors   one link's state dict under upstream's key names;
 *   DIR → FILE.zip               a link folder's files as a checkpoint bundle (bundle.json with sizes and
 *                                SHA-256), the form the playground imports and --ckpt_override outer= takes;
 *   FILE.zip → DIR               a bundle's files, checked against its manifest.
 * Nothing existing is overwritten: the output is written under a temporary name of its own and put in place at the end,
 * a file by a hard link (which fails if --out appeared meanwhile), a folder by a rename after a last check (POSIX
 * lets that rename replace only an empty folder made in the same instant). A failure removes the temporary name; a
 * process killed before that leaves it (`.partial-` in its name), never --out.
 */
import { existsSync, statSync } from 'node:fs';
import { link, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { InvalidArgument, MissingCheckpoint, UsageError } from '../errors';
import { linkFileBytes, parseLinkBytes } from '../mas/upstream';
import { exportBundle, guessKind, importBundle, type CheckpointKind } from '../store/bundle';
import type { Values } from './args';
import { withOutputLocks } from './output-lock';

const s = { type: 'string' } as const;
export const CONVERT_OPTIONS = { in: s, out: s, dtype: s, kind: s, style: s, role: s } as const;

export const CONVERT_USAGE = `  rmas convert --in PATH --out PATH [--dtype f32|bf16] [--kind inner|outer] [--style STYLE] [--role ROLE]
      FILE.pt <-> FILE.safetensors: one link, upstream's keys kept (--dtype: f32, exact, the default; bf16 as upstream ships);
      DIR -> FILE.zip: the link files of a folder (adapter*/outer_* links, their configs, train_args.json,
      trainer_state.json, optimizer.safetensors) as a checkpoint bundle for the playground or --ckpt_override outer=;
      FILE.zip -> DIR: a bundle's files, checked against its bundle.json. An existing --out is never replaced`;

export type ConvertArgs = Values<typeof CONVERT_OPTIONS>;

const LINK = /\.(pt|safetensors)$/i;
/** Files a link folder's bundle carries: the links, their manifests, and what resuming training needs. */
const LINK_FOLDER_FILE =
  /^(adapter.*\.(pt|safetensors)|outer_.*\.(pt|safetensors)|adapter_config\.json|innerlink_config\.json|outerlink_config\.json|outer_adapter_config.*\.json|train_args\.json|trainer_state\.json|optimizer\.safetensors)$/;

const appeared = (path: string) => new InvalidArgument(`--out ${path} appeared while converting; nothing was replaced`);
/** link() errors of a file system without hard links, where the check-then-rename fallback is used. */
const NO_LINK = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EXDEV', 'EMLINK', 'ENOSYS']);
/** rename() errors when the target appeared: a folder not empty, or a file where a folder goes. */
const TAKEN = new Set(['EEXIST', 'ENOTEMPTY', 'ENOTDIR', 'EISDIR']);
const code = (e: unknown) => (e as NodeJS.ErrnoException).code ?? '';

async function writeNew(path: string, bytes: Uint8Array): Promise<void> {
  // a name no other conversion uses: one killed before its clean-up leaves its own, which must not stop this one
  const tmp = `${path}.partial-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  try {
    await writeFile(tmp, bytes, { flag: 'wx' });
    try {
      await link(tmp, path);
    } catch (e) {
      if (code(e) === 'EEXIST') throw appeared(path);
      if (!NO_LINK.has(code(e))) throw e;
      if (existsSync(path)) throw appeared(path);
      await rename(tmp, path);
    }
  } finally {
    await rm(tmp, { force: true });
  }
}

async function readInput(path: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(path));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new MissingCheckpoint(`--in ${path} does not exist; fix the path`);
    throw new InvalidArgument(`--in ${path} cannot be read (${(e as Error).message})`);
  }
}

/** Runs one conversion; returns a line saying what was written. */
export async function convertCmd(a: ConvertArgs): Promise<string> {
  if (!a.in || !a.out) throw new UsageError('convert needs --in and --out');
  // one writer per output: a second convert to the same --out is refused before it reads anything
  return withOutputLocks('convert', async (locks) => {
    locks.take('out', a.out);
    return convert({ ...a, in: a.in!, out: a.out! });
  });
}

async function convert(a: ConvertArgs & { in: string; out: string }): Promise<string> {
  if (existsSync(a.out)) throw new InvalidArgument(`--out ${a.out} exists; name a new file or folder (nothing was changed)`);
  const dtype = a.dtype ?? 'f32';
  if (dtype !== 'f32' && dtype !== 'bf16') throw new UsageError(`--dtype ${dtype}: expected f32 or bf16`);
  if (a.kind !== undefined && a.kind !== 'inner' && a.kind !== 'outer') throw new UsageError(`--kind ${a.kind}: expected inner or outer`);
  const isDir = existsSync(a.in) && statSync(a.in).isDirectory();

  if (!isDir && LINK.test(a.in) && LINK.test(a.out)) {
    const state = parseLinkBytes(await readInput(a.in), a.in);
    const format = a.out.toLowerCase().endsWith('.pt') ? 'pt' : 'safetensors';
    await writeNew(a.out, linkFileBytes(state, format, dtype));
    return `wrote ${a.out}: ${state.size} tensors (${[...state.keys()].join(', ')}), ${dtype}\n`;
  }
  if (isDir && /\.zip$/i.test(a.out)) {
    const names = (await readdir(a.in)).filter((n) => LINK_FOLDER_FILE.test(n)).sort();
    if (!names.some((n) => LINK.test(n))) {
      throw new InvalidArgument(
        `--in ${a.in} holds no link files (adapter*.pt|safetensors or outer_*.pt|safetensors); give a folder that rmas train-inner or train-outer wrote`,
      );
    }
    const files: Record<string, Uint8Array> = {};
    for (const n of names) files[n] = await readInput(join(a.in, n));
    for (const n of names.filter((x) => LINK.test(x) && x !== 'optimizer.safetensors')) parseLinkBytes(files[n]!, join(a.in, n));
    const kind = (a.kind as CheckpointKind | undefined) ?? guessKind(names);
    let step: number | undefined;
    if (files['trainer_state.json']) {
      try {
        const st = JSON.parse(new TextDecoder().decode(files['trainer_state.json'])) as { state?: { step?: unknown } };
        if (Number.isSafeInteger(st.state?.step)) step = st.state!.step as number;
      } catch { /* a damaged trainer state stays as it is; the bundle records it byte for byte */ }
    }
    const zip = await exportBundle(files, {
      kind,
      ...(a.style ? { style: a.style } : {}),
      ...(a.role ? { role: a.role } : {}),
      ...(step !== undefined ? { step } : {}),
    });
    await writeNew(a.out, zip);
    return `wrote ${a.out}: ${kind} bundle of ${names.length} files (${names.join(', ')})\n`;
  }
  if (!isDir && /\.zip$/i.test(a.in)) {
    const { meta, files } = await importBundle(await readInput(a.in), a.in);
    await mkdir(dirname(a.out), { recursive: true });
    const tmp = await mkdtemp(join(dirname(a.out), `.${basename(a.out)}.partial-`));
    try {
      for (const [name, bytes] of Object.entries(files)) {
        await mkdir(dirname(join(tmp, name)), { recursive: true });
        await writeFile(join(tmp, name), bytes, { flag: 'wx' });
      }
      if (existsSync(a.out)) throw appeared(a.out);
      await rename(tmp, a.out).catch((e: unknown) => {
        throw TAKEN.has(code(e)) ? appeared(a.out!) : e;
      });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    return `wrote ${a.out}: ${meta.kind} link files ${Object.keys(files).sort().join(', ')}${meta.step !== undefined ? ` (step ${meta.step})` : ''}\n`;
  }
  throw new UsageError(
    `convert --in ${a.in} --out ${a.out}: expected FILE.pt|.safetensors -> FILE.pt|.safetensors, DIR -> FILE.zip or FILE.zip -> DIR`,
  );
}
