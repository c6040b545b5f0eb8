/**
 * Bundles on the runner: materialize() of a tiny system's outer folder bundle reads like the folder
 * (resolveOuterFolder + readLinkFile), is extracted once per file version; `rmas ask --ckpt_override
 * outer=bundle.zip` answers exactly like the folder; a role bundle is refused with the fix; train-inner's
 * --resume and --init_adapter take bundles of its own checkpoints.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildTinySystem, TINY_MAS_LINKS } from '../../scripts/tiny-system/tiny-mas';
import { overridesFor, readDump, runAsk } from '../../test/mas/ask-util';
import { arithmeticRows } from '../../test/train/fixtures';
import { readLinkFile, resolveOuterFolder } from '../mas/upstream';
import { trainCmd } from '../runner/train-cmd';
import type { TrainArgs } from '../runner/train-args';
import { CpuBackend } from '../tensor/cpu';
import { writeZip } from '../formats/zip';
import { sha256Hex } from '../util/sha256';
import { exportBundle } from './bundle';
import { materialize, removeExtracted } from './bundle-node';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-bundle-node-'));
afterAll(() => {
  removeExtracted();
  rmSync(tmp, { recursive: true, force: true });
});
const cpu = new CpuBackend('f32');

/** The files of a flat folder, as a bundle written next to it. */
async function bundleOf(dir: string, file: string, kind: 'inner' | 'outer'): Promise<string> {
  const files = Object.fromEntries(
    readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => [d.name, new Uint8Array(readFileSync(join(dir, d.name)))]),
  );
  writeFileSync(file, await exportBundle(files, { kind }));
  return file;
}

/** A bundle of a role folder's inner-link files only (adapter*, innerlink_config.json), as the playground exports one. */
async function linkBundle(roleDir: string, file: string): Promise<string> {
  const names = readdirSync(roleDir).filter((n) => /^adapter|^innerlink_config\.json$/.test(n));
  expect(names.length).toBeGreaterThan(0);
  writeFileSync(
    file,
    await exportBundle(Object.fromEntries(names.map((n) => [n, new Uint8Array(readFileSync(join(roleDir, n)))])), { kind: 'inner' }),
  );
  return file;
}

