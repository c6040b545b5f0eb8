/**
 * The memory planner against measurement on CpuBackend: tiny frozen bf16 decoders of every family and
 * several shapes run decoder.forward on a Tape; the planner's figures must equal, byte for byte,
 *   - the unique storages the tape holds (outputs, saved tensors and the constants it took over), and
 *   - the peak of live allocations above the starting point while the forward and backward run,
 * with and without recomputation, and for a forward run off the tape. The CPU backend allocates exactly the
 * tensors the kernels declare, so its live bytes are what a GPU backend's tensors take (workspace aside).
 */
import { describe, expect, it } from 'vitest';
import { F, Tape, noGrad } from '../autograd';
import { byteSize } from '../formats/dtype';
import { type DecoderConfig, FAMILIES, type Family, parseDecoderConfig } from '../model/config';
import { outerLinkParamCount } from '../mas/links';
import { Decoder } from '../model/decoder';
import { tinyCheckpoint, tinyConfig, tinyTensors } from '../testing/model';
import { loadDecoderWeights } from '../model/weights';
import { CpuBackend } from '../tensor/cpu';
import { tidy } from '../tensor/scope';
import type { Storage, Tensor } from '../tensor/tensor';
import { Rng } from '../util/rng';
import { type AgentForward, layerActivationFloats, planPlacedMemory, planTrainingMemory, weightBytes, weightParamCount } from './memory';

/** Live bytes of a CpuBackend's tensors (views share their array's buffer) and their peak. */
class Meter {
  live = 0;
  peak = 0;
  private readonly refs = new Map<ArrayBufferLike, number>();
  private readonly seen = new WeakSet<Tensor>();

  constructor(readonly be: CpuBackend) {
    const b = be as unknown as Record<string, (...a: unknown[]) => unknown>;
    for (const m of ['run', 'fromValues', 'fromBytes', 'zeros', 'reshape', 'view']) {
      const orig = b[m].bind(be);
      b[m] = (...a: unknown[]) => {
        const r = orig(...a) as Tensor | Tensor[];
        for (const t of Array.isArray(r) ? r : [r]) this.add(t);
        return r;
      };
    }
    b.release = (s: unknown) => this.release(s as Storage);
  }

  private add(t: Tensor) {
    if (this.seen.has(t)) return;
    this.seen.add(t);
    const buf = this.be.data(t).buffer;
    const n = this.refs.get(buf) ?? 0;
    this.refs.set(buf, n + 1);
    if (n) return;
    this.live += buf.byteLength;
    this.peak = Math.max(this.peak, this.live);
  }

  private release(s: Storage) {
    if (s.kind !== 'cpu') return;
    const buf = s.data.buffer;
    const n = this.refs.get(buf);
    if (n === undefined) return;
    if (n > 1) this.refs.set(buf, n - 1);
    else {
      this.refs.delete(buf);
      this.live -= buf.byteLength;
    }
  }

  /** Starts a measurement: returns the current live bytes, the base the peak is read against. */
  mark(): number {
    this.peak = this.live;
    return this.live;
  }
}

const cpu = new CpuBackend('f32');
const meter = new Meter(cpu);

/** Unique storages a tape holds, each at its largest view: recorded outputs, saved tensors and taken-over constants. */
function tapeBytes(tape: Tape): number {
  const owned = (tape as unknown as { owned: Tensor[] }).owned;
  const sizes = new Map<ArrayBufferLike, number>();
  for (const t of [...tape.nodes.flatMap((n) => [...n.outputs, ...n.saved]), ...owned]) {
    const key = cpu.data(t).buffer;
    sizes.set(key, Math.max(sizes.get(key) ?? 0, byteSize(t.dtype, t.shape)));
  }
  return [...sizes.values()].reduce((a, b) => a + b, 0);
}

async function frozenDecoder(config: DecoderConfig) {
  return new Decoder(config, await loadDecoderWeights(config, await tinyCheckpoint(tinyTensors(config, 7)), cpu));
}

function embeds(config: DecoderConfig, T: number, seed: number): Tensor {
  const rng = new Rng(seed);
  const x = cpu.fromValues(Array.from({ length: T * config.hidden }, () => rng.normal() * 0.5), [T, config.hidden]);
  x.requiresGrad = true;
  return x;
}

