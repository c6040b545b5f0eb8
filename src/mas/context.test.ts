/**
 * ask() refuses a question that cannot fit its agents' context (max_position_embeddings, 512 in the committed tiny
 * system) with ContextTooLong before any forward pass: no rollout or generation is started. Once the question alone
 * is too long; once it fits alone but the first stage's prompt and its latent steps do not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContextTooLong } from '../errors';
import { CpuBackend } from '../tensor/cpu';
import { type AskEngine, SINGLE_ENGINE, ask } from './ask';
import { loadSystem } from './system-folders';
import type { MasSystem } from './system';

let system: MasSystem;
beforeAll(async () => {
  system = await loadSystem('tiny_sequential', { backend: new CpuBackend('f32'), task: 'math' });
});
afterAll(() => system?.dispose());

/** SINGLE_ENGINE, counting the rollouts and generations it is asked for. */
function countingEngine() {
  const calls = { rollout: 0, generate: 0 };
  const engine: AskEngine = {
    rollout: (...a) => (calls.rollout++, SINGLE_ENGINE.rollout(...a)),
    generate: (...a) => (calls.generate++, SINGLE_ENGINE.generate(...a)),
  };
  return { calls, engine };
}

const opts = { sampling: { greedy: true }, maxNewTokens: 8, rounds: 1, latentSteps: 32, answerRetry: false } as const;
const tokens = (role: string, text: string) => system.agents.get(role)!.tokenizer.encode(text, { addSpecialTokens: false }).length;

describe('ask: the context', () => {
  it('a question longer than the context is ContextTooLong naming its tokens and the context, and nothing runs', async () => {
    const question = 'Tom has 6 pens and gives away 3 of them. '.repeat(120);
    const n = tokens('planner', question);
    expect(n).toBeGreaterThan(512);
    const { calls, engine } = countingEngine();
    const t0 = performance.now();
    const e = await ask(system, { ...opts, question }, engine).then(() => null, (x: unknown) => x as Error);
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(e).toBeInstanceOf(ContextTooLong);
    expect(e!.message).toBe(`the question is ${n} tokens, longer than the context of the planner model (max_position_embeddings 512); ` +
      'shorten the question (nothing was run)');
    expect(calls).toEqual({ rollout: 0, generate: 0 });
  });

  it('a question that fits alone but not with its prompt and latent steps is refused at that stage, before its rollout', async () => {
    let question = 'Tom has 6 pens.';
    while (tokens('planner', `${question} He has 2 more.`) < 500) question += ' He has 2 more.';
    expect(tokens('planner', question)).toBeLessThanOrEqual(512);
    const { calls, engine } = countingEngine();
    const e = await ask(system, { ...opts, question }, engine).then(() => null, (x: unknown) => x as Error);
    expect(e).toBeInstanceOf(ContextTooLong);
    const m = new RegExp(
      "^the tiny_sequential planner prompt \\([^)]*round 1\\): (\\d+) prompt tokens and 32 latent steps need (\\d+) positions, " +
        "more than the planner model's context of 512 \\(max_position_embeddings\\); shorten the question or lower the latent steps$",
    ).exec(e!.message);
    expect(m, e!.message).not.toBeNull();
    const [prompt, positions] = [Number(m![1]), Number(m![2])];
    expect(prompt).toBeGreaterThan(tokens('planner', question));
    expect(positions).toBe(prompt + 31); // the last latent step is collected, not fed
    expect(calls).toEqual({ rollout: 0, generate: 0 });
  });
});