describe('materialize', () => {
  it('extracts an outer-links bundle into a folder that resolves and reads like the original', async () => {
    const sys = await buildTinySystem('sequential_light', join(tmp, 'sys'));
    const zip = await bundleOf(sys.outer, join(tmp, 'outer.zip'), 'outer');
    const dir = await materialize(zip);
    expect(dir).not.toBe(zip);
    expect(readdirSync(dir).sort()).toEqual(readdirSync(sys.outer).sort());
    const keys = TINY_MAS_LINKS.sequential_light.map((l) => l.key);
    const got = await resolveOuterFolder(dir, 'math', keys);
    const want = await resolveOuterFolder(sys.outer, 'math', keys);
    for (const k of keys) {
      expect(got.get(k)!.path).toBe(join(dir, want.get(k)!.path.slice(sys.outer.length + 1)));
      const a = await readLinkFile(got.get(k)!.path);
      const b = await readLinkFile(want.get(k)!.path);
      for (const [n, t] of b) expect(Array.from(a.get(n)!.data), `${k} ${n}`).toEqual(Array.from(t.data));
    }
    expect(await materialize(zip)).toBe(dir); // cached for the same file version
    utimesSync(zip, new Date(), new Date(Date.now() + 5000));
    expect(await materialize(zip)).not.toBe(dir); // a rewritten bundle is extracted again
    expect(await materialize(sys.outer)).toBe(sys.outer); // folders and files pass through
    await expect(materialize(join(tmp, 'none.zip'))).rejects.toThrow(/none\.zip does not exist/);
  });

  it('rmas ask --ckpt_override outer=bundle.zip answers exactly like the folder; ' +
    "a role bundle of links only needs the style's model", async () => {
    const dir = join(tmp, 'ask');
    const o = await overridesFor('sequential_light', dir);
    const outerDir = o.find((s) => s.startsWith('outer='))!.slice(6);
    const zip = await bundleOf(outerDir, join(tmp, 'ask-outer.zip'), 'outer');
    const args = {
      style: 'sequential_light',
      question: 'What is 12 + 30?',
      num_recursive_rounds: '2',
      latent_length: '3',
      greedy: true,
      max_new_tokens: '6',
      no_ans: true,
      json: true,
    };
    const viaFolder = await runAsk({ ...args, ckpt_override: o, dump: join(dir, 'd1') }, cpu);
    const viaZip = await runAsk(
      { ...args, ckpt_override: [...o.filter((s) => !s.startsWith('outer=')), `outer=${zip}`], dump: join(dir, 'd2') },
      cpu,
    );
    expect(viaFolder.error).toBeNull();
    expect(viaZip.error).toBeNull();
    const answer = (s: string) => {
      const j = JSON.parse(s) as { text: string; tokens: number };
      return [j.text, j.tokens];
    };
    expect(answer(viaZip.out)).toEqual(answer(viaFolder.out));
    // every stage's tensors (latents through the outer links included) are bit-identical
    const [d1, d2] = [await readDump(join(dir, 'd1')), await readDump(join(dir, 'd2'))];
    expect(d2.map((s) => s.links_out)).toEqual(d1.map((s) => s.links_out));
    expect(d1.flatMap((s) => [...s.tensors.keys()]).length).toBeGreaterThan(6);
    for (const [i, s] of d1.entries())
      for (const [k, t] of s.tensors) expect(Array.from(d2[i]!.tensors.get(k)!.values), `${i} ${k}`).toEqual(Array.from(t.values));
    // each bundle named as given, not by the temporary folder it was extracted to
    expect(viaZip.err).toContain(`outer links: loading ${zip}\n`);
    // a role bundle of links only: the model comes from the style's repo, which no cache holds here
    const plannerDir = o.find((s) => s.startsWith('planner='))!.slice(8);
    const innerZip = await linkBundle(plannerDir, join(tmp, 'ask-planner.zip'));
    const saved = { ...process.env };
    Object.assign(process.env, { HF_HUB_OFFLINE: '1', HF_HUB_CACHE: join(tmp, 'empty-hub') });
    const noModel = await runAsk({ ...args, ckpt_override: [...o.filter((s) => !s.startsWith('planner=')), `planner=${innerZip}`] }, cpu)
      .finally(() => void (process.env = saved));
    expect(noModel.error?.name).toBe('HubOffline');
    expect(noModel.error?.message).toMatch(new RegExp(
      `^role planner of sequential_light: ${innerZip} holds its inner link only, so the model comes from the style's repo ` +
        'RecursiveMAS/Sequential-Light-Planner-Qwen3-1.7B: RecursiveMAS/Sequential-Light-Planner-Qwen3-1.7B is not in the Hugging Face cache.*' +
        "; or copy the link files into the role's model folder and pass that$",
    ));
    // a bundle with no inner link (the outer links) given for a role: no model, no link
    const r = await runAsk({ ...args, ckpt_override: [...o.filter((s) => !s.startsWith('planner=')), `planner=${zip}`] }, cpu);
    expect(r.error?.name).toBe('MissingCheckpoint');
    expect(r.error?.message).toContain(`role planner: ${zip} has no config.json`);
  });
});

describe('materialize: a refused bundle', () => {
  it('extracts nothing, outside its folder or in it: traversal, a NUL, a file that is also a folder, a duplicate', async () => {
    const own = join(tmp, 'own-tmp');
    mkdirSync(own);
    const x = new TextEncoder().encode('x');
    /** A bundle whose bundle.json lists these files (hashes right), as a hand-made hostile one would. */
    const hand = async (file: string, files: [string, Uint8Array][], extra: [string, Uint8Array][] = []) => {
      const rows = await Promise.all(files.map(async ([n, b]) => [n, { bytes: b.length, sha256: await sha256Hex(b) }] as const));
      const table = Object.fromEntries(rows);
      const meta = { format: 'rmas-checkpoint-bundle', version: 1, kind: 'outer', created: '2026-01-01T00:00:00.000Z', files: table };
      writeFileSync(file, writeZip([['bundle.json', new TextEncoder().encode(JSON.stringify(meta))], ...files, ...extra]));
      return file;
    };
    const cases: [string, [string, Uint8Array][], [string, Uint8Array][], string][] = [
      ['up.zip', [['outer_12.pt', x], ['../escaped.pt', x]], [], "up.zip: file name '../escaped.pt' must be a relative"],
      ['nul.zip', [['outer_12.pt', x], ['a\0.pt', x]], [], 'nul.zip: zip entry "a\\u0000.pt" has a NUL character in its name'],
      ['both.zip', [['outer_12.pt', x], ['outer_12.pt/x.pt', x]], [], "both.zip: 'outer_12.pt' is both a file and the folder of"],
      ['dup.zip', [['outer_12.pt', x]], [['outer_12.pt', x]], 'dup.zip: zip entry "outer_12.pt" appears twice'],
    ];
    const before = process.env.TMPDIR;
    process.env.TMPDIR = own; // where materialize() extracts
    try {
      for (const [name, files, extra, message] of cases) {
        const e = await materialize(await hand(join(tmp, name), files, extra)).then(() => null, (x: unknown) => x as Error);
        expect(e?.name, name).toBe('CorruptCheckpoint');
        expect(e?.message, name).toContain(message);
      }
    } finally {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
    }
    expect(readdirSync(own)).toEqual([]);
    expect(readdirSync(tmp).filter((n) => n.includes('escaped'))).toEqual([]);
  });
});