const forwardOf = (config: DecoderConfig, T: number, R: number, recorded = true): AgentForward =>
  ({ name: 'agent', config, weightBytesPerParam: 2, tokens: T, recorded, logitRows: R });

const planOne = (f: AgentForward, recompute: boolean) =>
  planTrainingMemory({ agents: [f], links: [], recompute: recompute ? 'all' : 'none', budgetBytes: 2 ** 40 }).forwards[0];

/** Rows of the hidden states an unscored forward's test loss reads. */
const HANDOFF = 2;

/** Shapes that move every term: q wider and narrower than hidden, MHA and GQA, I below and above hidden, one to three layers. */
const SHAPES: { over: Record<string, unknown>; T: number; R: number }[] = [
  { over: {}, T: 7, R: 3 },
  {
    over: { hidden_size: 48, num_attention_heads: 6, num_key_value_heads: 3, head_dim: 16, intermediate_size: 40, num_hidden_layers: 3 },
    T: 5,
    R: 5,
  },
  {
    over: { hidden_size: 24, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 12, intermediate_size: 96, num_hidden_layers: 1 },
    T: 11,
    R: 4,
  },
  {
    over: { hidden_size: 64, num_attention_heads: 8, num_key_value_heads: 8, head_dim: 4, intermediate_size: 32, num_hidden_layers: 2 },
    T: 3,
    R: 0,
  },
  // a vocabulary wide enough that the logits and their gradient set the backward peak
  { over: { vocab_size: 3000, num_hidden_layers: 2 }, T: 6, R: 5 },
  // and every row scored: no rows gathered, lm_head's input gradient is every row's
  { over: { vocab_size: 2000, num_hidden_layers: 1 }, T: 4, R: 4 },
];

/**
 * Peaks (a backward's, a forward's off the tape) are planned exactly for attention decoders. For Qwen3.5's hybrid
 * the plan bounds them: its Gated DeltaNet layer's backward transient is an estimate from above (the rule's
 * column and row parts, the conv's gradients), so the plan must lie above the measurement and within a quarter of
 * it. What the tape holds is exact for every family.
 */
function expectPeak(config: DecoderConfig, measured: number, planned: number, what: string) {
  if (!config.deltaNet) {
    expect(measured, what).toBe(planned);
    return;
  }
  expect(planned, `${what}: the plan bounds the measurement`).toBeGreaterThanOrEqual(measured);
  expect(planned / measured, `${what}: planned ${planned} against ${measured} measured`).toBeLessThan(1.25);
}

