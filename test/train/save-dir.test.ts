/**
 * Upstream's training commands as written (issue 22): train-inner's save_dir is a whole role folder (the
 * model's files hard-linked or copied beside the links, never rewritten) that `rmas ask --ckpt_override
 * ROLE=DIR` and train-outer's model flags read; train_outer.py's role-named flags (distillation's expert /
 * learner, deliberation's reflector / toolcaller) land on the right agents; --enable_thinking reaches the
 * chat template in both loops. Tiny upstream-layout systems (scripts/tiny-system/tiny-mas.ts), CPU, one or two steps.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafetensorsFile } from '../../src/formats/safetensors';
import { fileSource } from '../../src/formats/sources';
import { holdsLinksOnly, resolveRoleFolder } from '../../src/mas/upstream';
import type { TrainArgs } from '../../src/runner/train-args';
import { CpuBackend } from '../../src/tensor/cpu';
import { loadTokenizerFromDir } from '../../src/tokenizer';
import { modelFileNames, placeModelFiles } from '../../src/train/model-files';
import { buildTinySystem } from '../../scripts/tiny-system/tiny-mas';
import { runAsk } from '../mas/ask-util';
import { trainInProcess as train } from '../util/rmas';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-save-dir-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const cpu = new CpuBackend('f32');
const rowsFile = join(tmp, 'rows.jsonl');
/** Every style's columns, so that any role of any style trains on it. */
const ROW = {
  question: 'What is 3 + 4?', plan: 'Step 1: add.', refined_plan: 'Step 1: add 3 and 4.', answer: '7. \\boxed{7}',
  distill_expert: 'Step 1: add the numbers.', distill_learner: 'It is 7. \\boxed{7}',
  deliberation_reflector: 'Check by counting.', deliberation_toolcaller: 'Counting gives 7. \\boxed{7}',
};
beforeAll(() => writeFileSync(rowsFile, [ROW, ROW].map((r) => JSON.stringify(r)).join('\n')));

async function decodedIds(file: string, key: string, dir: string): Promise<string[]> {
  const f = await SafetensorsFile.open(fileSource(file));
  const t = await f.read(key);
  await f.close();
  const v = Array.from(new Int32Array(t.bytes.slice().buffer));
  const tok = await loadTokenizerFromDir(dir);
  const T = t.shape.length === 2 ? t.shape[1] : t.shape[0];
  return Array.from({ length: v.length / T }, (_, b) => tok.decode(v.slice(b * T, (b + 1) * T)));
}

const MODEL_FILES = ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'];
const EMPTY_THINK = '<think>\n\n</think>';