describe('a role override of links only', () => {
  it("rmas ask --ckpt_override planner=bundle.zip (the tiny planner's link files) " +
    "keeps the package's planner model and answers as without it", async () => {
    const args = {
      question: 'What is 12 + 30?',
      num_recursive_rounds: '1',
      latent_length: '3',
      greedy: true,
      max_new_tokens: '8',
      no_ans: true,
      json: true,
    };
    const zip = await linkBundle('models/tiny/system/planner', join(tmp, 'tiny-planner.zip'));
    const plain = await runAsk(args, cpu);
    const withZip = await runAsk({ ...args, ckpt_override: [`planner=${zip}`] }, cpu);
    expect(plain.error).toBeNull();
    expect(withZip.error).toBeNull();
    expect(JSON.parse(withZip.out)).toMatchObject({ text: JSON.parse(plain.out).text, tokens: JSON.parse(plain.out).tokens });
    // named as given, not by the temporary folder it was extracted to
    expect(withZip.err).toContain(`planner: loading models/tiny/system/planner with the inner link of ${zip}\n`);
    // a link that does not fit the model (the critic's, hidden 96, for the planner, hidden 64) is refused by name
    const wrong = await linkBundle('models/tiny/system/critic', join(tmp, 'tiny-critic.zip'));
    const r = await runAsk({ ...args, ckpt_override: [`planner=${wrong}`] }, cpu);
    expect(r.error?.name).toBe('ShapeMismatch');
    expect(r.error?.message).toBe(
      `link planner inner link (${wrong}/adapter.pt): its d size is 96 but the agent it connects has hidden size 64`,
    );
  });
});

describe('train-inner with bundles', () => {
  const rowsFile = join(tmp, 'rows.jsonl');
  writeFileSync(rowsFile, arithmeticRows(6).map((r) => JSON.stringify(r)).join('\n'));
  const train = async (a: TrainArgs) => {
    let err = '';
    try {
      await trainCmd('inner', a, async () => cpu, { out: () => {}, err: (s) => (err += s), tty: false });
      return { err, error: null as Error | null };
    } catch (e) {
      return { err, error: e as Error };
    }
  };
  const innerArgs = (save: string, extra: TrainArgs = {}): TrainArgs => ({
    model_name_or_path: 'models/tiny/qwen3-tiny', mas_design: 'sequential', mas_role: 'planner', dataset_name: rowsFile, save_dir: save,
    max_steps: '4', batch_size: '2', adapter_lr: '1e-2', warmup_steps: '1', seed: '3', ...extra,
  });

  it('--resume from a bundle of checkpoint-2 reaches the bytes of an uninterrupted run; --init_adapter takes a bundle', async () => {
    const straight = join(tmp, 'straight');
    expect((await train(innerArgs(straight))).error).toBeNull();
    const part = join(tmp, 'part');
    expect((await train(innerArgs(part, { save_steps: '2' }))).error).toBeNull();
    const zip = await bundleOf(join(part, 'checkpoint-2'), join(tmp, 'ckpt2.zip'), 'inner');
    const cont = join(tmp, 'cont');
    const r = await train(innerArgs(cont, { resume: zip }));
    expect(r.error).toBeNull();
    expect(r.err).toContain('at step 2');
    for (const f of ['adapter.safetensors', 'optimizer.safetensors'])
      expect(readFileSync(join(cont, f)).equals(readFileSync(join(straight, f))), f).toBe(true);

    const top = await bundleOf(straight, join(tmp, 'final.zip'), 'inner');
    const init = join(tmp, 'init');
    expect((await train(innerArgs(init, { init_adapter: top, adapter_lr: '0', max_steps: '1' }))).error).toBeNull();
    const want = await readLinkFile(join(straight, 'adapter.safetensors'));
    const got = await readLinkFile(join(init, 'adapter.safetensors'));
    for (const [k, t] of want) expect(Array.from(got.get(k)!.data), k).toEqual(Array.from(t.data));
  });
});
