/**
 * setupTraining (src/train/setup.ts), the one place both apps set a training run up: upstream's names of styles
 * and roles, TRAIN_DEFAULTS filling what the settings leave out, the links fresh or from the loaders' weights,
 * the manifests each kind saves, epochs turned into steps, --gradient_checkpointing auto's planner run on the
 * job's samples, and everything loaded freed when a later load fails.
 */
import { describe, expect, it, vi } from 'vitest';
import { InnerLink, OuterLink, type LinkStateDict } from '../../src/mas/links';
import { getStyle } from '../../src/mas/styles';
import { readLinkFile } from '../../src/mas/upstream';
import { loadDecoderFromDir } from '../../src/model';
import type { Decoder } from '../../src/model/decoder';
import { CpuBackend } from '../../src/tensor/cpu';
import { loadTokenizerFromDir } from '../../src/tokenizer';
import { setupTraining, TRAIN_DEFAULTS, trainingRole, trainingStyle, type TrainLoaders } from '../../src/train/setup';
import { arithmeticRows } from './fixtures';

const be = new CpuBackend('f32');
const rows = arithmeticRows(6);
const MODELS: Record<string, string> = { planner: 'qwen3-tiny', critic: 'llama-tiny', solver: 'qwen2-tiny' };

/** A link's values, flat, for comparing two links. */
const values = async (l: { stateDict(): Promise<Map<string, { data: Float32Array }>> }) =>
  [...(await l.stateDict()).values()].flatMap((t) => Array.from(t.data));

/** The tiny sequential system from disk; `outer` gives starting weights by key; `decoders` collects what was loaded. */
function loaders(o: { inner?: boolean; outer?: Record<string, LinkStateDict>; decoders?: Decoder[] } = {}): TrainLoaders {
  return {
    backend: () => be,
    async decoder(role) {
      const d = await loadDecoderFromDir(`models/tiny/${MODELS[role]}`, be);
      o.decoders?.push(d);
      return d;
    },
    tokenizer: (role) => loadTokenizerFromDir(`models/tiny/${MODELS[role]}`),
    innerLink: async (role) => (o.inner === false ? null : readLinkFile(`test/golden/tiny-mas/${role}-inner.pt`)),
    outerLink: async (key) => (o.outer?.[key] ? { state: o.outer[key] } : null),
  };
}

