/**
 * tiny_sequential outside `rmas ask`, on the stand-in system (test/tiny-style-standin.ts): train-inner and
 * train-outer take its folders and prompts.json by default (the trained batches hold the tiny prompt text),
 * and, for the offline manifest (which names tiny_distillation, the committed models/tiny/distillation), the build
 * plugin lists every file it needs and the browser loader reads its prompt file.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tinySystemFiles } from '../../build/tiny-system-plugin';
import { SafetensorsFile } from '../../src/formats/safetensors';
import { fileSource } from '../../src/formats/sources';
import { loadSystemFromSpec } from '../../src/mas/system-urls';
import { TINY_SYSTEM_ENV } from '../../src/mas/system-folders';
import { CpuBackend } from '../../src/tensor/cpu';
import { loadTokenizerFromDir } from '../../src/tokenizer';
import { callRegistry } from '../../workers/calls';
import { systemCalls } from '../../workers/system-calls';
import { arithmeticRows } from '../train/fixtures';
import { buildTinyStandIn, standInFetch } from '../tiny-style-standin';
import { trainInProcess as train } from '../util/rmas';

const tmp = mkdtempSync(join(tmpdir(), 'tiny-style-train-'));
const cpu = new CpuBackend('f32');
const saved = process.env[TINY_SYSTEM_ENV];
const rowsFile = join(tmp, 'rows.jsonl');
let standIn = '';
beforeAll(async () => {
  standIn = await buildTinyStandIn(join(tmp, 'system'));
  process.env[TINY_SYSTEM_ENV] = standIn;
  writeFileSync(rowsFile, arithmeticRows(4).map((r) => JSON.stringify(r)).join('\n'));
});
afterAll(() => {
  if (saved === undefined) delete process.env[TINY_SYSTEM_ENV];
  else process.env[TINY_SYSTEM_ENV] = saved;
  rmSync(tmp, { recursive: true, force: true });
});

async function inputIds(file: string, key: string): Promise<number[][]> {
  const f = await SafetensorsFile.open(fileSource(file));
  const t = await f.read(key);
  const v = Array.from(new Int32Array(t.bytes.slice().buffer));
  await f.close();
  const T = t.shape[1];
  return Array.from({ length: t.shape[0] }, (_, b) => v.slice(b * T, (b + 1) * T));
}

describe('train-inner / train-outer with --style tiny_sequential', () => {
  it('train-inner --style --role: the embedded model folder and the tiny prompts by default', async () => {
    const save = join(tmp, 'inner');
    const dump = join(tmp, 'inner-dump');
    const r = await train('inner', {
      style: 'tiny_sequential',
      role: 'critic',
      dataset_name: rowsFile,
      save_dir: save,
      max_steps: '1',
      batch_size: '2',
      dump_batches: dump,
    });
    expect(r.error).toBeNull();
    expect(r.err).toContain('for chain/critic on critic');
    expect(readdirSync(save)).toContain('adapter.pt');
    const tok = await loadTokenizerFromDir(join(standIn, 'critic'));
    for (const ids of await inputIds(join(dump, 'step-1.safetensors'), 'input_ids')) {
      const text = tok.decode(ids);
      expect(text).toMatch(/Question: [^\n]+\nPlan:\n[\s\S]+\nWork out each step\./);
    }
  });

  it('train-inner: --prompts and --model_name_or_path still win', async () => {
    const file = join(tmp, 'mine.json');
    writeFileSync(file, JSON.stringify({ templates: { 'chain.critic.first': 'Q {question}\n<<LATENT_PLANNER_SLOT>>\nMARKER refine.' } }));
    const dump = join(tmp, 'inner-dump-2');
    const r = await train('inner', {
      mas_design: 'tiny_sequential',
      mas_role: 'critic',
      model_name_or_path: 'models/tiny/llama-tiny',
      prompts: file,
      dataset_name: rowsFile,
      save_dir: join(tmp, 'inner-2'),
      max_steps: '1',
      batch_size: '2',
      dump_batches: dump,
    });
    expect(r.error).toBeNull();
    expect(r.err).toContain('on llama-tiny');
    const tok = await loadTokenizerFromDir('models/tiny/llama-tiny');
    const text = tok.decode((await inputIds(join(dump, 'step-1.safetensors'), 'input_ids'))[0]);
    expect(text).toContain('MARKER refine.');
    expect(text).not.toContain('Work out each step.');
  });

  it('train-outer --style tiny_sequential needs no agent flags (the embedded folders and their adapter.pt)', async () => {
    const save = join(tmp, 'outer');
    const r = await train('outer', {
      style: 'tiny_sequential',
      dataset_name: rowsFile,
      save_dir: save,
      max_steps: '1',
      num_recursive_rounds: '1',
      max_latent_tokens: '2',
      batch_size: '1',
    });
    expect(r.error).toBeNull();
    expect(r.err).toContain('outer links outer_12 48→64, outer_23 64→32, outer_31 32→48 (tiny_sequential, 1 rounds)');
    expect(readdirSync(save).filter((f) => f.endsWith('.pt')).sort()).toEqual(['outer_12.pt', 'outer_23.pt', 'outer_31.pt']);
  });

  it('a missing system folder is MissingCheckpoint with the rebuild command', async () => {
    const empty = join(tmp, 'empty');
    mkdirSync(empty, { recursive: true });
    process.env[TINY_SYSTEM_ENV] = empty;
    try {
      const a = await train('inner', { style: 'tiny_sequential', role: 'critic', dataset_name: rowsFile, save_dir: join(tmp, 'x') });
      expect(a.error).toMatchObject({ name: 'MissingCheckpoint', message: expect.stringContaining('prompts.json does not exist') });
      expect(a.error?.message).toContain('rebuild them with `npm run tiny:build:sequential`');
      const b = await train('outer', {
        style: 'tiny_sequential',
        prompts: join(standIn, 'prompts.json'),
        dataset_name: rowsFile,
        save_dir: join(tmp, 'y'),
      });
      expect(b.error).toMatchObject({
        name: 'MissingCheckpoint',
        message: expect.stringContaining(
          `--agent1_model_name_or_path (planner) (default of tiny_sequential): the tiny system files are missing (${empty}/planner holds no config.json)`,
        ),
      });
    } finally {
      process.env[TINY_SYSTEM_ENV] = standIn;
    }
  });
});

describe('the offline manifest (models/tiny-system.json) in the browser path', () => {
  // the manifest names tiny_distillation, whose files are the committed ones in models/tiny/distillation
  const SYSTEM = 'models/tiny/distillation';

  it('the build plugin lists the manifest, the prompt file, every role folder file (adapter.pt included) and the outer links', async () => {
    const root = join(tmp, 'app');
    mkdirSync(join(root, 'models/tiny'), { recursive: true });
    cpSync('models/tiny-system.json', join(root, 'models/tiny-system.json'));
    cpSync(SYSTEM, join(root, SYSTEM), { recursive: true });
    const files = tinySystemFiles(root).sort();
    const role = (r: string) => readdirSync(join(SYSTEM, r)).map((f) => `${SYSTEM}/${r}/${f}`);
    // with its recorded eval (the Evaluate panel's curve); the second system's manifest is not in this root: left out
    expect(files).toEqual([
      'models/tiny-system.json', `${SYSTEM}/prompts.json`, `${SYSTEM}/eval.json`, ...role('expert'), ...role('learner'),
      ...['outer_el', 'outer_le'].map((k) => `${SYSTEM}/outer/${k}.pt`),
    ].sort());
    expect(files).toContain(`${SYSTEM}/learner/adapter.pt`);
    rmSync(join(root, SYSTEM, 'prompts.json'));
    expect(() => tinySystemFiles(root)).toThrow(
      /references models\/tiny\/distillation\/prompts\.json, which does not exist; run npm run tiny:build/,
    );
    // the second offline system: left out while its folder is not built, listed (manifest, files, eval.json) once it is
    cpSync(SYSTEM, join(root, SYSTEM), { recursive: true });
    cpSync('models/tiny-recursion.json', join(root, 'models/tiny-recursion.json'));
    expect(tinySystemFiles(root).filter((f) => f.includes('recursion'))).toEqual([]);
    cpSync(SYSTEM, join(root, 'models/tiny/recursion'), { recursive: true });
    const second = tinySystemFiles(root).filter((f) => f.includes('recursion'));
    expect(second).toContain('models/tiny-recursion.json');
    expect(second).toContain('models/tiny/recursion/eval.json');
    expect(second).toContain('models/tiny/recursion/outer/outer_le.pt');
    rmSync(join(root, 'models/tiny/recursion/outer/outer_le.pt'));
    expect(() => tinySystemFiles(root)).toThrow(
      /models\/tiny-recursion\.json references models\/tiny\/recursion\/outer\/outer_le\.pt, which does not exist; run the build of tiny_recursion/,
    );
  });

  it('loadSystemFromSpec reads the prompt file into system.prompts; a missing one says how to rebuild', async () => {
    const app = 'http://app.test/';
    // the repository at `app` (standInFetch serves every path but models/tiny/system/ from it)
    const fetchFile = standInFetch(app, standIn);
    const api = systemCalls({ backend: async () => ({ backend: cpu }), appBase: app, fetchFile }, callRegistry());
    const spec = (await api.offlineSystem())!;
    expect(spec.style).toBe('tiny_distillation');
    const sys = await loadSystemFromSpec(spec, cpu, { fetchFile, links: false });
    expect(sys.prompts!.templates['distill.learner.first']).toBe(
      'Question: {question}\nExpert:\n<<DISTILL_EXPERT_SLOT>>\nGive the answer.',
    );
    sys.dispose();
    // the system folder gone
    const gone = (url: string) => (url.startsWith(`${app}${SYSTEM}/`) ? Promise.resolve(null) : fetchFile(url));
    await expect(loadSystemFromSpec(spec, cpu, { fetchFile: gone })).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringMatching(
        /^the prompts of tiny_distillation: the tiny system files are missing \(http:\/\/app\.test\/models\/tiny\/distillation\/prompts\.json.*rebuild them with `npm run tiny:build`, then reload$/,
      ),
    });
    const { prompts: _, ...bare } = spec as typeof spec & { prompts?: unknown };
    await expect(loadSystemFromSpec(bare, cpu, { fetchFile })).rejects.toMatchObject({
      name: 'InvalidArgument',
      message: expect.stringContaining('needs prompts'),
    });
    api.dispose();
  });
});