describe('train-inner --save_dir: a whole role folder', () => {
  it("holds the model's files hard-linked (byte-identical, same inode) beside the links, in checkpoint-N too; " +
    "rmas ask --ckpt_override reads it as the role's model folder", async () => {
    const sys = await buildTinySystem('sequential_light', join(tmp, 'seq'));
    const src = sys.roles.planner;
    const save = join(tmp, 'planner-trained');
    const r = await train('inner', {
      model_name_or_path: src,
      mas_design: 'sequential',
      mas_role: 'planner',
      dataset_name: rowsFile,
      save_dir: save,
      max_steps: '2',
      save_steps: '1',
      batch_size: '2',
      seed: '3',
    });
    expect(r.error).toBeNull();
    expect(r.err).toContain(`with the model files of ${resolve(src)} (linked)`);
    for (const dir of [save, join(save, 'checkpoint-1')]) {
      const names = readdirSync(dir);
      for (const f of MODEL_FILES) {
        expect(readFileSync(join(dir, f)).equals(readFileSync(join(src, f))), `${dir} ${f}`).toBe(true);
        expect(statSync(join(dir, f)).ino, `${dir} ${f} is a hard link`).toBe(statSync(join(src, f)).ino);
      }
      // the source's own links stay behind: the trained adapter.pt is the folder's inner link
      expect(names.filter((n) => /^adapter\(|innerlink_config/.test(n))).toEqual([]);
      const args = JSON.parse(readFileSync(join(dir, 'train_args.json'), 'utf8')) as {
        model_files: { source: string; method: string; files: Record<string, string> };
      };
      expect(args.model_files).toEqual({
        source: resolve(src),
        method: 'linked',
        files: Object.fromEntries(MODEL_FILES.map((f) => [f, 'linked'])),
      });
    }
    expect((await resolveRoleFolder('planner', save, 'math', { requireInner: true })).innerPath).toBe(join(save, 'adapter.pt'));
    expect(await holdsLinksOnly(save)).toBe(false);

    const asked = await runAsk(
      {
        style: 'sequential_light',
        question: 'What is 2 + 2?',
        ckpt_override: [`planner=${save}`, `critic=${sys.roles.critic}`, `solver=${sys.roles.solver}`, `outer=${sys.outer}`],
        latent_length: '2',
        greedy: true,
        max_new_tokens: '3',
        num_recursive_rounds: '1',
        json: true,
      },
      cpu,
    );
    expect(asked.error).toBeNull();
    expect(asked.err).toContain(`planner: loading ${save}\n`); // its own model folder, not "with the inner link of"

    // a folder of the link files alone is still read as links only (the role keeps the style's model)
    const links = join(tmp, 'links-only');
    mkdirSync(links);
    for (const f of ['adapter.pt', 'adapter.safetensors', 'adapter_config.json']) cpSync(join(save, f), join(links, f));
    expect(await holdsLinksOnly(links)).toBe(true);
  });

  it('copies where the filesystem refuses a hard link; an existing same file stays, another is replaced by a rename; ' +
    'shards come with their index', () => {
    const src = join(tmp, 'sharded');
    mkdirSync(src);
    writeFileSync(join(src, 'config.json'), '{"model_type":"llama"}');
    writeFileSync(join(src, 'tokenizer.json'), '{}');
    writeFileSync(
      join(src, 'model.safetensors.index.json'),
      JSON.stringify({
        weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors', c: 'model-00001-of-00002.safetensors' },
      }),
    );
    writeFileSync(join(src, 'model-00001-of-00002.safetensors'), 'shard one');
    writeFileSync(join(src, 'model-00002-of-00002.safetensors'), 'shard two');
    writeFileSync(join(src, 'adapter.pt'), 'not a model file');
    expect(modelFileNames(src)).toEqual([
      'config.json',
      'tokenizer.json',
      'model.safetensors.index.json',
      'model-00001-of-00002.safetensors',
      'model-00002-of-00002.safetensors',
    ]);

    const dest = join(tmp, 'copied');
    mkdirSync(dest);
    const exdev = () => {
      throw Object.assign(new Error('cross-device link'), { code: 'EXDEV' });
    };
    const placed = placeModelFiles(src, dest, exdev);
    expect(placed.method).toBe('copied');
    for (const f of modelFileNames(src)) {
      expect(readFileSync(join(dest, f)).equals(readFileSync(join(src, f))), f).toBe(true);
      expect(statSync(join(dest, f)).ino).not.toBe(statSync(join(src, f)).ino);
    }
    expect(readdirSync(dest).sort()).toEqual([...modelFileNames(src)].sort()); // no adapter.pt, no leftover partial file

    const linked = join(tmp, 'linked');
    mkdirSync(linked);
    writeFileSync(join(linked, 'config.json'), 'an older config');
    const held = join(tmp, 'held-config');
    cpSync(join(linked, 'config.json'), held);
    const first = placeModelFiles(src, linked);
    expect(first.method).toBe('linked');
    expect(readFileSync(join(linked, 'config.json'), 'utf8')).toBe('{"model_type":"llama"}');
    expect(readFileSync(held, 'utf8')).toBe('an older config');
    const again = placeModelFiles(src, linked, exdev); // already the same files: nothing is linked or copied again
    expect(again.method).toBe('linked');

    // a write that fails half way (the disk full): the error goes up, the half file does not stay
    const full = join(tmp, 'full');
    mkdirSync(full);
    const half = (_from: string, to: string) => {
      writeFileSync(to, 'half');
      throw Object.assign(new Error(`ENOSPC: no space left on device, link '${to}'`), { code: 'ENOSPC' });
    };
    expect(() => placeModelFiles(src, full, half)).toThrow(/^ENOSPC: no space left on device, link '.*\/\.config\.json\.rmas-partial'$/);
    expect(readdirSync(full)).toEqual([]);
  });
});

describe('train-outer: upstream\'s role-named flags and --enable_thinking', () => {
  it("distillation: --expert_* / --learner_* are agent1 / agent2 (an inner save_dir as the expert's model folder); " +
    'thinking reaches the template', async () => {
    const sys = await buildTinySystem('distillation', join(tmp, 'distill'));
    const expert = join(tmp, 'expert-trained');
    const inner = await train('inner', {
      model_name_or_path: sys.roles.expert,
      mas_design: 'distillation',
      mas_role: 'distill_expert',
      dataset_name: rowsFile,
      save_dir: expert,
      max_steps: '1',
      batch_size: '2',
      enable_thinking: '1',
      dump_batches: join(tmp, 'expert-dump'),
    });
    expect(inner.error).toBeNull();
    // the empty think block of enable_thinking false is gone from what the inner loop trained on
    for (const t of await decodedIds(join(tmp, 'expert-dump', 'step-1.safetensors'), 'input_ids', expert))
      expect(t).not.toContain(EMPTY_THINK);

    const outer = async (save: string, extra: TrainArgs) =>
      train('outer', {
        style: 'distillation',
        dataset_name: rowsFile,
        save_dir: save,
        max_steps: '1',
        num_recursive_rounds: '1',
        max_latent_tokens: '2',
        batch_size: '1',
        dump_batches: `${save}-dump`,
        ...extra,
      });
    const on = join(tmp, 'distill-outer');
    const r = await outer(on, {
      expert_model_name_or_path: expert,
      learner_model_name_or_path: sys.roles.learner,
      learner_inner_aligner_path: sys.roles.learner,
      enable_thinking: '1',
    });
    expect(r.error).toBeNull();
    // expert qwen3_5-tiny (48) → learner qwen3_5-tied-tiny (40): swapped roles would read 40→48
    expect(r.err).toContain('outer links outer_el 48→40, outer_le 40→48');
    const cfg = JSON.parse(readFileSync(join(on, 'outer_adapter_config.json'), 'utf8')) as Record<string, unknown>;
    expect([
      cfg.agent1_model_name_or_path,
      cfg.agent2_model_name_or_path,
      cfg.agent1_inner_aligner_path,
      cfg.agent2_inner_aligner_path,
      cfg.enable_thinking,
    ]).toEqual([expert, sys.roles.learner, null, sys.roles.learner, 1]);
    const off = join(tmp, 'distill-outer-off');
    expect(
      (await outer(off, { agent1_model_name_or_path: sys.roles.expert, agent2_model_name_or_path: sys.roles.learner })).error,
    ).toBeNull();
    const key = 'sample0.round1.learner.ids.1'; // after the slot: the rest of the prompt and the assistant header
    const [withThink] = await decodedIds(join(`${off}-dump`, 'step-1.safetensors'), key, sys.roles.learner);
    const [noThink] = await decodedIds(join(`${on}-dump`, 'step-1.safetensors'), key, sys.roles.learner);
    expect(withThink).toContain(EMPTY_THINK);
    expect(noThink).not.toContain(EMPTY_THINK);

    const both = await outer(join(tmp, 'x'), {
      expert_model_name_or_path: expert,
      agent1_model_name_or_path: expert,
      learner_model_name_or_path: sys.roles.learner,
    });
    expect(both.error).toMatchObject({
      name: 'UsageError',
      message:
        '--expert_model_name_or_path and --agent1_model_name_or_path are the same flag (expert is agent 1 of distillation); give one of them',
    });
  });

  it('deliberation: --reflector_* / --toolcaller_* are agent1 / agent2; a role the style lacks is a usage error', async () => {
    const sys = await buildTinySystem('deliberation', join(tmp, 'delib'));
    const save = join(tmp, 'delib-outer');
    const r = await train('outer', {
      style: 'deliberation',
      reflector_model_name_or_path: sys.roles.reflector,
      toolcaller_model_name_or_path: sys.roles.toolcaller,
      reflector_inner_aligner_path: join(sys.roles.reflector, 'adapter.pt'),
      toolcaller_inner_aligner_path: join(sys.roles.toolcaller, 'adapter.pt'),
      dataset_name: rowsFile,
      save_dir: save,
      max_steps: '1',
      num_recursive_rounds: '1',
      max_latent_tokens: '2',
      batch_size: '1',
    });
    expect(r.error).toBeNull();
    const cfg = JSON.parse(readFileSync(join(save, 'outer_adapter_config.json'), 'utf8')) as Record<string, unknown>;
    expect([
      cfg.agent1_model_name_or_path,
      cfg.agent2_model_name_or_path,
      cfg.agent1_inner_aligner_path,
      cfg.agent2_inner_aligner_path,
      cfg.enable_thinking,
    ]).toEqual([
      sys.roles.reflector,
      sys.roles.toolcaller,
      join(sys.roles.reflector, 'adapter.pt'),
      join(sys.roles.toolcaller, 'adapter.pt'),
      0,
    ]);
    expect(readdirSync(save).filter((f) => f.endsWith('.pt')).sort()).toEqual(['outer_rt.pt', 'outer_tr.pt']);

    const wrong = await train('outer', {
      style: 'deliberation',
      expert_model_name_or_path: sys.roles.reflector,
      dataset_name: rowsFile,
      save_dir: join(tmp, 'y'),
    });
    expect(wrong.error).toMatchObject({
      name: 'UsageError',
      message:
        '--expert_model_name_or_path names the role expert, which style deliberation does not have; its roles are reflector (--agent1_model_name_or_path), toolcaller (--agent2_model_name_or_path)',
    });
  });
});
