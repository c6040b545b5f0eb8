/**
 * `rmas train-inner` / `rmas train-outer` in-process (trainCmd, as bin/rmas.js runs it) on the tiny
 * models: upstream's save_dir layout and manifests, --log_jsonl and --dump_batches hold exactly what was
 * trained on, --resume continues to the same bytes as an uninterrupted run, a trained outer-links folder
 * is what `rmas ask --ckpt_override outer=DIR` reads, and bad input gets named errors.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SafetensorsFile } from '../../src/formats/safetensors';
import { fileSource } from '../../src/formats/sources';
import { linkFileBytes, readLinkFile } from '../../src/mas/upstream';
import { trainCmd } from '../../src/runner/train-cmd';
import type { TrainArgs } from '../../src/runner/train-args';
import { CpuBackend } from '../../src/tensor/cpu';
import { loadTokenizerFromDir } from '../../src/tokenizer';
import { innerExample } from '../../src/train/data';
import { overridesFor, runAsk } from '../mas/ask-util';
import { arithmeticRows } from './fixtures';
import { trainInProcess as train } from '../util/rmas';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-train-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const rowsFile = join(tmp, 'rows.jsonl');
const rows = arithmeticRows(6);
writeFileSync(rowsFile, rows.map((r) => JSON.stringify(r)).join('\n'));

const innerArgs = (save: string, extra: TrainArgs = {}): TrainArgs => ({
  model_name_or_path: 'models/tiny/qwen3-tiny', mas_design: 'sequential', mas_role: 'planner', dataset_name: rowsFile, save_dir: save,
  max_steps: '4', batch_size: '2', adapter_lr: '1e-2', warmup_steps: '1', seed: '3', ...extra,
});

async function tensors(path: string) {
  const f = await SafetensorsFile.open(fileSource(path));
  const out = new Map<string, { shape: number[]; values: number[] }>();
  for (const n of f.names()) {
    const t = await f.read(n);
    out.set(n, { shape: [...t.shape], values: Array.from(new Int32Array(t.bytes.slice().buffer)) });
  }
  await f.close();
  return out;
}

describe('rmas train-inner', () => {
  it('writes upstream\'s layout, a log per step and the exact batches it trained on', async () => {
    const save = join(tmp, 'inner');
    const r = await train(
      'inner',
      innerArgs(save, { save_steps: '2', log_jsonl: join(tmp, 'inner.jsonl'), dump_batches: join(tmp, 'inner-dump') }),
    );
    expect(r.error).toBeNull();
    // the link files beside the model's own files (a whole role folder; test/train/save-dir.test.ts checks them)
    expect(readdirSync(save).sort()).toEqual([
      'adapter.pt',
      'adapter.safetensors',
      'adapter_config.json',
      'checkpoint-2',
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'optimizer.safetensors',
      'tokenizer.json',
      'tokenizer_config.json',
      'train_args.json',
      'trainer_state.json',
    ]);
    expect(JSON.parse(readFileSync(join(save, 'adapter_config.json'), 'utf8'))).toEqual({ adapter_type: 'ln_res_adapter' });
    const args = JSON.parse(readFileSync(join(save, 'train_args.json'), 'utf8')) as Record<string, unknown>;
    expect([args.command, args.mas_role, args.adapter_lr]).toEqual(['train-inner', 'planner', '1e-2']);
    // the .pt (f32) and the safetensors hold the same values under upstream's keys
    const pt = await readLinkFile(join(save, 'adapter.pt'));
    const st = await readLinkFile(join(save, 'adapter.safetensors'));
    expect([...pt.keys()]).toEqual([
      'pre_ln.weight',
      'pre_ln.bias',
      'proj1.weight',
      'proj1.bias',
      'proj2.weight',
      'proj2.bias',
      'post_ln.weight',
      'post_ln.bias',
    ]);
    for (const [k, t] of pt) expect(Array.from(t.data)).toEqual(Array.from(st.get(k)!.data));

    const log = readFileSync(join(tmp, 'inner.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { step: number; loss: number; lr: number; batches: number[][] });
    expect(log.map((l) => l.step)).toEqual([1, 2, 3, 4]);
    expect(log[0].lr).toBe(0); // the first optimizer step runs at warm-up factor 0
    const tok = await loadTokenizerFromDir('models/tiny/qwen3-tiny');
    for (const l of log) {
      const d = await tensors(join(tmp, 'inner-dump', `step-${l.step}.safetensors`));
      const [B, T] = d.get('input_ids')!.shape;
      expect(B).toBe(2);
      for (const [b, i] of l.batches[0].entries()) {
        const ex = innerExample(tok, 'chain', 'planner', 'first', rows[i], { task: 'math', maxLength: 2048 });
        if ('skip' in ex) throw new Error(ex.skip);
        const row = (name: string) => d.get(name)!.values.slice(b * T, (b + 1) * T);
        const pad = T - ex.ids.length;
        expect(row('input_ids').slice(pad)).toEqual(ex.ids);
        expect(row('loss_mask').slice(pad)).toEqual(ex.lossMask);
        expect(row('attention_mask')).toEqual([...Array(pad).fill(0), ...Array(ex.ids.length).fill(1)]);
      }
    }
  });

  it('--resume continues to the same bytes as an uninterrupted run', async () => {
    const straight = join(tmp, 'straight');
    expect((await train('inner', innerArgs(straight))).error).toBeNull();
    const part = join(tmp, 'part');
    expect((await train('inner', innerArgs(part, { max_steps: '4', save_steps: '2' }))).error).toBeNull();
    // resume from the periodic checkpoint-2 of the second run
    const resumeFrom = join(part, 'checkpoint-2');
    const cont = join(tmp, 'cont');
    const r = await train('inner', innerArgs(cont, { resume: resumeFrom }));
    expect(r.error).toBeNull();
    expect(r.err).toContain('at step 2');
    for (const f of ['adapter.safetensors', 'optimizer.safetensors'])
      expect(readFileSync(join(cont, f)).equals(readFileSync(join(straight, f))), f).toBe(true);
  });

  it('--init_adapter starts from given weights (a torch-saved bf16 .pt); lr 0 keeps them', async () => {
    const save = join(tmp, 'init');
    const r = await train(
      'inner',
      innerArgs(save, { init_adapter: 'test/golden/tiny-mas/planner-inner.pt', adapter_lr: '0', max_steps: '1' }),
    );
    expect(r.error).toBeNull();
    const want = await readLinkFile('test/golden/tiny-mas/planner-inner.pt');
    const got = await readLinkFile(join(save, 'adapter.safetensors'));
    for (const [k, t] of want) expect(Array.from(got.get(k)!.data), k).toEqual(Array.from(t.data));
  });

  it('bad input gets named errors', async () => {
    expect((await train('inner', innerArgs(join(tmp, 'x'), { mas_role: 'poet' }))).error?.message).toMatch(
      /no trainable role 'poet'.*planner, critic, solver/,
    );
    expect((await train('inner', { ...innerArgs(join(tmp, 'x')), save_dir: undefined })).error?.name).toBe('UsageError');
    expect((await train('inner', innerArgs(join(tmp, 'x'), { dataset_name: join(tmp, 'nope.json') }))).error?.name).toBe('InvalidArgument');
    expect((await train('inner', innerArgs(join(tmp, 'x'), { enable_thinking: '2' }))).error?.message).toContain(
      '--enable_thinking 2: expected 0 or 1',
    );
    expect((await train('inner', innerArgs(join(tmp, 'x'), { model_name_or_path: join(tmp, 'no-model') }))).error?.name).toBe(
      'MissingCheckpoint',
    );
  });
});

describe('rmas train-inner under faults', () => {
  it('a diverging run stops with NonFiniteLoss before the update; every saved link is finite, and a NaN link file is refused', async () => {
    const save = join(tmp, 'diverge');
    const r = await train('inner', innerArgs(save, { adapter_lr: '1e30', warmup_steps: '0', max_steps: '20', save_steps: '1' }));
    expect(r.error?.name).toBe('NonFiniteLoss');
    const step = Number(/^step (\d+): /.exec(r.error!.message)?.[1]);
    expect(step).toBeGreaterThan(1);
    expect(r.error!.message).toMatch(/no update was made.*Lower --adapter_lr \(now 1e\+30\) or check the data/);
    expect(r.error!.message).toContain('nothing non-finite was saved');
    expect(r.error!.message).toContain(`the last checkpoint is ${join(save, `checkpoint-${step - 1}`)}`);
    // the final save never ran; every periodic one loads (non-finite values would be refused)
    expect(existsSync(join(save, 'adapter.safetensors'))).toBe(false);
    const saved = readdirSync(save).filter((d) => d.startsWith('checkpoint-'));
    expect(saved.length).toBe(step - 1);
    for (const d of saved) expect((await readLinkFile(join(save, d, 'adapter.safetensors'))).size).toBeGreaterThan(0);
    // a link file holding NaN (as a diverged run without the check wrote them) is refused by name
    const good = await readLinkFile(join(save, saved[0]!, 'adapter.safetensors'));
    const bad = new Map([...good].map(([k, t]) => [k, { shape: t.shape, data: Float32Array.from(t.data) }]));
    const [name, first] = [...bad][0]!;
    first.data[3] = Number.NaN;
    first.data[5] = Number.POSITIVE_INFINITY;
    const file = join(tmp, 'nan-adapter.safetensors');
    writeFileSync(file, linkFileBytes(bad, 'safetensors', 'f32'));
    await expect(readLinkFile(file)).rejects.toThrow(
      new RegExp(`${file}: tensor "${name}" holds 2 non-finite value\\(s\\) \\(the first, NaN, at index 3\\): it was saved by a run that diverged`),
    );
    const init = await train('inner', innerArgs(join(tmp, 'from-nan'), { init_adapter: file }));
    expect(init.error?.name).toBe('CorruptCheckpoint');
  });

  it('--save_total_limit 2 keeps the newest two checkpoint folders; a resume from them ends on the uninterrupted bytes', async () => {
    const save = join(tmp, 'limit');
    const r = await train('inner', innerArgs(save, { max_steps: '6', save_steps: '1', save_total_limit: '2' }));
    expect(r.error).toBeNull();
    expect(readdirSync(save).filter((d) => d.includes('checkpoint-')).sort()).toEqual(['checkpoint-4', 'checkpoint-5']);
    expect(r.err).toContain(`save_total_limit 2: deleted checkpoint-3`);
    const straight = join(tmp, 'limit-straight');
    expect((await train('inner', innerArgs(straight, { max_steps: '6' }))).error).toBeNull();
    const cont = join(tmp, 'limit-cont');
    expect((await train('inner', innerArgs(cont, { max_steps: '6', resume: join(save, 'checkpoint-4') }))).error).toBeNull();
    expect(readFileSync(join(cont, 'adapter.safetensors')).equals(readFileSync(join(straight, 'adapter.safetensors')))).toBe(true);
  });

  it('output paths are checked before the first step: a --save_dir that is a file, a --log_jsonl that is a folder', async () => {
    const file = join(tmp, 'a-file');
    writeFileSync(file, 'x');
    const r = await train('inner', innerArgs(file));
    expect(r.error?.message).toBe(`--save_dir ${file}: it is a file, not a folder; give a folder this run can write (nothing was trained)`);
    expect(r.err).not.toContain('loading rows');
    const log = await train('inner', innerArgs(join(tmp, 'log-ok'), { log_jsonl: tmp }));
    expect(log.error?.message).toBe(`--log_jsonl ${tmp}: it is a folder; give a file path (nothing was trained)`);
    const under = await train('inner', innerArgs(join(file, 'sub')));
    expect(under.error?.message).toMatch(/^--save_dir .*a-file\/sub: it cannot be made: .*a-file is a file \(ENOTDIR\)/);
    expect(existsSync(join(tmp, 'log-ok'))).toBe(false);
  });

  it('an unreadable commit journal in --save_dir is reported before any step, not at the first save', async () => {
    const save = join(tmp, 'journal');
    mkdirSync(save, { recursive: true });
    writeFileSync(join(save, '.ckpt-commit.json'), '{ not json');
    const r = await train('inner', innerArgs(save));
    expect(r.error?.name).toBe('CorruptCheckpoint');
    expect(r.error?.message).toMatch(/\.ckpt-commit\.json is not a version 1 commit journal/);
    expect(r.err).not.toContain('loading rows');
  });
});

describe('rmas train-outer', () => {
  it('trains a sequential system\'s outer links into a folder rmas ask reads; dumps stage segments and label positions', async () => {
    const sys = await overridesFor('sequential_light', join(tmp, 'sys'));
    const dir = (role: string) => sys.find((s) => s.startsWith(`${role}=`))!.split('=')[1];
    const save = join(tmp, 'outer');
    const r = await train('outer', {
      style: 'sequential',
      agent1_model_name_or_path: dir('planner'),
      agent2_model_name_or_path: dir('critic'),
      agent3_model_name_or_path: dir('solver'),
      dataset_name: rowsFile,
      save_dir: save,
      max_steps: '2',
      num_recursive_rounds: '2',
      max_latent_tokens: '4',
      outer_lr: '1e-2',
      dump_batches: join(tmp, 'outer-dump'),
    });
    expect(r.error).toBeNull();
    expect(readdirSync(save).filter((f) => f.endsWith('.pt')).sort()).toEqual(['outer_12.pt', 'outer_23.pt', 'outer_31.pt']);
    const cfg = JSON.parse(readFileSync(join(save, 'outer_adapter_config.json'), 'utf8')) as Record<string, unknown>;
    expect([cfg.outer_12_in_dim, cfg.outer_12_out_dim, cfg.outer_23_out_dim, cfg.outer_31_in_dim, cfg.num_recursive_rounds]).toEqual([
      48, 64, 32, 32, 2,
    ]);
    const d = await tensors(join(tmp, 'outer-dump', 'step-1.safetensors'));
    const critic = (k: string) => d.get(`sample0.round1.critic.${k}`)!;
    expect(critic('slot_lens').values).toEqual([4]);
    const T = critic('ids.0').shape[0] + 4 + critic('ids.1').shape[0] + critic('target').shape[0];
    expect(critic('label_positions').values).toEqual(
      Array.from({ length: critic('target').shape[0] }, (_, k) => T - critic('target').shape[0] + k),
    );
    expect([...d.keys()].filter((k) => k.startsWith('sample0.round2.planner.')).sort())
      .toEqual(['ids.0', 'ids.1', 'label_positions', 'slot_lens', 'target'].map((k) => `sample0.round2.planner.${k}`));

    // --init_outer continues from that folder: with lr 0 the links come back unchanged
    const again = join(tmp, 'outer-again');
    const r2 = await train('outer', {
      style: 'sequential',
      agent1_model_name_or_path: dir('planner'),
      agent2_model_name_or_path: dir('critic'),
      agent3_model_name_or_path: dir('solver'),
      dataset_name: rowsFile,
      save_dir: again,
      max_steps: '1',
      num_recursive_rounds: '1',
      outer_lr: '0',
      init_outer: save,
    });
    expect(r2.error).toBeNull();
    for (const k of ['outer_12', 'outer_23', 'outer_31']) {
      const [a, b] = [await readLinkFile(join(save, `${k}.safetensors`)), await readLinkFile(join(again, `${k}.safetensors`))];
      for (const [n, t] of a) expect(Array.from(b.get(n)!.data), `${k} ${n}`).toEqual(Array.from(t.data));
    }
    const asked = await runAsk(
      {
        style: 'sequential_light',
        question: 'What is 2 + 2?',
        ckpt_override: [...sys.filter((s) => !s.startsWith('outer=')), `outer=${save}`],
        latent_length: '2',
        greedy: true,
        max_new_tokens: '3',
        num_recursive_rounds: '1',
        json: true,
      },
      new CpuBackend('f32'),
    );
    expect(asked.error).toBeNull();
    expect(asked.err).toContain(`outer links: loading ${save}`);

    // --outer_latents rollout: every hand-off carries --max_latent_tokens rollout states; a bad value is a usage error
    const base = {
      style: 'sequential',
      agent1_model_name_or_path: dir('planner'),
      agent2_model_name_or_path: dir('critic'),
      agent3_model_name_or_path: dir('solver'),
      dataset_name: rowsFile,
      max_steps: '1',
      num_recursive_rounds: '2',
      max_latent_tokens: '6',
    };
    const rolled = await train('outer', {
      ...base,
      save_dir: join(tmp, 'outer-rollout'),
      outer_latents: 'rollout',
      dump_batches: join(tmp, 'rollout-dump'),
    });
    expect(rolled.error).toBeNull();
    const rd = await tensors(join(tmp, 'rollout-dump', 'step-1.safetensors'));
    expect(rd.get('sample0.round1.critic.slot_lens')!.values).toEqual([6]);
    expect(rd.get('sample0.round1.solver.slot_lens')!.values).toEqual([6]);
    expect(rd.get('sample0.round2.planner.slot_lens')!.values).toEqual([6]);
    const badRole = await train('outer', { ...base, save_dir: join(tmp, 'outer-bad'), gradient_checkpointing: 'planner,poet' });
    expect(badRole.error?.message).toMatch(/--gradient_checkpointing planner,poet: .*poet is not one/);
    const bad = await train('outer', { ...base, save_dir: join(tmp, 'outer-bad'), outer_latents: 'gold' });
    expect(bad.error?.name).toBe('UsageError');
    expect(bad.error?.message).toContain('--outer_latents gold');
  });

  it('with the roles placed on three backends (--devices): the same losses and the same links as on one', async () => {
    const sys = await overridesFor('sequential_light', join(tmp, 'sys-placed'));
    const dir = (role: string) => sys.find((s) => s.startsWith(`${role}=`))!.split('=')[1];
    const args = (save: string): TrainArgs => ({
      style: 'sequential',
      agent1_model_name_or_path: dir('planner'),
      agent2_model_name_or_path: dir('critic'),
      agent3_model_name_or_path: dir('solver'),
      dataset_name: rowsFile,
      save_dir: save,
      max_steps: '2',
      num_recursive_rounds: '2',
      max_latent_tokens: '4',
      outer_lr: '1e-2',
      max_grad_norm: '1e9',
      log_jsonl: `${save}.jsonl`,
    });
    const placedOn: Record<string, CpuBackend> = {};
    const one = await train('outer', args(join(tmp, 'outer-one')));
    const placed = await train('outer', args(join(tmp, 'outer-placed')), async (roles) => {
      for (const r of roles) placedOn[r] = new CpuBackend('f32');
      return placedOn;
    });
    expect(one.error).toBeNull();
    expect(placed.error).toBeNull();
    expect(Object.keys(placedOn)).toEqual(['planner', 'critic', 'solver']);
    const losses = (f: string) => readFileSync(f, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { loss: number }).loss);
    const l1 = losses(join(tmp, 'outer-one.jsonl'));
    expect(l1).toHaveLength(2);
    // no clipping (--max_grad_norm 1e9): the same arithmetic in the same order, so the same bits
    expect(losses(join(tmp, 'outer-placed.jsonl'))).toEqual(l1);
    for (const k of ['outer_12', 'outer_23', 'outer_31']) {
      const [a, b] = [
        await readLinkFile(join(tmp, 'outer-one', `${k}.safetensors`)),
        await readLinkFile(join(tmp, 'outer-placed', `${k}.safetensors`)),
      ];
      for (const [n, t] of a) expect(Array.from(b.get(n)!.data), `${k} ${n}`).toEqual(Array.from(t.data));
    }
  });
});

describe('rmas train-outer --gradient_checkpointing auto', () => {
  /** A CPU backend that reports device memory as CudaBackend does. */
  class ReportingCpu extends CpuBackend {
    constructor(readonly free: number) { super('f32'); }
    memInfo() { return { free: this.free, total: this.free, poolUsed: 0, poolReserved: 0 }; }
  }
  async function trainOn(save: string, backend: CpuBackend, extra: TrainArgs = {}) {
    const sys = await overridesFor('sequential_light', join(tmp, 'sys-auto'));
    const dir = (role: string) => sys.find((s) => s.startsWith(`${role}=`))!.split('=')[1];
    let err = '';
    try {
      await trainCmd(
        'outer',
        {
          style: 'sequential',
          agent1_model_name_or_path: dir('planner'),
          agent2_model_name_or_path: dir('critic'),
          agent3_model_name_or_path: dir('solver'),
          dataset_name: rowsFile,
          save_dir: save,
          max_steps: '1',
          num_recursive_rounds: '2',
          max_latent_tokens: '4',
          gradient_checkpointing: 'auto',
          ...extra,
        },
        async () => backend,
        { out: () => {}, err: (s) => (err += s), tty: false },
      );
      return { err, error: null as Error | null };
    } catch (e) {
      return { err, error: e as Error };
    }
  }
  const peakOf = (err: string) => {
    const m = /planned peak ([\d.]+) (KiB|MiB|GiB) of/.exec(err)!;
    return Number(m[1]) * 1024 ** ['B', 'KiB', 'MiB', 'GiB'].indexOf(m[2]);
  };

  it("plans from the device's free memory: " +
    'nothing to recompute when it is ample, the fewest agents when tight, a named error when nothing fits', async () => {
    const ample = await trainOn(join(tmp, 'auto-ample'), new ReportingCpu(2 ** 30));
    expect(ample.error).toBeNull();
    expect(ample.err).toMatch(
      /gradient_checkpointing auto on cpu \(f32[^)]*\) \(planner, critic, solver\): recompute nothing; planned peak .* of 1\.00 GiB/,
    );
    const none = peakOf(ample.err);
    // a budget just under that peak: auto recomputes some agents, not necessarily all, and fits
    const tight = await trainOn(join(tmp, 'auto-tight'), new ReportingCpu(Math.floor(none * 0.995)));
    expect(tight.error).toBeNull();
    const picked = /recompute ([a-z, ]+); planned peak/.exec(tight.err)![1];
    expect(picked).not.toBe('nothing');
    expect(peakOf(tight.err)).toBeLessThan(none);
    // too small for any plan: TrainingMemoryExceeded before the first step, nothing saved
    const save = join(tmp, 'auto-none');
    const small = await trainOn(save, new ReportingCpu(1024));
    expect(small.error?.name).toBe('TrainingMemoryExceeded');
    expect(small.error?.message).toMatch(/^cpu \(f32[^)]*\) \(planner, critic, solver\): needs .* over the 1.00 KiB budget/);
    expect(() => readdirSync(save)).toThrow();
    // a backend that does not report its memory: a usage error that says what to give instead
    const plain = await trainOn(join(tmp, 'auto-plain'), new CpuBackend('f32'));
    expect(plain.error?.name).toBe('UsageError');
    expect(plain.error?.message).toMatch(
      /--gradient_checkpointing auto reads the device's free memory, which cpu \(f32[^)]*\) does not report; give 0, 1 or the roles/,
    );
  });
});
