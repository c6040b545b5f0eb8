/**
 * Training-step benchmarks at a realistic width: one layer of Qwen3-1.7B's shape (wideLayerConfig: hidden
 * 2048, 16 heads, 8 KV heads, intermediate 6144; tiny: hidden 256) with bf16 weights (randomDecoder with
 * quantize null, the path training backpropagates through), random ids, built in memory so the cases run
 * on the bench page too. One iteration is one optimizer step on one sample:
 * - inner step: the frozen model's no-grad teacher-forced forward over 512 tokens (tiny 32), the inner
 *   link's forward/backward over them (the loss masks the prompt half out), AdamW over the link;
 * - outer step: distillation with one round, i.e. a 2-agent chain expert → learner of two such models with
 *   frozen inner links and one trainable outer link 2048 → 2048: the expert runs no-grad on 256 tokens
 *   (tiny 16), the first 80 (tiny 4) latents of Outer(Inner(H)) over its 128-token (tiny 8) answer fill the
 *   learner's slot among 432 tokens (tiny 28), cross-entropy on the last 128 (tiny 8), backward through the
 *   learner into the outer link, AdamW. outerSampleStep reads the loss back once (to skip non-finite
 *   samples), so this step holds one readback, as the trainer's does.
 *
 * Accounting: a link over T rows costs 2·T·P FLOPs forward (P its parameters, matrices dominate) and about
 * twice that backward (input and weight gradients: its LayerNorms train, so every matmul passes both).
 * The learner's weights are frozen: its backward computes input gradients only, about one more forward
 * (attention's backward costs ~2x its forward, a few % of a layer at T = 512, left out). Bytes: model
 * weights once per pass (forwardCost), each link parameter read in forward and backward, its gradient
 * written, and AdamW's read of p, g, m, v and write of p, m, v (10 × 4 bytes per trained parameter);
 * activations are left out. Peak MB (WebGPU) is the buffer pool's high-water mark from before the
 * weights were made: weights, optimizer state, activations and the pool's cached buffers.
 */
import { AdamW } from '../autograd/ops/optim';
import { InnerLink, OuterLink, innerLinkParamCount, outerLinkParamCount } from '../mas/links';
import { getStyle } from '../mas/styles';
import { forwardCost, randomDecoder, wideLayerConfig } from '../model/model.bench';
import type { Backend } from '../tensor/backend';
import { type BenchCase, type BenchRun, type BenchSize, trackPeak } from '../kernels/workbench/bench';
import { Rng } from '../util/rng';
import { type InnerExample, innerPairs, innerSampleStep } from './inner';
import { type OuterAgent, type OuterStage, outerSampleStep, stageKey } from './outer';

const LR = 1e-4;
/** Bytes moved per trained link parameter in one step (see the header). */
const TRAINED_PARAM_BYTES = 10 * 4;

const randomIds = (rng: Rng, n: number, vocab: number) => Array.from({ length: n }, () => rng.int(vocab));

async function innerStep(backend: Backend, size: BenchSize): Promise<BenchRun> {
  const peak = trackPeak(backend);
  const c = wideLayerConfig(size);
  const T = size === 'full' ? 512 : 32;
  const model = await randomDecoder(c, backend, null);
  const inner = InnerLink.create(backend, c.hidden, { seed: 2 });
  const opt = new AdamW([inner.params]);
  // the assistant span is the second half: T/2 − 1 trained pairs (the last token has no next one)
  const ex: InnerExample = {
    ids: randomIds(new Rng(8), T, c.vocabSize),
    lossMask: Array.from({ length: T }, (_, t) => (t >= T / 2 ? 1 : 0)),
  };
  const pairs = innerPairs(ex);
  const P = innerLinkParamCount(c.hidden);
  const cost = forwardCost(c, model.weights, { T, past: 0, logitsRows: 0, ids: true });
  return {
    run: async () => {
      opt.zeroGrad();
      (await innerSampleStep(model, inner, ex, { cos: 1, mse: 1 }, pairs)).dispose();
      opt.gather();
      opt.step(LR).dispose();
    },
    flops: cost.flops + 3 * 2 * T * P,
    bytes: cost.bytes + TRAINED_PARAM_BYTES * P,
    tokens: T,
    ...peak,
    dispose: () => (inner.dispose(), model.dispose()),
  };
}

async function outerStep(backend: Backend, size: BenchSize): Promise<BenchRun> {
  const peak = trackPeak(backend);
  const full = size === 'full';
  const c = wideLayerConfig(size);
  const d = c.hidden;
  // expert: prompt + answer (the latents come from the answer rows); learner: two prompt pieces around the slot + answer
  const [expertPrompt, expertAnswer, latents, learnerPieces, answer] = full ? [128, 128, 80, [152, 152], 128] : [8, 8, 4, [10, 10], 8];
  const style = getStyle('distillation');
  const agents = new Map<string, OuterAgent>();
  for (const [i, role] of ['expert', 'learner'].entries()) {
    agents.set(role, {
      decoder: await randomDecoder(c, backend, null),
      inner: InnerLink.create(backend, d, { seed: 3 + i, name: `${role} inner` }).freeze(),
    });
  }
  const outer = new Map([['outer_el', OuterLink.create(backend, d, d, { seed: 5, name: 'outer_el' })]]);
  const opt = new AdamW([outer.get('outer_el')!.params]);
  const rng = new Rng(9);
  const ids = (n: number) => randomIds(rng, n, c.vocabSize);
  const sample = new Map<string, OuterStage>([
    [stageKey(0, 'expert'), { pieces: [ids(expertPrompt)], target: ids(expertAnswer) }],
    [stageKey(0, 'learner'), { pieces: learnerPieces.map(ids), target: ids(answer) }],
  ]);
  const opts = { rounds: 1, maxLatentTokens: latents, superviseFinalOnly: true, nonLastLossWeight: 0, maxLength: 4096 };
  const T1 = expertPrompt + expertAnswer;
  const T2 = latents + learnerPieces[0] + learnerPieces[1] + answer;
  const w = agents.get('learner')!.decoder.weights;
  const expert = forwardCost(c, w, { T: T1, past: 0, logitsRows: 0, ids: true });
  const learner = forwardCost(c, w, { T: T2, past: 0, logitsRows: answer, ids: true });
  const [Pin, Pout] = [innerLinkParamCount(d), outerLinkParamCount(d, d)];
  return {
    run: async () => {
      opt.zeroGrad();
      const r = await outerSampleStep(style, agents, outer, sample, opts, 1);
      // a skipped sample would time a step that trains nothing: fail the case instead
      if (!('loss' in r)) throw new Error(`outer step skipped its sample: ${r.skip} (${r.detail})`);
      opt.gather();
      opt.step(LR).dispose();
    },
    flops: expert.flops + 2 * learner.flops + 2 * expertAnswer * Pin + 3 * 2 * expertAnswer * Pout,
    bytes: expert.bytes + 2 * learner.bytes + 4 * Pin + TRAINED_PARAM_BYTES * Pout,
    tokens: T1 + T2,
    ...peak,
    dispose: () => {
      for (const a of agents.values()) (a.decoder.dispose(), a.inner.dispose());
      for (const l of outer.values()) l.dispose();
    },
  };
}

export const benches: BenchCase[] = [
  { name: 'inner step hidden 2048 bf16, 512 tokens (one layer; tiny 256, 32)', setup: (b, s) => innerStep(b, s) },
  { name: 'outer step 2 agents hidden 2048 bf16, 256 + 80 latents + 432 tokens (tiny 256, 16 + 4 + 28)', setup: (b, s) => outerStep(b, s) },
];
