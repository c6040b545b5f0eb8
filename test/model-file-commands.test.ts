/**
 * The runner's other readers of a model folder's files take the guards of src/formats/model-file.ts (issue 39, 4):
 * `rmas plan-memory` and `rmas generate` read config.json through readModelFile, and a train run's placement of the
 * model files beside its links (src/train/model-files.ts) follows no symlink out of the model folder and reads the
 * safetensors index under the metadata cap; a hub snapshot's links into its blobs still place.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UnsafeModelFile } from '../src/errors';
import { placeModelFiles } from '../src/train/model-files';
import { rmasInProcess } from './util/rmas';

const root = mkdtempSync(join(tmpdir(), 'rmas-model-file-cmds-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const TINY = 'models/tiny/qwen3-tiny';
const SECRET = 'secret: do-not-echo-7f3a';
writeFileSync(join(root, 'secret.json'), `{"${SECRET}": 1`);

/** The tiny Qwen3's folder, with `links` (name → target) as symlinks instead of its files. */
function folder(name: string, links: Record<string, string> = {}): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(TINY)) if (links[f] === undefined) copyFileSync(join(TINY, f), join(dir, f));
  for (const [f, target] of Object.entries(links)) symlinkSync(target, join(dir, f));
  return dir;
}
const refused = (path: string) =>
  `UnsafeModelFile: ${path} is a symlink that leads out of its folder; it was refused and nothing of it was read. ` +
  'Use the file as the model ships it';

describe('model-folder guards in the runner', () => {
  it('plan-memory: a config.json linked to /dev/zero is refused at once', async () => {
    const dir = folder('zero', { 'config.json': '/dev/zero' });
    const r = await rmasInProcess('plan-memory', '--agent', `a=${dir}`);
    expect(r.code).toBe(1);
    expect(r.err).toContain(refused(`${dir}/config.json`));
    // the real folder plans
    const ok = await rmasInProcess('plan-memory', '--agent', `a=${TINY}`, '--json');
    expect(ok.code, ok.err).toBe(0);
    expect((JSON.parse(ok.out) as { agents: { layers: number }[] }).agents[0]!.layers)
      .toBe((JSON.parse(readFileSync(join(TINY, 'config.json'), 'utf8')) as { num_hidden_layers: number }).num_hidden_layers);
  });

  it('generate: a config.json linked to a file outside is refused, and nothing of it is shown', async () => {
    const dir = folder('secret', { 'config.json': join(root, 'secret.json') });
    const r = await rmasInProcess('generate', '--model', dir, '--prompt', 'hi', '--max_new_tokens', '1', '--backend', 'cpu');
    expect(r.code).toBe(1);
    expect(r.err).toContain(refused(`${dir}/config.json`));
    expect(r.out + r.err).not.toContain('do-not-echo');
  });

  it('placing the model files: a weight linked out of the folder is refused; a hub snapshot places', () => {
    const dest = join(root, 'dest');
    mkdirSync(dest);
    const out = folder('weights-out', { 'model.safetensors': join(root, 'secret.json') });
    expect(() => placeModelFiles(out, dest)).toThrow(
      new UnsafeModelFile(`${out}/model.safetensors is a symlink that leads out of ${out}; it was refused and nothing of it was ` +
        'read. Use the file as the model ships it'),
    );
    expect(readdirSync(dest)).toEqual([]);
    const repo = join(root, 'hub/models--Org--Tiny');
    const snap = join(repo, 'snapshots/c0ffee');
    mkdirSync(join(repo, 'blobs'), { recursive: true });
    mkdirSync(snap, { recursive: true });
    for (const [i, f] of readdirSync(TINY).entries()) {
      copyFileSync(join(TINY, f), join(repo, `blobs/e${i}`));
      symlinkSync(`../../blobs/e${i}`, join(snap, f));
    }
    const placed = placeModelFiles(snap, dest);
    expect(Object.keys(placed.files).sort()).toContain('model.safetensors');
    expect(readFileSync(join(dest, 'model.safetensors')).equals(readFileSync(join(TINY, 'model.safetensors')))).toBe(true);
  });
});
