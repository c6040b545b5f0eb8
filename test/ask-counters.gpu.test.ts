/**
 * ask()'s counters on WebGPU (Dawn in Node), with the committed tiny system: per latent step, the mean of what
 * one latent step of each rolling-out role issues when counted by hand (Inner(h) through the model on its cache,
 * the state appended to H); per decoded token, what generate() counts for the final agent.
 */
import { describe, expect, it } from 'vitest';
import { F, noGrad } from '../src/autograd';
import { counterDelta, stepSubmits } from '../src/gpu/counters';
import { prefill } from '../src/mas/rollout';
import { ask } from '../src/mas/ask';
import { loadSystem } from '../src/mas/system-folders';
import { stepWeightBytes } from '../src/model';
import { tidy } from '../src/tensor/scope';
import { freshGpuBackend } from './util/gpu';

describe('ask counters (WebGPU)', () => {
  it('per latent step and per decoded token, as counted by hand', async () => {
    const gpu = await freshGpuBackend();
    const system = await loadSystem('tiny_sequential', { backend: gpu, task: 'math' });
    try {
      const m = 4;
      const r = await ask(system, {
        question: 'Eva has 4 eggs. She gives away 1. How many eggs does Eva have now?',
        rounds: 1,
        latentSteps: m,
        mode: 'latent',
        sampling: { greedy: true },
        maxNewTokens: 8,
        answerRetry: false,
      });
      const latent = r.counters!.latent!;
      // one round: the planner and the critic roll out m steps each; the solver decodes
      expect(latent.steps).toBe(2 * (m - 1));
      const byHand = (role: string) => {
        const a = system.agents.get(role)!;
        const d = a.decoder.config.hidden;
        const cache = a.decoder.newCache(8);
        const H = gpu.zeros([m, 1, d]);
        const h0 = noGrad(() => prefill(a.decoder, [gpu.fromValues(Array.from({ length: 3 * d }, (_, i) => Math.sin(i)), [3, d])], cache));
        const before = gpu.counters();
        const h1 = noGrad(() => tidy(() => a.decoder.forward({ inputsEmbeds: a.inner!.forward(h0), cache }).hidden));
        noGrad(() => tidy(() => F.kvAppend(H, h1.reshape([1, 1, d]), 1)));
        const c = counterDelta(before, gpu.counters());
        [h0, h1, H].forEach((t) => t.dispose());
        cache.dispose();
        return c;
      };
      const [p, c] = [byHand('planner'), byHand('critic')];
      expect(latent.dispatches / latent.steps).toBe((p.dispatches + c.dispatches) / 2);
      expect(latent.weightBytes / latent.steps).toBe((p.weightBytes + c.weightBytes) / 2);
      expect(latent.readbacks).toBe(0); // a rollout never reads back
      const decode = r.counters!.decode!;
      expect(decode.steps).toBe(r.stages.at(-1)!.tokens - 2);
      expect([decode.submits / decode.steps, decode.readbacks / decode.steps]).toEqual([stepSubmits(decode.dispatches / decode.steps), 1]);
      expect(decode.weightBytes / decode.steps).toBe(stepWeightBytes(system.agents.get('solver')!.decoder.weights));
    } finally {
      system.dispose();
      gpu.ctx.device.destroy();
    }
  }, 120_000);
});