describe.each(FAMILIES)('training memory plan against a CPU tape, %s', (family: Family) => {
  it.each(SHAPES.map((s, i) => [i, s] as const))('shape %i: tape bytes and backward peak', async (_, { over, T, R }) => {
    // Qwen3.5 rotates a quarter of each head: half of these small heads instead, an even number of dims
    const rope = { rope_parameters: { rope_type: 'default', rope_theta: 1e7, partial_rotary_factor: 0.5 } };
    const config = tinyConfig(family, family === 'qwen3_5' ? { ...over, ...rope } : over);
    const decoder = await frozenDecoder(config);
    const rows = Array.from({ length: R }, (_, i) => T - R + i);
    for (const recompute of [false, true]) {
      const x = embeds(config, T, 3);
      const base = meter.mark();
      const tape = new Tape();
      const loss = tidy(() => tape.run(() => {
        const out = decoder.forward({ inputsEmbeds: x, recompute, logits: R ? rows : false });
        if (R) return F.crossEntropy(out.logits!, cpu.fromValues(rows.map((r) => (r * 5) % config.vocabSize), [R], 'i32'));
        // unscored: a loss on the last rows of the hidden states, as a hand-off to a link passes a gradient back
        return F.crossEntropy(F.sliceRows(out.hidden, T - HANDOFF, HANDOFF), cpu.fromValues([0, 1], [HANDOFF], 'i32'));
      }));
      const held = tapeBytes(tape);
      await tape.backward(loss);
      const peak = meter.peak - base;
      tape.dispose();
      x.dispose();
      const plan = planOne(forwardOf(config, T, R), recompute);
      const activations = recompute ? plan.activationsRecompute : plan.activationsFull;
      // unscored, the test's hand-off loss is on the tape: the slice, cross-entropy's loss, logsumexp, scale, and labels
      const own = R ? plan.logits : 4 * (HANDOFF * config.hidden + HANDOFF + 1 + 1 + HANDOFF);
      expect(held, `held, recompute ${recompute}`).toBe(activations + own);
      expectPeak(config, peak, activations + own + plan.backwardTransient, `backward peak, recompute ${recompute}`);
    }
    decoder.dispose();
  });

  it('a forward off the tape peaks with one layer\'s intermediates, its inputs built as outer.ts builds them', async () => {
    const config = tinyConfig(family, { num_hidden_layers: 3, intermediate_size: 48 });
    const decoder = await frozenDecoder(config);
    const T = 9;
    const base = meter.mark();
    noGrad(() => tidy(() => {
      const piece = (ids: number[]) => decoder.embed(cpu.fromValues(ids, [ids.length], 'i32'));
      decoder.forward({ inputsEmbeds: F.concatRows([piece([1, 2, 3, 4]), piece([5, 6, 7, 8, 9])]) });
    }));
    // the token ids (i32, 9 elements) are the test's, not the planner's
    expectPeak(config, meter.peak - base - 4 * T, planOne(forwardOf(config, T, 0, false), false).forwardTransient, 'off-tape peak');
    decoder.dispose();
    // with a wide vocabulary scored on every row, the logits at the end set the peak instead of a layer
    const wide = tinyConfig(family, { num_hidden_layers: 2, intermediate_size: 48, vocab_size: 2000 });
    const dw = await frozenDecoder(wide);
    const b2 = meter.mark();
    noGrad(() => tidy(() => {
      const piece = (ids: number[]) => dw.embed(cpu.fromValues(ids, [ids.length], 'i32'));
      dw.forward({ inputsEmbeds: F.concatRows([piece([1, 2, 3, 4]), piece([5, 6, 7, 8, 9])]), logits: 'all' });
    }));
    const plan = planOne(forwardOf(wide, T, T, false), false).forwardTransient;
    expect(plan).toBeGreaterThan(4 * T * 2000);
    expectPeak(wide, meter.peak - b2 - 4 * T, plan, 'off-tape peak with wide logits');
    dw.dispose();
  });

  it('a recorded forward holds its inputs: the embedded pieces, the latents and their concatenation', async () => {
    const config = tinyConfig(family);
    const decoder = await frozenDecoder(config);
    const [T, L, R] = [10, 3, 4];
    for (const recompute of [false, true]) {
      const latents = embeds(config, L, 5);
      const tape = new Tape();
      const loss = tidy(() => tape.run(() => {
        const piece = (ids: number[]) => noGrad(() => decoder.embed(cpu.fromValues(ids, [ids.length], 'i32')));
        // the latents as a link's output: recorded on the tape
        const x = F.concatRows([piece([1, 2, 3]), F.scale(latents, 1), piece([4, 5, 6, 7])]);
        const out = decoder.forward({ inputsEmbeds: x, recompute, logits: [5, 6, 7, 8] });
        return F.crossEntropy(out.logits!, cpu.fromValues([1, 2, 3, 4], [R], 'i32'));
      }));
      const held = tapeBytes(tape);
      await tape.backward(loss);
      tape.dispose();
      latents.dispose();
      const plan = planOne(forwardOf(config, T, R), recompute);
      expect(plan.held - plan.inputs).toBe(recompute ? plan.activationsRecompute : plan.activationsFull);
      expect(held).toBe(plan.held + plan.logits);
    }
    decoder.dispose();
  });
});

/** config.json of the realistic agents (dimensions of Qwen3-8B and Qwen3-4B; their embeddings tie as the real ones do). */
const qwen3 = (hidden: number, intermediate: number, tie: boolean) => parseDecoderConfig({
  model_type: 'qwen3', vocab_size: 151936, hidden_size: hidden, num_hidden_layers: 36, num_attention_heads: 32,
  num_key_value_heads: 8, head_dim: 128, intermediate_size: intermediate, rms_norm_eps: 1e-6, rope_theta: 1000000,
  max_position_embeddings: 40960, tie_word_embeddings: tie,
});
const EXPERT = qwen3(4096, 12288, false);
const LEARNER = qwen3(2560, 9728, true);
const GiB = 2 ** 30;

