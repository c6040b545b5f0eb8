// Ask view over a fake engine: Ctrl+Enter asks, stage/token/done events fill the timeline, messages and answer;
// upstream's demo controls (sampling defaults, slider ranges and past them, device), the page's history, and the
// message ablations (ask again with the messages shuffled or zeroed).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync } from 'svelte';
import type { AskRequest, AskResultView } from '../../../workers/protocol';
import { priceSplit } from '../../eval/tiny-prices';
import { DEFAULT_ROW } from '../offline';
import { reactiveProps } from '../components/props.svelte';
import { askHistory, prefs } from '../state.svelte';
import { DEFAULTS, type Settings } from '../url';
import { cleanUpAskView, mountAskView } from './ask-view.fixture';
import { fakeAskEngine } from '../../../test/util/fake-ask-engine';

afterEach(cleanUpAskView);

/** The offline system's test split (src/eval/tiny-prices.ts); the question Ask opens with, and the next one. */
const TEST = priceSplit('test').map((r) => r.question);
const [FIRST, NEXT] = [TEST[DEFAULT_ROW]!, TEST[DEFAULT_ROW + 1]!];

const fakeServices = (
  ask: Parameters<typeof fakeAskEngine>[0], refusal: string | null = null,
  more: Pick<NonNullable<Parameters<typeof fakeAskEngine>[1]>, 'lens' | 'adapter'> = {},
) =>
  fakeAskEngine(ask, { refusal, ...more, loadEvents: [
    { type: 'download', file: '/p/model.safetensors', loaded: 512, total: 1024 }, { type: 'ready', backend: 'cpu', seconds: 0.2 },
  ] });

