/**
 * A model folder's small files (config.json, generation_config.json, the tokenizer files, a chat template, a manifest),
 * read in Node with two guards. A symlink may not lead out of the folder: a `config.json` linked to /etc/shadow would
 * have its first characters shown in the JSON error, one linked to /dev/zero grew memory without limit. The hub cache's
 * own layout stays readable: snapshots/<commit>/<file> links to ../../blobs/<etag>, inside the repo's cache folder
 * (models--Org--Name), which is then the folder. And a file is read up to its cap and refused past it, before parsing.
 */
import { UnsafeModelFile } from '../errors.ts';
import { nodeImport } from '../util/node-import.ts';

/** The most bytes read of a model folder's metadata file: tokenizer.json holds a vocabulary (Gemma 3's is 33 MB). */
export const MODEL_FILE_MAX_BYTES: Readonly<Record<string, number>> = { 'tokenizer.json': 128 * 2 ** 20 };
/** The cap of every other metadata file (the largest tokenizer_config.json released is ~1.2 MB). */
export const MODEL_FILE_DEFAULT_MAX_BYTES = 16 * 2 ** 20;

const HUB_REPO = /^(.*\/(?:models|datasets|spaces)--[^/]+)\/snapshots\/[^/]+(?:\/.*)?$/;

/** The folder a file in `realDir` may link within: the hub cache's repo folder for a snapshot, else `realDir` itself. */
export function modelFileRoot(realDir: string): string {
  return HUB_REPO.exec(realDir)?.[1] ?? realDir;
}

const mib = (n: number) => `${(n / 2 ** 20).toFixed(n < 2 ** 20 ? 2 : 0)} MiB`;

/**
 * The text of `path`, a model folder's metadata file. A missing file (or a dangling link) throws the file system's
 * ENOENT error, so callers keep their own message for it; a link out of the folder, something that is not a regular file
 * (a device, a FIFO, a folder) or a file past its cap is UnsafeModelFile, and nothing of it is read.
 */
export async function readModelFile(path: string, opts: { maxBytes?: number } = {}): Promise<string> {
  const fs = await nodeImport('node:fs/promises');
  const name = path.replace(/^.*\//, '');
  const max = opts.maxBytes ?? MODEL_FILE_MAX_BYTES[name] ?? MODEL_FILE_DEFAULT_MAX_BYTES;
  const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) || '/' : '.';
  const refuse = (why: string) =>
    new UnsafeModelFile(`${path} ${why}; it was refused and nothing of it was read. Use the file as the model ships it`);
  const real = await fs.realpath(path).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ELOOP') throw refuse('is a symlink loop');
    throw e;
  });
  const root = modelFileRoot(await fs.realpath(dir));
  if (real !== root && !real.startsWith(`${root === '/' ? '' : root}/`)) {
    throw refuse(`is a symlink that leads out of ${root === dir ? 'its folder' : `${dir} (and ${root})`}`);
  }
  const st = await fs.stat(real);
  if (!st.isFile()) throw refuse('is not a regular file (a device, a FIFO or a folder)');
  if (st.size > max) throw refuse(`is ${mib(st.size)}, more than the ${mib(max)} a model's ${name} may be`);
  // O_NONBLOCK: should a FIFO take the file's place after the check, opening it does not wait for a writer
  const fh = await fs.open(real, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  try {
    // one byte more than the size: a file that grew after stat() is seen, and refused rather than cut
    const buf = new Uint8Array(st.size + 1);
    let n = 0;
    for (let r = 1; r > 0 && n < buf.length; n += r) r = (await fh.read(buf, n, buf.length - n, n)).bytesRead;
    if (n > st.size) throw refuse('changed while it was read');
    return new TextDecoder().decode(buf.subarray(0, n));
  } finally {
    await fh.close();
  }
}