describe('setupTraining', () => {
  it('reads upstream\'s style and role names', () => {
    expect(['sequential', 'chain', 'hie', 'distill', ' Deliberation '].map((n) => trainingStyle(n).name))
      .toEqual(['sequential_light', 'sequential_light', 'mixture', 'distillation', 'deliberation']);
    const seq = getStyle('sequential_light');
    expect(['refiner', ' Planner', 'solver'].map((r) => trainingRole(seq, r))).toEqual(['critic', 'planner', 'solver']);
    expect(trainingRole(getStyle('distillation'), 'distill_learner')).toBe('learner');
    expect(() => trainingRole(seq, 'poet')).toThrow(/no trainable role 'poet'/);
  });

  it('inner: the defaults fill what is left out; a fresh link of the seed, or the loader\'s weights', async () => {
    const style = getStyle('sequential_light');
    const fresh = await setupTraining({ kind: 'inner', style, role: 'planner', steps: 3, saveSteps: 0 }, rows, loaders({ inner: false }));
    const D = TRAIN_DEFAULTS;
    expect(fresh.loop).toEqual({
      maxSteps: 3, batchSize: D.batchSize, gradAccumSteps: D.gradAccumSteps, lr: D.lr, scheduler: D.scheduler,
      warmupSteps: D.warmupSteps, seed: D.seed, shuffle: D.shuffle, saveSteps: 0,
    });
    expect([fresh.task, fresh.maxLength, fresh.outerLoss]).toEqual(['math', 2048, null]);
    expect(fresh.manifests).toEqual({ 'adapter_config.json': { adapter_type: 'ln_res_adapter' } });
    expect(fresh.job.optimizer.opts).toMatchObject({ weightDecay: 0, maxGradNorm: 1 });
    const link = fresh.job.links.get('adapter')!;
    const same = InnerLink.create(be, 48, { seed: D.seed });
    expect(await values(link)).toEqual(await values(same));
    same.dispose();
    fresh.dispose();

    // from weights, and epochs: 6 samples in batches of 2 are 3 steps an epoch; 1.5 epochs round to 5 steps
    const started = await setupTraining(
      { kind: 'inner', style, role: 'planner', steps: { epochs: 1.5 }, saveSteps: 0, maxGradNorm: 0 }, rows, loaders(),
    );
    expect(started.job.size).toBe(6);
    expect(started.loop.maxSteps).toBe(5);
    expect(started.job.optimizer.opts.maxGradNorm).toBe(Infinity);
    const want = await readLinkFile('test/golden/tiny-mas/planner-inner.pt');
    const got = await started.job.links.get('adapter')!.stateDict();
    for (const [k, t] of want) expect(Array.from(got.get(k)!.data), k).toEqual(Array.from(t.data));
    started.dispose();
  });

  it('outer: the manifests with the loss settings and the app\'s own keys last; auto recompute planned on the samples', async () => {
    const style = getStyle('sequential_light');
    const plan = vi.fn(() => ['critic']);
    const s = await setupTraining({
      kind: 'outer', style, steps: 1, saveSteps: 0, thinking: true, seed: 4,
      outer: { rounds: 2, nonLastLossWeight: 0.3, recompute: plan, config: { agent1_model_name_or_path: 'p' } },
    }, rows, loaders());
    expect(plan).toHaveBeenCalledTimes(1);
    expect((plan.mock.calls[0] as unknown[])[0]).toHaveLength(6);
    expect(s.outerLoss).toEqual({
      rounds: 2, maxLatentTokens: 80, superviseFinalOnly: true, nonLastLossWeight: 0.3, maxLength: 4096, latents: 'teacher',
      recompute: ['critic'],
    });
    const cfg = s.manifests['outer_adapter_config.json'] as Record<string, unknown>;
    expect(Object.keys(cfg).slice(-7)).toEqual([
      'mas_shape', 'mas_task', 'num_recursive_rounds', 'supervise_final_only', 'non_last_loss_weight', 'enable_thinking',
      'agent1_model_name_or_path',
    ]);
    expect(Object.values(cfg).slice(-7)).toEqual(['chain', 'math', 2, 1, 0.3, 1, 'p']);
    expect([...s.job.links.keys()]).toEqual(style.links.map((l) => l.key));
    // fresh outer links of seed · 100 + their index
    const l23 = s.job.links.get('outer_23') as OuterLink;
    const fresh = OuterLink.create(be, l23.dIn, l23.dOut, { seed: 401 });
    expect(await values(l23)).toEqual(await values(fresh));
    fresh.dispose();

    // the loader's weights by key; a key it lacks starts fresh (of the default seed)
    const keep = await s.job.links.get('outer_12')!.stateDict();
    const from = await setupTraining({ kind: 'outer', style, steps: 1, saveSteps: 0 }, rows, loaders({ outer: { outer_12: keep } }));
    expect(await values(from.job.links.get('outer_12')!)).toEqual([...keep.values()].flatMap((t) => Array.from(t.data)));
    const l31 = from.job.links.get('outer_31') as OuterLink;
    const default31 = OuterLink.create(be, l31.dIn, l31.dOut, { seed: TRAIN_DEFAULTS.seed * 100 + 2 });
    expect(await values(l31)).toEqual(await values(default31));
    default31.dispose();
    from.dispose();
    s.dispose();
  });

  it('frees what it loaded when a later load fails', async () => {
    const decoders: Decoder[] = [];
    const l = loaders({ decoders });
    const freed: string[] = [];
    const broken: TrainLoaders = {
      ...l,
      async decoder(role, on) {
        const d = await l.decoder(role, on);
        const dispose = d.dispose.bind(d);
        d.dispose = () => (freed.push(role), dispose());
        return d;
      },
      tokenizer: (role) => (role === 'critic' ? Promise.reject(new Error('no tokenizer')) : l.tokenizer(role)),
    };
    await expect(setupTraining({ kind: 'outer', style: getStyle('sequential_light'), steps: 1, saveSteps: 0 }, rows, broken))
      .rejects.toThrow('no tokenizer');
    // the planner's and the critic's models were loaded (the critic's tokenizer failed); both are freed, last first
    expect(decoders).toHaveLength(2);
    expect(freed).toEqual(['critic', 'planner']);
  });
});
