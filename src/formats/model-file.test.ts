// A model folder's metadata files: symlinks out of the folder and oversized files are refused by name, before any byte is
// parsed or shown; the hub cache's snapshots → blobs links keep working (issue 39, 4).
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MissingCheckpoint, UnsafeModelFile } from '../errors';
import { readGenerationConfig } from '../model/generate';
import { loadDecoderFromDir } from '../model/dir';
import { CpuBackend } from '../tensor/cpu';
import { loadTokenizerFromDir } from '../tokenizer/dir';
import { modelFileRoot, readModelFile } from './model-file';

const root = mkdtempSync(join(tmpdir(), 'rmas-model-file-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const TINY = new URL('../../models/tiny/qwen3-tiny/', import.meta.url).pathname.replace(/\/$/, '');

/** A folder with the tiny Qwen3's files, `links` made symlinks (name → target) instead. */
function folder(name: string, links: Record<string, string> = {}): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const f of ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors']) {
    if (links[f] === undefined) copyFileSync(join(TINY, f), join(dir, f));
  }
  for (const [f, target] of Object.entries(links)) symlinkSync(target, join(dir, f));
  return dir;
}

describe('readModelFile', () => {
  it('a config.json symlinked to /dev/zero is refused at once (it grew memory without limit)', async () => {
    const dir = folder('zero', { 'config.json': '/dev/zero' });
    const t0 = performance.now();
    const e = await loadDecoderFromDir(dir, new CpuBackend()).catch((x: unknown) => x);
    expect(e).toEqual(new UnsafeModelFile(`${dir}/config.json is a symlink that leads out of its folder; it was refused and nothing ` +
      'of it was read. Use the file as the model ships it'));
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it('a symlink to a file outside the folder is refused, and its content is in no message', async () => {
    const secret = join(root, 'secret.txt');
    writeFileSync(secret, 'root:$6$SECRETHASH:19000:0:99999:7:::\n');
    const dir = folder('outside', { 'tokenizer_config.json': secret, 'generation_config.json': '../secret.txt' });
    const tok = await loadTokenizerFromDir(dir).catch((x: unknown) => x);
    expect(tok).toBeInstanceOf(UnsafeModelFile);
    expect((tok as Error).message).toBe(`${dir}/tokenizer_config.json is a symlink that leads out of its folder; it was refused and ` +
      'nothing of it was read. Use the file as the model ships it');
    const gen = await readGenerationConfig(dir).catch((x: unknown) => x);
    expect((gen as Error).name).toBe('UnsafeModelFile');
    for (const m of [(tok as Error).message, (gen as Error).message]) expect(m).not.toMatch(/root:|SECRET/);
    // a chat template linked out is not rendered as the prompt either
    const t = folder('template', { 'chat_template.jinja': secret });
    await expect(loadTokenizerFromDir(t)).rejects.toThrow(/chat_template\.jinja is a symlink that leads out of its folder/);
  });

  it('a device, a folder and a file past its cap are refused; a missing file stays the caller\'s ENOENT', async () => {
    const dir = folder('odd');
    mkdirSync(join(dir, 'chat_template.jinja'));
    await expect(readModelFile(join(dir, 'chat_template.jinja'))).rejects.toThrow(
      new UnsafeModelFile(`${dir}/chat_template.jinja is not a regular file (a device, a FIFO or a folder); it was refused and nothing ` +
        'of it was read. Use the file as the model ships it'));
    writeFileSync(join(dir, 'big.json'), Buffer.alloc(3 * 2 ** 20, 0x20));
    await expect(readModelFile(join(dir, 'big.json'), { maxBytes: 2 ** 20 })).rejects.toThrow(
      new UnsafeModelFile(`${dir}/big.json is 3 MiB, more than the 1 MiB a model's big.json may be; it was refused and nothing of it ` +
        'was read. Use the file as the model ships it'));
    expect((await readModelFile(join(dir, 'big.json'))).length).toBe(3 * 2 ** 20);
    await expect(readModelFile(join(dir, 'nope.json'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(loadDecoderFromDir(join(root, 'none'), new CpuBackend())).rejects.toThrow(MissingCheckpoint);
    symlinkSync('loop-b', join(dir, 'loop-a'));
    symlinkSync('loop-a', join(dir, 'loop-b'));
    await expect(readModelFile(join(dir, 'loop-a'))).rejects.toThrow(/loop-a is a symlink loop; it was refused/);
  });

  it('the hub cache layout loads: snapshots/<commit>/<file> → ../../blobs/<etag>, in a subfolder too', async () => {
    const repo = join(root, 'hub/models--Org--Tiny');
    const snap = join(repo, 'snapshots/0123abcd');
    mkdirSync(join(repo, 'blobs'), { recursive: true });
    mkdirSync(join(snap, 'planner'), { recursive: true });
    for (const [i, f] of ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'].entries()) {
      copyFileSync(join(TINY, f), join(repo, `blobs/etag${i}`));
      symlinkSync(`../../blobs/etag${i}`, join(snap, f));
      symlinkSync(`../../../blobs/etag${i}`, join(snap, 'planner', f));
    }
    expect(modelFileRoot(snap)).toBe(repo);
    expect(modelFileRoot(`${snap}/planner`)).toBe(repo);
    expect(modelFileRoot(root)).toBe(root);
    for (const dir of [snap, join(snap, 'planner')]) {
      expect(await readModelFile(join(dir, 'config.json'))).toBe(readFileSync(join(TINY, 'config.json'), 'utf8'));
      const tok = await loadTokenizerFromDir(dir);
      expect(tok.decode(tok.encode('12 + 30 = 42'))).toBe('12 + 30 = 42');
    }
    // but not out of the repo's cache folder
    symlinkSync('../../../models--Other--Repo/blobs/x', join(snap, 'chat_template.jinja'));
    mkdirSync(join(root, 'hub/models--Other--Repo/blobs'), { recursive: true });
    writeFileSync(join(root, 'hub/models--Other--Repo/blobs/x'), '{{ "other" }}');
    await expect(loadTokenizerFromDir(snap)).rejects.toThrow(
      new UnsafeModelFile(`${snap}/chat_template.jinja is a symlink that leads out of ${snap} (and ${repo}); it was refused and ` +
        'nothing of it was read. Use the file as the model ships it'));
  });
});