function distillation(recompute: 'none' | 'all' | 'auto', budgetBytes = 80 * GiB) {
  return planTrainingMemory({
    agents: [
      { name: 'expert', config: EXPERT, weightBytesPerParam: 2, tokens: 4096, recorded: true },
      { name: 'learner', config: LEARNER, weightBytesPerParam: 2, tokens: 4096, recorded: true, logitRows: 1024 },
    ],
    links: [{ name: 'outer_el', params: outerLinkParamCount(4096, 2560) }, { name: 'outer_le', params: outerLinkParamCount(2560, 4096) }],
    recompute, budgetBytes,
  });
}

describe('training memory plan', () => {
  it("HalfGemm 'split' keeps three (bf16) or two (f16) 256-byte-aligned half copies of the largest f32 GEMM operand instead of one", () => {
    const plan = (halfGemm: 'round' | 'split', extra: Partial<AgentForward> = {}) => planTrainingMemory({
      agents: [{ name: 'learner', config: LEARNER, weightBytesPerParam: 2, tokens: 4096, recorded: true, logitRows: 1024, ...extra }],
      links: [], recompute: 'none', budgetBytes: 80 * GiB, halfGemm,
    });
    const [round, split] = [plan('round'), plan('split')];
    // the largest operand: dlogits [1024 rows, vocab], larger than any [4096, hidden | q | intermediate] activation
    const copy = 2 * 1024 * LEARNER.vocabSize;
    expect(round.workspace).toBe(32 * 2 ** 20 + copy);
    expect(split.workspace).toBe(32 * 2 ** 20 + 3 * Math.ceil(copy / 256) * 256);
    expect(split.peak - round.peak).toBe(split.workspace - round.workspace);
    // f16 weights: two parts (gemm_lt.cu), whether told or read from config.json's torch_dtype
    const twoParts = 32 * 2 ** 20 + 2 * Math.ceil(copy / 256) * 256;
    expect(plan('split', { halfType: 'f16' }).workspace).toBe(twoParts);
    expect(plan('split', { config: { ...LEARNER, savedDtype: 'float16' } }).workspace).toBe(twoParts);
    expect(plan('split', { config: { ...LEARNER, savedDtype: 'float16' }, halfType: 'bf16' }).workspace).toBe(split.workspace);
    expect(plan('round', { halfType: 'f16' }).workspace).toBe(round.workspace);
    expect(() => plan('half' as 'round')).toThrow(/halfGemm must be 'round' or 'split', got "half"/);
  });

  it('sums the parts into the peak, counting an agent\'s weights once however many forwards it runs', () => {
    const c = tinyConfig('qwen3');
    const f = forwardOf(c, 8, 2);
    const one = planTrainingMemory({
      agents: [f],
      links: [
        { name: 'l', params: 100 },
        { name: 'frozen', params: 10, trainable: false },
      ],
      recompute: 'none',
      budgetBytes: 2 ** 40,
    });
    const two = planTrainingMemory({ agents: [f, f], links: [], recompute: 'none', budgetBytes: 2 ** 40 });
    expect(one.weightsTotal).toBe(2 * weightParamCount(c));
    expect(
      planTrainingMemory({ agents: [forwardOf(tinyConfig('qwen2'), 8, 0)], links: [], recompute: 'none', budgetBytes: 1 }).weightsTotal,
    ).toBe(weightBytes(tinyConfig('qwen2'), 2));
    expect(two.weightsTotal).toBe(one.weightsTotal);
    expect(one.links).toBe(100 * 24 + 10 * 4); // a frozen link holds its values only
    expect(two.activations).toBe(2 * one.activations);
    expect(two.transient).toBe(one.transient);
    for (const p of [one, two]) expect(p.peak).toBe(p.weightsTotal + p.links + p.workspace + p.activations + p.logits + p.transient);
  });

  it('the 8B expert and 4B learner at 4096 tokens: over 80 GiB without recomputation; auto recomputes the expert only', () => {
    const none = distillation('none');
    const all = distillation('all');
    const auto = distillation('auto');
    expect(none.fits).toBe(false);
    expect(none.advice).toMatch(/--gradient_checkpointing/);
    expect(all.fits).toBe(true);
    expect(all.recomputed).toEqual(['expert', 'learner']);
    expect(auto.recomputed).toEqual(['expert']);
    expect(auto.fits).toBe(true);
    expect(auto.peak).toBeGreaterThan(all.peak);
    // the expert's activations at 4096 tokens are layers × T × the per-layer formula, in f32
    expect(none.forwards[0].activationsFull).toBe(4 * (36 * 4096 * layerActivationFloats(EXPERT) + 4096 * 4096 + 4096));
  });

  it('one role per GPU: each device holds its agents\' weights, links and forwards; auto chooses per device', () => {
    const input = (recompute: 'none' | 'auto', budgetBytes = 80 * GiB) => ({
      agents: [
        { name: 'expert', config: EXPERT, weightBytesPerParam: 2, tokens: 4096, recorded: true },
        { name: 'learner', config: LEARNER, weightBytesPerParam: 2, tokens: 4096, recorded: true, logitRows: 1024 },
      ],
      links: [{ name: 'outer_el', params: outerLinkParamCount(4096, 2560) }, { name: 'outer_le', params: outerLinkParamCount(2560, 4096) }],
      recompute, budgetBytes,
    });
    const one = distillation('none');
    const links = { outer_el: 0, outer_le: 1 };
    const [e, l] = planPlacedMemory(input('none'), { expert: 0, learner: 1 }, links);
    expect([e.device, e.agents, l.device, l.agents]).toEqual([0, ['expert'], 1, ['learner']]);
    // the parts are the one-device plan's, split
    expect(e.plan.weightsTotal).toBe(one.weights.expert);
    expect(l.plan.weightsTotal).toBe(one.weights.learner);
    expect(e.plan.links + l.plan.links).toBe(one.links);
    expect(e.plan.forwards).toEqual([one.forwards[0]]);
    expect(l.plan.forwards).toEqual([one.forwards[1]]);
    expect(e.plan.activations + l.plan.activations).toBe(one.activations);
    expect(e.plan.peak).toBe(e.plan.weightsTotal + e.plan.links + e.plan.workspace + e.plan.activations + e.plan.logits + e.plan.transient);
    // 108 GiB on one 80 GiB GPU without recomputation; 62 and 46 GiB on two, each fits without it
    expect(one.fits).toBe(false);
    expect([e.plan.fits, l.plan.fits]).toEqual([true, true]);
    expect([e.plan.peak / GiB, l.plan.peak / GiB, one.peak / GiB].map((x) => Math.round(x))).toEqual([62, 46, 108]);
    // on 60 GiB GPUs, auto recomputes on the expert's GPU only
    const [ea, la] = planPlacedMemory(input('auto', 60 * GiB), { expert: 0, learner: 1 }, links);
    expect([ea.plan.recomputed, la.plan.recomputed, ea.plan.fits, la.plan.fits]).toEqual([['expert'], [], true, true]);
    // everything on one device is the one-device plan
    expect(planPlacedMemory(input('none'), { expert: 3, learner: 3 }, { outer_el: 3, outer_le: 3 })).toEqual([
      { device: 3, agents: ['expert', 'learner'], plan: one },
    ]);
    expect(() => planPlacedMemory(input('none'), { expert: 0 }, links)).toThrow(
      'planPlacedMemory: agent learner is not placed on a device',
    );
    expect(() => planPlacedMemory(input('none'), { expert: 0, learner: 1 }, { outer_el: 0 })).toThrow(
      'planPlacedMemory: link outer_le is not placed on a device',
    );
  });

  it('a budget too small even with recomputation: fits false and what to change', () => {
    const p = distillation('auto', 20 * GiB);
    expect(p.fits).toBe(false);
    expect(p.recomputed).toEqual(['expert', 'learner']);
    expect(p.advice).toMatch(/over the 20\.00 GiB budget.*even with every recorded agent recomputing.*weights.*--max_length/);
  });

  it('rejects malformed input with what is wrong', () => {
    const f = forwardOf(tinyConfig('llama'), 4, 5);
    expect(() => planTrainingMemory({ agents: [f], links: [], recompute: 'none', budgetBytes: 1 })).toThrow(
      /logitRows must be an integer in \[0, 4\]/,
    );
    expect(() => planTrainingMemory({ agents: [], links: [], recompute: 'none', budgetBytes: 1 })).toThrow(/no agents/);
    const g = { ...forwardOf(tinyConfig('llama', { num_hidden_layers: 3 }), 4, 0) };
    expect(() => planTrainingMemory({ agents: [forwardOf(tinyConfig('llama'), 4, 0), g], links: [], recompute: 'none', budgetBytes: 1 }))
      .toThrow(/listed twice with different configs/);
  });
});
