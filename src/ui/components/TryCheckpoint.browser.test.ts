// The trained checkpoint's panel over a fake engine and registry: "before" asks the system as shipped and "after"
// the same system with the checkpoint's link in place of the role's, on the offline test split's first questions; the
// table and its sums; "ask with it"; the export downloads the registry's bundle under the name the commands show.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mount, unmount } from 'svelte';
import { priceSplit } from '../../eval/tiny-prices';
import type { EngineEvent, EvalRequest, SystemSpec } from '../../../workers/protocol';
import type { EngineRemote, Services } from '../services';
import { TINY } from '../system';
import { reactiveProps } from './props.svelte';
import TryCheckpoint from './TryCheckpoint.svelte';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
});

const offline: SystemSpec = {
  style: 'tiny_distillation',
  roles: {
    expert: { model: '/m/expert', innerLink: '/m/expert/adapter.pt' },
    learner: { model: '/m/learner', innerLink: '/m/learner/adapter.pt' },
  },
};
const trainedLink = new Uint8Array([1, 2, 3, 4]);

describe('TryCheckpoint', () => {
  it('compares the shipped system with the trained link on held-out questions, asks with it and exports it', async () => {
    const evaluate = vi.fn(async (req: EvalRequest, on: (e: EngineEvent) => void) => {
      const after = req.system.roles.learner!.innerLink instanceof Uint8Array;
      const rows = (req.source as { rows: { question: string; answer: string }[] }).rows;
      rows.forEach((r, index) =>
        on({
          type: 'sample',
          index,
          total: rows.length,
          record: {
            index,
            question: r.question,
            gold: r.answer,
            pred: after ? r.answer : 'x',
            correct: after,
            text: `t${index}`,
            tokens: after ? 20 : 30,
            seconds: 1,
          },
        }),
      );
      return {};
    });
    const exportBundle = vi.fn(async () => new Uint8Array([80, 75, 3, 4]));
    const services: Services = {
      engine: { api: () => ({ evaluate }) as unknown as EngineRemote, restart: () => {}, stop: () => {} },
      checkpoints: async () =>
        ({
          files: async () => ({ 'adapter.safetensors': trainedLink, 'train_args.json': new Uint8Array([123, 125]) }),
          exportBundle,
        }) as never,
      models: async () => {
        throw new Error('unused');
      },
    };
    const onAsk = vi.fn();
    const trained = { id: 'ck1', name: 'tiny learner 1', loop: 'inner' as const, role: 'learner' };
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TryCheckpoint, { target, props: reactiveProps({ services, style: TINY, offline, trained, onAsk }) });

    const n = target.querySelector<HTMLInputElement>('[data-testid="try-n"]')!;
    n.value = '3';
    n.dispatchEvent(new Event('input'));
    target.querySelector<HTMLButtonElement>('[data-testid="try-compare"]')!.click();
    await vi.waitFor(() =>
      expect(target.querySelector('[data-testid="try-after"]')!.textContent).toBe('3/3 correct, 20.0 tokens a question'),
    );
    expect(target.querySelector('[data-testid="try-before"]')!.textContent).toBe('0/3 correct, 30.0 tokens a question');
    expect(evaluate).toHaveBeenCalledTimes(2);
    const [before, after] = evaluate.mock.calls.map((c) => c[0]);
    // the same questions, settings and system but for the learner's link; the style's 4 latent steps
    const questions = priceSplit('test').slice(0, 3);
    expect((before!.source as { rows: unknown[] }).rows).toEqual(
      questions.map((r) => ({ question: r.question, answer: String(r.answer_value) })),
    );
    expect(after!.source).toEqual(before!.source);
    expect([before!.mode, before!.rounds, before!.latentSteps, before!.sampling]).toEqual(['latent', 1, 4, { greedy: true }]);
    expect(before!.system.roles.learner!.innerLink).toBe('/m/learner/adapter.pt');
    expect(after!.system.roles.learner!.innerLink).toEqual(trainedLink);
    expect(after!.system.roles.expert).toEqual(before!.system.roles.expert);
    expect(target.querySelectorAll('[data-testid="try-table"] tbody tr').length).toBe(3);

    target.querySelector<HTMLButtonElement>('[data-testid="try-ask"]')!.click();
    expect(onAsk).toHaveBeenCalledWith(trained);

    const clicked = vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(() => {});
    target.querySelector<HTMLButtonElement>('[data-testid="try-export"]')!.click();
    await vi.waitFor(() => expect(clicked).toHaveBeenCalled());
    expect(exportBundle).toHaveBeenCalledWith('ck1');
    expect((clicked.mock.contexts[0] as HTMLAnchorElement).download).toBe('tiny_learner_1.zip');
    clicked.mockRestore();
    // the runner names the offline system by its style
    expect(target.querySelector('[data-testid="try-cli"]')!.textContent).toBe(
      'npx rmas ask --style tiny_distillation --ckpt_override learner=tiny_learner_1.zip --question "…"\n' +
        'npx rmas train-inner --style tiny_distillation --role learner --init_adapter tiny_learner_1.zip --dataset_name DATA.jsonl ' +
        '--save_dir out/learner',
    );
  });
});