describe('AskView', () => {
  it('streams one latent run into the timeline, the latent messages (read after the answer) and the answer', async () => {
    let lensCallsInAsk = -1;
    const { api, services } = fakeServices(async (req, on) => {
      on({
        type: 'stage',
        index: 0,
        round: 1,
        role: 'expert',
        state: 'done',
        decode: false,
        latents: 2,
        seconds: 0.25,
        messages: [{ ask: 'a#1', stage: 0, link: 'outer_el', to: 'learner', latents: 2 }],
      });
      lensCallsInAsk = api.lens.mock.calls.length;
      on({ type: 'text', role: 'learner', text: 'So **25** is it: ' });
      on({ type: 'text', role: 'learner', text: 'So **25** is it: $\\boxed{25}$ <b>x</b>' });
      const result = {
        answer: '25',
        text: 'So **25** is it: $\\boxed{25}$ <b>x</b>',
        tokens: 12,
        latentSteps: 2,
        seconds: 1.5,
        rounds: req.rounds!,
        mode: req.mode,
        prefillTokensPerSec: 250,
        decodeTokensPerSec: 8.5,
        backend: 'webgpu' as const,
        kvDtype: 'f32',
        stageSeconds: 1.0,
        lensSeconds: 0.25,
        messagesKept: 1,
        retrySeconds: 0,
        pipelinesCompiled: 7,
      };
      on({ type: 'done', result });
      return result;
    }, null, {
      lens: async () => ({
        norms: [3.5, 4.25], top: [[{ token: ' the', prob: 0.5 }], [{ token: '7', prob: 0.0035 }]], vocab: 300, seconds: 0.125,
      }),
    });
    const props = reactiveProps({ services, settings: { ...DEFAULTS, rounds: 1, greedy: true } });
    const target = mountAskView(props);
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', ctrlKey: true }));
    await vi.waitFor(() => expect(target.querySelector('[data-testid="ask-stats"]')!.textContent).toContain('total'));
    flushSync();

    const req = api.ask.mock.calls[0]![0];
    expect(req.sampling).toEqual({ greedy: true });
    expect(req.mode).toBe('latent');
    expect(req.system.label).toBe('offline tiny');
    expect(req.question).toBe(FIRST); // the question the view opens with, of the offline test split
    expect(req.ablation).toBeUndefined();
    expect(target.querySelector('[data-cell="1:expert"]')!.textContent).toBe('0.25 s · 2 latents');
    // the offline system's agents in stage order
    expect([...target.querySelectorAll('thead th')].map((t) => t.textContent)).toEqual(['round', 'expert', 'learner']);
    // the lens: not read during the ask; after the answer, the last message, opened
    expect(lensCallsInAsk).toBe(0);
    await vi.waitFor(() => expect(target.querySelectorAll('.latent').length).toBe(2));
    expect(api.lens.mock.calls.map(([r]) => r)).toEqual([{ ask: 'a#1', stage: 0, link: 'outer_el' }]);
    expect(target.querySelector<HTMLDetailsElement>('[data-testid="latent-messages"] details')!.open).toBe(true);
    expect(target.querySelector('[data-testid="lens-reads"]')!.textContent!.replace(/\s+/g, ' ').trim())
      .toBe('1 message; the lens reads one when it is opened: 1 read in 0.13 s.');
    expect(target.querySelector('.latent .norm')!.textContent).toBe('‖3.5‖');
    expect(target.querySelector('.latent .tok')!.textContent).toBe('·the50%');
    // the second latent's top token (0.35%) is under 2/300: near uniform, marked and counted
    expect([...target.querySelectorAll('.latent')].map((l) => l.classList.contains('flat'))).toEqual([false, true]);
    expect(target.querySelector('[data-testid="latent-messages"] summary')!.textContent)
      .toMatch(/2 latents, read by learner's LM head in 0\.13 s/);
    expect(target.querySelector('[data-testid="lens-note"]')!.textContent!.replace(/\s+/g, ' ').trim()).toBe(
      "The latents are in learner's embedding space; the lens reads each with learner's LM head over its 300 tokens. 1 of 2 read as near uniform " +
        '(top token under twice 1/300 = 0.3%): such a latent is close to no single token, so the lens cannot say what it carries, not that it carries nothing.',
    );
    expect(target.querySelector('[data-testid="boxed"] mark')!.textContent).toBe('25');
    // the offline task's question: its right answer beside the system's, and the expert's note behind it
    expect(target.querySelector('[data-testid="expected"]')!.textContent!.replace(/\s+/g, ' ').trim()).toBe(
      'expected 32 (8 coins per sarb) ✗ wrong',
    );
    expect(target.querySelector('[data-testid="expected"]')!.classList.contains('wrong')).toBe(true);
    const md = target.querySelector('.md')!;
    expect(md.querySelector('strong')!.textContent).toBe('25');
    expect(md.querySelector('b')).toBeNull(); // the model's HTML stays text
    expect(md.textContent).toContain('<b>x</b>');
    expect(md.textContent!.match(/is it/g)).toHaveLength(1); // each text event replaces the last, never appends
    expect(target.querySelector('[data-testid="ask-stats"]')!.textContent!.replace(/\s+/g, ' ').trim())
      .toBe('12 tokens · prefill 250 tok/s · decode 8.50 tok/s · 2 latent steps · 1.50 s total on webgpu (f32 KV cache)');
    expect(target.querySelector('[data-testid="ask-time"]')!.textContent).toMatch(
      /^of the 1\.50 s: stages 1\.00 s · latent-message lens 0\.25 s \(1 message kept, each read on request\) · answer retry 0\.00 s · other 0\.25 s; 7 GPU kernels compiled on first use, inside these; before it, loading the system \d+\.\d\d s \(downloads, weights to the GPU\)$/,
    );
    expect(target.querySelector('[data-testid="answer-text"]')!.textContent).toBe('So **25** is it: $\\boxed{25}$ <b>x</b>');
    expect(target.querySelector('.dl .bytes')!.textContent).toBe('512 B / 1.00 KiB');
    expect(target.querySelector('[data-testid="ask-plan"]')!.textContent).toBe(
      'will download 3.00 MiB (1.00 MiB cached) · needs about 1.50 GiB of GPU memory',
    );
    expect(api.planSystem.mock.calls[0]![0]).toBe(api.loadSystem.mock.calls[0]![0]);

    // the same system again: loaded already, so not planned again
    window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', ctrlKey: true }));
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(2));
    expect(api.planSystem).toHaveBeenCalledTimes(1);
  });

  it('says what the page shows and what the offline task is, links the method, and marks a right answer right', async () => {
    const { api, services } = fakeServices(async (req) => answered(req, 'It is \\boxed{32}'));
    const settings: Settings = reactiveProps({ ...DEFAULTS, rounds: 1 });
    const target = mountAskView({ services, settings });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    const intro = target.querySelector<HTMLDetailsElement>('[data-testid="ask-intro"]')!;
    expect(intro.open).toBe(true);
    const paragraphs = [...intro.querySelectorAll('p')].map((p) => p.textContent!.replace(/\s+/g, ' ').trim());
    expect(paragraphs).toHaveLength(2);
    expect(paragraphs[0]).toMatch(/^RecursiveMAS \(Recursive Multi-Agent Systems, 2026\): frozen LLM agents that talk in latent space\./);
    expect(paragraphs[1]).toContain('The expert alone knows the price list; the learner alone answers');
    expect(paragraphs[1]).toContain('"Sam orders 4 sarbs" is right only as 4 × 8 = 32');
    const link = target.querySelector<HTMLAnchorElement>('[data-testid="method-link"]')!;
    expect(link.textContent).toBe('docs/method.md');
    const doc = await fetch(link.href);
    expect(doc.ok).toBe(true);
    expect((await doc.text()).startsWith('# ')).toBe(true); // the repository's doc, served with the page
    // a click reads it in place, rendered, not as raw Markdown in a new tab
    link.click();
    const dialog = target.querySelector<HTMLDialogElement>('[data-testid="method-doc-dialog"]')!;
    await vi.waitFor(() => expect(dialog.querySelector('.md h1')?.textContent).toBe('RecursiveMAS: the method and the upstream layouts'));
    expect(dialog.open).toBe(true);
    expect(dialog.querySelectorAll('.md table').length).toBeGreaterThan(0);
    dialog.querySelector<HTMLButtonElement>('[data-testid="method-doc-close"]')!.click();
    await vi.waitFor(() => expect(dialog.open).toBe(false));
    expect(target.querySelector('[data-testid="expected"]')).toBeNull(); // nothing asked yet

    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(target.querySelector('[data-testid="ask-stats"]')!.textContent).toContain('total'));
    flushSync();
    const expected = target.querySelector('[data-testid="expected"]')!;
    expect(expected.textContent!.replace(/\s+/g, ' ').trim()).toBe('expected 32 (8 coins per sarb) ✓ right');
    expect(expected.classList.contains('right')).toBe(true);
    // the bare \boxed{32} is typeset as math
    const math = target.querySelector('.md .katex annotation')!;
    expect(math.textContent).toBe('\\boxed{32}');

    // a question outside the task: no expected answer; a released style: no task paragraph
    const box = target.querySelector<HTMLTextAreaElement>('textarea')!;
    box.value = 'What is 2 + 2?';
    box.dispatchEvent(new Event('input', { bubbles: true }));
    flushSync();
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(2));
    await vi.waitFor(() => expect(target.querySelector<HTMLButtonElement>('button.primary')!.disabled).toBe(false));
    flushSync();
    expect(target.querySelector('[data-testid="expected"]')).toBeNull();
    settings.style = 'sequential_light';
    flushSync();
    expect(target.querySelectorAll('[data-testid="ask-intro"] p')).toHaveLength(1);
  });

  it('shows the refusal in the error box and does not load a system this adapter cannot hold', async () => {
    const why =
      'model 1: one row of "model.embed_tokens.weight" (bf16, 8192 bytes) is larger than this adapter\'s 4096-byte storage-binding limit';
    const { api, services } = fakeServices(async () => { throw new Error('unused'); }, why);
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS } }));
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(target.querySelector('[role="alert"]')).not.toBeNull());
    const box = target.querySelector<HTMLElement>('[role="alert"]')!;
    expect(box.dataset.errorName).toBe('BindingLimitExceeded');
    expect(box.textContent).toContain(`this system cannot run here: ${why}`);
    expect(target.querySelector('[data-testid="ask-plan"]')!.textContent).toContain('needs about 1.50 GiB of GPU memory');
    expect(target.querySelector('[data-testid="ask-status"]')!.textContent).toBe('not loaded');
    expect(api.loadSystem).not.toHaveBeenCalled();
    expect(api.ask).not.toHaveBeenCalled();
    expect(target.querySelector<HTMLButtonElement>('button.primary')!.disabled).toBe(false);
  });

  it('runs latent then text in "both" mode and shows an error where it happened', async () => {
    const { api, services } = fakeServices(async (req) => {
      if (req.mode === 'text') throw Object.assign(new Error('the text baseline needs a decoder'), { name: 'InvalidArgument' });
      return {
        answer: '',
        text: '',
        tokens: 0,
        latentSteps: 0,
        seconds: 0,
        rounds: 1,
        mode: 'latent',
        prefillTokensPerSec: 0,
        decodeTokensPerSec: 0,
        backend: 'cpu',
        kvDtype: 'f32',
        stageSeconds: 0,
        lensSeconds: 0,
        retrySeconds: 0,
        pipelinesCompiled: 0,
      };
    });
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS, mode: 'both' as const } }));
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(2));
    await vi.waitFor(() => expect(target.querySelector('[data-mode="text"] [role="alert"]')).not.toBeNull());
    expect(api.ask.mock.calls.map((c) => c[0].mode)).toEqual(['latent', 'text']);
    const box = target.querySelector<HTMLElement>('[data-mode="text"] [role="alert"]')!;
    expect(box.dataset.errorName).toBe('InvalidArgument');
    expect(box.textContent).toContain('the text baseline needs a decoder');
    expect(target.querySelector('[data-mode="latent"] [role="alert"]')).toBeNull();
  });

  it('puts both modes\' tokens and time side by side', async () => {
    const { api, services } = fakeServices(async (req) => ({
      ...answered(req, req.mode === 'latent' ? '\\boxed{32}' : 'It is \\boxed{32}'),
      tokens: req.mode === 'latent' ? 5 : 11, seconds: req.mode === 'latent' ? 0.012 : 0.036,
    }));
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS, mode: 'both' as const, greedy: true } }));
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(target.querySelector('[data-testid="both-summary"]')).not.toBeNull());
    expect(target.querySelector('[data-testid="both-summary"]')!.textContent).toBe(
      'latent: 5 tokens, 0.01 s, answer 32 · text: 11 tokens, 0.04 s, answer 32',
    );
  });

  it("sends upstream's demo sampling by default (temperature 0.6, top-p 0.95), greedy when ticked, on the device chosen", async () => {
    const { api, services } = fakeServices(async (req) => answered(req, '7'));
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS } }));
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    const input = (id: string) => target.querySelector<HTMLInputElement>(`[data-testid="${id}"]`)!;
    expect([input('ask-greedy').checked, input('ask-temperature').value, input('ask-top-p').value]).toEqual([false, '0.6', '0.95']);
    expect(input('ask-temperature').disabled).toBe(false);
    // defaults 3 rounds and the style's 4 latent steps (the offline system's), under upstream's slider (8–64 by 8):
    // the view opens within upstream's ranges, the latent steps' reaching down to the style's 4 (4–64 by 4)
    expect(['min', 'max', 'step', 'value'].map((a) => input('ask-rounds')[a as 'min'])).toEqual(['1', '5', '1', '3']);
    expect(['min', 'max', 'step', 'value'].map((a) => input('ask-latent')[a as 'min'])).toEqual(['4', '64', '4', '4']);
    expect(input('ask-beyond').checked).toBe(false);
    const device = target.querySelector<HTMLSelectElement>('[data-testid="ask-device"]')!;
    expect(device.value).toBe('auto');
    expect([...device.options].map((o) => o.textContent)).toEqual(['webgpu', 'cpu']);

    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(1));
    const first = api.ask.mock.calls[0]![0];
    expect([first.sampling, first.rounds, first.latentSteps, first.backend]).toEqual([
      { temperature: 0.6, topP: 0.95, seed: 42 },
      3,
      4,
      undefined,
    ]);
    await vi.waitFor(() => expect(askHistory.entries).toHaveLength(1));

    // greedy, and the CPU backend: the same choice as Environment's (prefs, kept across reloads)
    input('ask-greedy').click();
    device.value = 'cpu';
    device.dispatchEvent(new Event('change', { bubbles: true }));
    flushSync();
    expect(prefs.backend).toBe('cpu');
    expect(JSON.parse(localStorage.getItem('rmas.prefs')!)).toEqual({ backend: 'cpu' });
    expect(input('ask-temperature').disabled).toBe(true);
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(2));
    const second = api.ask.mock.calls[1]![0];
    expect([second.sampling, second.backend]).toEqual([{ greedy: true }, 'cpu']);
  });

  it("keeps rounds and latent steps in upstream's ranges, and goes past them when asked", async () => {
    const { api, services } = fakeServices(async (req) => answered(req, '7'));
    const settings: Settings = reactiveProps({ ...DEFAULTS });
    const target = mountAskView({ services, settings });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    const input = (id: string) => target.querySelector<HTMLInputElement>(`[data-testid="${id}"]`)!;
    const type = (id: string, v: string) => {
      input(id).value = v;
      input(id).dispatchEvent(new Event('input', { bubbles: true }));
      input(id).dispatchEvent(new Event('change', { bubbles: true }));
      flushSync();
    };
    // the view opens within upstream's ranges, which keep the offline system's own 4 latent steps (4–64 by 4)
    expect(input('ask-beyond').checked).toBe(false);
    expect([settings.rounds, settings.latentSteps, input('ask-latent').min]).toEqual([3, 4, '4']);
    type('ask-rounds', '9');
    type('ask-latent', '100');
    expect([settings.rounds, settings.latentSteps]).toEqual([5, 64]);
    type('ask-latent', '21');
    expect(settings.latentSteps).toBe(20);
    type('ask-latent', '');
    expect(settings.latentSteps).toBe(4); // an emptied field: the style's default

    input('ask-beyond').click();
    flushSync();
    expect([input('ask-rounds').max, input('ask-latent').min, input('ask-latent').max, input('ask-latent').step]).toEqual([
      '10',
      '0',
      '256',
      '1',
    ]);
    type('ask-rounds', '9');
    type('ask-latent', '100');
    expect([settings.rounds, settings.latentSteps]).toEqual([9, 100]);
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(1));
    expect([api.ask.mock.calls[0]![0].rounds, api.ask.mock.calls[0]![0].latentSteps]).toEqual([9, 100]);
    await vi.waitFor(() => expect(askHistory.entries).toHaveLength(1));

    // back within them: the values move onto upstream's sliders
    input('ask-beyond').click();
    flushSync();
    expect([settings.rounds, settings.latentSteps, input('ask-latent').max]).toEqual([5, 64, '64']);
  });

  it('opens past the ranges when the settings (a shared link) already are, and within them when they are not', async () => {
    const { api, services } = fakeServices(async (req) => answered(req, '7'));
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS, rounds: 8, latentSteps: 12 } }));
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    expect(target.querySelector<HTMLInputElement>('[data-testid="ask-beyond"]')!.checked).toBe(true);
    expect(target.querySelector<HTMLInputElement>('[data-testid="ask-rounds"]')!.value).toBe('8');
    mountAskView(reactiveProps({ services, settings: { ...DEFAULTS, style: 'mixture', latentSteps: 32 } }), target); // in its place
    expect(target.querySelectorAll('[data-testid="ask-beyond"]')).toHaveLength(1);
    expect(target.querySelector<HTMLInputElement>('[data-testid="ask-beyond"]')!.checked).toBe(false);
  });

  it("lists this page's questions and answers under the answer, in order, until Clear", async () => {
    const { api, services } = fakeServices(async (req) => {
      if (req.question.startsWith('Why')) throw Object.assign(new Error('the tiny model has no opinion'), { name: 'InvalidArgument' });
      return answered(req, req.question.includes('1 + 2') ? '\\boxed{3}' : 'It is \\boxed{12}.');
    });
    const settings: Settings = reactiveProps({ ...DEFAULTS, rounds: 1 });
    const target = mountAskView({ services, settings });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    const box = target.querySelector<HTMLTextAreaElement>('textarea')!;
    const entries = () => [...target.querySelectorAll('[data-testid="history-entry"]')];
    const askQ = async (q: string, n: number) => {
      box.value = q;
      box.dispatchEvent(new Event('input', { bubbles: true }));
      flushSync();
      target.querySelector<HTMLButtonElement>('button.primary')!.click();
      await vi.waitFor(() => expect(entries()).toHaveLength(n));
      await vi.waitFor(() => expect(target.querySelector<HTMLButtonElement>('button.primary')!.disabled).toBe(false));
    };
    expect(entries()).toHaveLength(0);
    expect(target.querySelector<HTMLButtonElement>('[data-testid="history-clear"]')!.disabled).toBe(true);

    const t0 = Date.now();
    await askQ('What is 1 + 2?', 1);
    settings.greedy = true;
    settings.mode = 'both';
    flushSync();
    await askQ('What is 5 + 7?', 2);
    expect(api.ask).toHaveBeenCalledTimes(3); // the second question in both modes

    const [a, b] = entries();
    expect(a!.querySelector('.question')!.textContent).toBe('What is 1 + 2?');
    expect(a!.querySelector('.style')!.textContent).toBe('tiny distillation (offline)');
    expect(a!.querySelector('.meta')!.textContent).toContain(
      'latent · 1 round · 4 latent steps · temperature 0.6, top-p 0.95, seed 42 · webgpu',
    );
    expect(a!.querySelector('[data-testid="history-ablation"]')).toBeNull();
    expect(a!.querySelector('[data-testid="history-answer"]')!.textContent).toBe('3');
    expect(a!.querySelector('[data-testid="history-text"]')!.textContent).toBe('\\boxed{3}');
    const at = Date.parse(a!.querySelector('time')!.getAttribute('datetime')!);
    expect(at).toBeGreaterThanOrEqual(Math.floor(t0 / 1000) * 1000);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(b!.querySelector('.question')!.textContent).toBe('What is 5 + 7?');
    expect(b!.querySelector('.meta')!.textContent).toContain('latent and text · 1 round · 4 latent steps · greedy · webgpu');
    expect(
      [...b!.querySelectorAll('.reply')].map((r) => [
        r.getAttribute('data-mode'),
        r.querySelector('[data-testid="history-answer"]')?.textContent,
      ]),
    ).toEqual([
      ['latent', '12'],
      ['text', '12'],
    ]);
    expect(target.querySelector('[data-testid="ask-history"] h3')!.textContent).toBe("This page's questions (2)");
    // the history sits under the answer
    const runs = target.querySelector('.runs')!;
    expect(
      runs.compareDocumentPosition(target.querySelector('[data-testid="ask-history"]')!) & Node.DOCUMENT_POSITION_FOLLOWING,
    ).toBeTruthy();

    // an error is kept as the answer it was
    settings.mode = 'latent';
    flushSync();
    await askQ('Why?', 3);
    expect(entries()[2]!.querySelector('[data-testid="history-error"]')!.textContent).toBe(
      'InvalidArgument: the tiny model has no opinion',
    );

    target.querySelector<HTMLButtonElement>('[data-testid="history-clear"]')!.click();
    flushSync();
    expect(entries()).toHaveLength(0);
    expect(askHistory.entries).toEqual([]);
    expect(target.querySelector<HTMLButtonElement>('[data-testid="history-clear"]')!.disabled).toBe(true);
  });

  it('asks the question again with the messages shuffled (the next test question\'s) or zeroed, and says so', async () => {
    const { api, services } = fakeServices(async (req) => answered(req, req.ablation ? '\\boxed{9}' : '\\boxed{24}'));
    const settings: Settings = reactiveProps({ ...DEFAULTS, rounds: 1, greedy: true, mode: 'both' as const });
    const target = mountAskView({ services, settings });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    const button = (id: string) => target.querySelector<HTMLButtonElement>(`[data-testid="${id}"]`);
    const idle = () => vi.waitFor(() => expect(target.querySelector<HTMLButtonElement>('button.primary')!.disabled).toBe(false));
    expect(button('ask-shuffled')).toBeNull(); // nothing answered yet
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(askHistory.entries).toHaveLength(1));
    await idle();
    // after a latent answer (here beside the text one), under the latent run only
    expect(target.querySelectorAll('[data-testid="ask-shuffled"]')).toHaveLength(1);
    expect(target.querySelector('[data-mode="latent"] [data-testid="ask-zeroed"]')!.textContent).toBe('Ask again with the messages zeroed');
    expect(button('ask-shuffled')!.textContent).toBe('Ask again with the messages shuffled');
    expect(button('ask-shuffled')!.title).toContain(`“${NEXT}”`);

    // the typed question may change: the question of the answer shown is asked again, latent mode only
    const box = target.querySelector<HTMLTextAreaElement>('textarea')!;
    box.value = 'What is 1 + 1?';
    box.dispatchEvent(new Event('input', { bubbles: true }));
    flushSync();
    button('ask-shuffled')!.click();
    await vi.waitFor(() => expect(askHistory.entries).toHaveLength(2));
    await idle();
    const shuffled = api.ask.mock.calls[2]![0];
    expect([shuffled.question, shuffled.mode, shuffled.ablation, shuffled.rounds, shuffled.latentSteps, shuffled.sampling]).toEqual([
      FIRST, 'latent', { kind: 'from', question: NEXT }, 1, 4, { greedy: true },
    ]);
    expect([...target.querySelectorAll('.run')].map((r) => r.getAttribute('data-mode'))).toEqual(['latent']);
    expect(target.querySelector('[data-testid="run-title"]')!.textContent).toBe(`latent mode · messages from: ${NEXT}`);
    expect(target.querySelector('[data-testid="ask-stats"]')!.textContent!.replace(/\s+/g, ' ').trim()).toBe(
      `3 tokens · prefill 100 tok/s · decode 10.0 tok/s · 4 latent steps · messages from: ${NEXT} · ` +
        '0.50 s total on cpu (f32 KV cache)',
    );
    const time = target.querySelector('[data-testid="ask-time"]')!.textContent;
    expect(time).toMatch(/; before it, the donor question's run 0\.25 s \(its messages\)$/);
    expect(target.querySelector('[data-testid="boxed"] mark')!.textContent).toBe('9');

    // and again, zeroed (the buttons stay under the ablated answer)
    button('ask-zeroed')!.click();
    await vi.waitFor(() => expect(askHistory.entries).toHaveLength(3));
    await idle();
    expect(api.ask.mock.calls[3]![0]).toMatchObject({ question: FIRST, mode: 'latent', ablation: { kind: 'zeroed' } });
    expect(target.querySelector('[data-testid="run-title"]')!.textContent).toBe('latent mode · messages zeroed');
    expect(target.querySelector('[data-testid="ask-stats"]')!.textContent).toContain('4 latent steps · messages zeroed ·');

    // the history says which answer had which messages
    const entries = [...target.querySelectorAll('[data-testid="history-entry"]')];
    expect(entries.map((e) => e.querySelector('.question')!.textContent)).toEqual([FIRST, FIRST, FIRST]);
    expect(entries.map((e) => e.querySelector('[data-testid="history-ablation"]')?.textContent ?? null)).toEqual([
      null, `messages from: ${NEXT}`, 'messages zeroed',
    ]);
    const meta = entries[1]!.querySelector('.meta')!.textContent;
    expect(meta).toMatch(/ · latent · 1 round · 4 latent steps · greedy · webgpu · messages from: /);
    expect([...entries[2]!.querySelectorAll('[data-testid="history-answer"]')].map((a) => a.textContent)).toEqual(['9']);
  });

  it('shuffles the messages of a question of the split with the next row, of any other with row 1', async () => {
    const { api, services } = fakeServices(async (req) => answered(req, '\\boxed{1}'));
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS, greedy: true } }));
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    const box = target.querySelector<HTMLTextAreaElement>('textarea')!;
    for (const [q, donor] of [[TEST[7]!, TEST[8]!], ['What is 2 + 2?', TEST[1]!]]) {
      box.value = q;
      box.dispatchEvent(new Event('input', { bubbles: true }));
      flushSync();
      const n = api.ask.mock.calls.length;
      target.querySelector<HTMLButtonElement>('button.primary')!.click();
      flushSync(); // the last answer's buttons go at once
      await vi.waitFor(() => expect(target.querySelector('[data-testid="ask-shuffled"]')).not.toBeNull());
      await vi.waitFor(() => expect(target.querySelector<HTMLButtonElement>('[data-testid="ask-shuffled"]')!.disabled).toBe(false));
      target.querySelector<HTMLButtonElement>('[data-testid="ask-shuffled"]')!.click();
      await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(n + 2));
      expect(api.ask.mock.calls[n + 1]![0].ablation).toEqual({ kind: 'from', question: donor });
      await vi.waitFor(() => expect(target.querySelector<HTMLButtonElement>('button.primary')!.disabled).toBe(false));
    }
  });

  it('on a fallback adapter, says so beside the offline system and switches to the CPU device when asked', async () => {
    const { api, services } = fakeServices(async (req) => answered(req, '\\boxed{32}'), null, {
      adapter: { isFallback: true, description: 'SwiftShader Device (Subzero)' },
    });
    const settings = reactiveProps({ ...DEFAULTS });
    const target = mountAskView(reactiveProps({ services, settings }));
    await vi.waitFor(() => expect(target.querySelector('[data-testid="fallback-note"]')).not.toBeNull());
    expect(api.adapterReport).toHaveBeenCalledTimes(1);
    expect(target.querySelector('[data-testid="fallback-note"]')!.textContent).toContain(
      'WebGPU here is a fallback adapter (SwiftShader Device (Subzero))',
    );
    target.querySelector<HTMLButtonElement>('[data-testid="fallback-use-cpu"]')!.click();
    flushSync();
    expect([prefs.backend, target.querySelector<HTMLSelectElement>('[data-testid="ask-device"]')!.value]).toEqual(['cpu', 'cpu']);
    expect(target.querySelector('[data-testid="fallback-note"]')).toBeNull();
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(1));
    expect(api.ask.mock.calls[0]![0].backend).toBe('cpu');
  });

  it('no fallback note on a real GPU', async () => {
    const { api, services } = fakeServices(async (req) => answered(req, ''), null, { adapter: { isFallback: false } });
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS } }));
    await vi.waitFor(() => expect(api.adapterReport).toHaveBeenCalled());
    flushSync();
    expect(target.querySelector('[data-testid="fallback-note"]')).toBeNull();
  });

  it('Stop: the running cell says cancelled, no error box; a failure: failed, with its error', async () => {
    let release!: () => void;
    const { api, services } = fakeServices((req, on) => new Promise((_, reject) => {
      on({ type: 'stage', index: 0, round: 1, role: 'expert', state: 'running', decode: false });
      if (req.question === 'fails') {
        on({ type: 'error', name: 'GpuOutOfMemory', message: 'out of memory' });
        reject(Object.assign(new Error('out of memory'), { name: 'GpuOutOfMemory' }));
      }
      release = () => {
        on({ type: 'error', name: 'Cancelled', message: 'the call was cancelled' });
        reject(Object.assign(new Error('the call was cancelled'), { name: 'Cancelled' }));
      };
    }));
    const target = mountAskView(reactiveProps({ services, settings: { ...DEFAULTS, rounds: 1 } }));
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    const cell = () => target.querySelector<HTMLElement>('[data-cell="1:expert"]')!;
    await vi.waitFor(() => expect(cell().textContent).toBe('running…'));
    [...target.querySelectorAll('button')].find((b) => b.textContent === 'Stop')!.click();
    await vi.waitFor(() => expect(api.cancel).toHaveBeenCalled());
    release();
    await vi.waitFor(() => expect(cell().textContent).toBe('cancelled'));
    expect(cell().dataset.state).toBe('cancelled');
    expect(target.querySelector('[role="alert"]')).toBeNull();
    expect(target.querySelector('[data-testid="ask-status"]')!.textContent).toBe('stopped');

    const box = target.querySelector<HTMLTextAreaElement>('textarea')!;
    box.value = 'fails';
    box.dispatchEvent(new Event('input', { bubbles: true }));
    flushSync();
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(cell().textContent).toBe('failed'));
    expect(target.querySelector<HTMLElement>('[role="alert"]')!.dataset.errorName).toBe('GpuOutOfMemory');
  });
});

/** A finished run that wrote `text` (its boxed value as the answer). */
function answered(req: AskRequest, text: string): AskResultView {
  return {
    answer: /\\boxed\{([^}]*)\}/.exec(text)?.[1] ?? '',
    text,
    tokens: 3,
    latentSteps: req.latentSteps ?? 0,
    seconds: 0.5,
    rounds: req.rounds ?? 3,
    mode: req.mode,
    prefillTokensPerSec: 100,
    decodeTokensPerSec: 10,
    backend: 'cpu',
    kvDtype: 'f32',
    stageSeconds: 0.25,
    lensSeconds: 0,
    retrySeconds: 0,
    pipelinesCompiled: 0,
    // as the worker echoes the ablation (`rmas ask --json`'s "messages")
    ...(req.ablation ? { messages: req.ablation.kind === 'zeroed' ? 'zeroed' : `from: ${req.ablation.question}`, donorSeconds: 0.25 } : {}),
  };
}
