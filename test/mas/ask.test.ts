/**
 * `rmas ask` end to end on tiny upstream-layout systems (scripts/tiny-system/tiny-mas.ts: three tiny model families of
 * hidden sizes 32/48/64, random bf16 links in .pt files with upstream's names and manifests), on the CPU
 * backend: for every style, the dump manifest lists the stages in the style's order with the right slots
 * and outer links, each slot receives exactly the latents the named link produced earlier, and every
 * tensor has the hidden size of the agent it belongs to. Then the text-MAS baseline, and bad input.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SLOTS } from '../../src/mas/slots';
import { CpuBackend } from '../../src/tensor/cpu';
import { TINY_HIDDEN, TINY_MAS_ROLES, type TinyStyle } from '../../scripts/tiny-system/tiny-mas';
import { overridesFor, readDump, runAsk } from './ask-util';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-ask-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const cpu = new CpuBackend('f32');
const M = 3;

type Expect = [round: number, role: string, fill: [slot: string, key: string][], linksOut: string[]];
const S = SLOTS;
/** Two rounds of each style, written out by hand from docs/method.md (docs/method.md §4.3, §4.4). */
const EXPECTED: Record<TinyStyle, Expect[]> = {
  sequential_light: [
    [1, 'planner', [], ['outer_12']],
    [1, 'critic', [[S.planner, 'outer_12']], ['outer_23']],
    [1, 'solver', [[S.refined, 'outer_23']], ['outer_31']],
    [2, 'planner', [[S.feedback, 'outer_31']], ['outer_12']],
    [2, 'critic', [[S.planner, 'outer_12']], ['outer_23']],
    [2, 'solver', [[S.refined, 'outer_23']], []],
  ],
  sequential_scaled: [],
  mixture: [
    [1, 'math', [], ['outer_1s']],
    [1, 'code', [], ['outer_2s']],
    [1, 'science', [], ['outer_3s']],
    [
      1,
      'summarizer',
      [
        [S.hieMath, 'outer_1s'],
        [S.hieCode, 'outer_2s'],
        [S.hieScience, 'outer_3s'],
      ],
      ['outer_s1', 'outer_s2', 'outer_s3'],
    ],
    [2, 'math', [[S.hieFeedback, 'outer_s1']], ['outer_1s']],
    [2, 'code', [[S.hieFeedback, 'outer_s2']], ['outer_2s']],
    [2, 'science', [[S.hieFeedback, 'outer_s3']], ['outer_3s']],
    [
      2,
      'summarizer',
      [
        [S.hieMath, 'outer_1s'],
        [S.hieCode, 'outer_2s'],
        [S.hieScience, 'outer_3s'],
      ],
      [],
    ],
  ],
  distillation: [
    [1, 'expert', [], ['outer_el']],
    [1, 'learner', [[S.distillExpert, 'outer_el']], ['outer_le']],
    [2, 'expert', [[S.distillFeedback, 'outer_le']], ['outer_el']],
    [2, 'learner', [[S.distillExpert, 'outer_el']], []],
  ],
  deliberation: [
    [1, 'reflector', [], ['outer_rt']],
    [1, 'toolcaller', [[S.deliberationReflector, 'outer_rt']], ['outer_tr']],
    [2, 'reflector', [[S.deliberationFeedback, 'outer_tr']], ['outer_rt']],
    [2, 'toolcaller', [[S.deliberationReflector, 'outer_rt']], []],
  ],
};
EXPECTED.sequential_scaled = EXPECTED.sequential_light;

const LINK_TARGET: Record<string, string> = {};

describe('rmas ask, latent mode, every style (CPU)', () => {
  for (const style of Object.keys(EXPECTED) as TinyStyle[]) {
    it(`${style}: stage order, slots, link routing and sizes from the dump`, async () => {
      const dir = join(tmp, style);
      const dump = join(dir, 'dump');
      const r = await runAsk({
        style, question: 'What is 12 + 30?', ckpt_override: await overridesFor(style, dir), num_recursive_rounds: '2',
        latent_length: String(M), greedy: true, max_new_tokens: '5', no_ans: true, dump, json: true,
      }, cpu);
      expect(r.error).toBeNull();
      const stages = await readDump(dump);
      const want = EXPECTED[style];
      expect(stages.map((s) => [s.round, s.role, s.slots, s.links_out])).toEqual(
        want.map(([round, role, fill, out]) => [round, role, fill.map((f) => f[0]), out]),
      );
      const hidden = (role: string) => TINY_HIDDEN[TINY_MAS_ROLES[style][role]];
      const last = new Map<string, Float32Array>();
      for (const [i, s] of stages.entries()) {
        const [, role, fill, out] = want[i];
        const d = hidden(role);
        const names = [...s.tensors.keys()].sort();
        const decodes = out.length === 0;
        expect(names).toEqual([
          ...(decodes ? ['generated_ids'] : ['hidden']),
          ...Array.from({ length: fill.length + 1 }, (_, k) => `ids.${k}`),
          ...fill.map((_, k) => `latents_in.${k}`),
          ...out.map((k) => `latents_out.${k}`),
        ].sort());
        for (const [k, [, key]] of fill.entries()) {
          const t = s.tensors.get(`latents_in.${k}`)!;
          expect(t.shape).toEqual([M, d]);
          // the slot holds exactly what the link produced in its latest stage
          expect(Array.from(t.values)).toEqual(Array.from(last.get(key)!));
        }
        for (let k = 0; k <= fill.length; k++) {
          const ids = s.tensors.get(`ids.${k}`)!;
          expect(ids.dtype).toBe('I32');
          expect(ids.shape[0]).toBeGreaterThan(0);
        }
        if (!decodes) expect(s.tensors.get('hidden')!.shape).toEqual([M, d]);
        for (const key of out) {
          const t = s.tensors.get(`latents_out.${key}`)!;
          const target = want.find(([, , f]) => f.some(([, k]) => k === key))![1];
          LINK_TARGET[key] = target;
          expect(t.shape).toEqual([M, hidden(target)]);
          expect(t.values.every(Number.isFinite)).toBe(true);
          last.set(key, t.values as Float32Array);
        }
        if (decodes) expect(s.tensors.get('generated_ids')!.shape[0]).toBeGreaterThan(0);
      }
      const json = JSON.parse(r.out) as { answer: string; text: string; tokens: number; seconds: number; rounds: number };
      expect(Object.keys(json).sort()).toEqual(['answer', 'rounds', 'seconds', 'text', 'tokens']);
      expect(json.rounds).toBe(2);
      expect(json.tokens).toBe(stages[stages.length - 1].tensors.get('generated_ids')!.shape[0]);
      expect(json.seconds).toBeGreaterThan(0);
    });
  }
});

describe('rmas ask, text mode (the Recursive-TextMAS baseline)', () => {
  it('fills each slot with the previous agent\'s text, needs no links, counts every agent\'s tokens', async () => {
    const dir = join(tmp, 'text');
    const roles = (await overridesFor('sequential_light', dir)).filter((o) => !o.startsWith('outer='));
    const dump = join(dir, 'dump');
    const r = await runAsk({
      style: 'sequential_light', question: 'What is 12 + 30?', ckpt_override: roles, num_recursive_rounds: '2',
      mode: 'text', greedy: true, max_new_tokens: '6', no_ans: true, dump, json: true,
    }, cpu);
    expect(r.error).toBeNull();
    const stages = await readDump(dump);
    expect(stages.map((s) => [s.round, s.role])).toEqual([
      [1, 'planner'],
      [1, 'critic'],
      [1, 'solver'],
      [2, 'planner'],
      [2, 'critic'],
      [2, 'solver'],
    ]);
    const { loadTokenizerFromDir } = await import('../../src/tokenizer');
    const tok = await loadTokenizerFromDir('models/tiny/qwen3-tiny');
    const textOf = (i: number) => tok.decode(Array.from(stages[i].tensors.get('generated_ids')!.values), { skipSpecialTokens: true });
    let total = 0;
    for (const [i, s] of stages.entries()) {
      expect([...s.tensors.keys()].sort()).toEqual(['generated_ids', 'ids.0']);
      total += s.tensors.get('generated_ids')!.shape[0];
      const prompt = tok.decode(Array.from(s.tensors.get('ids.0')!.values));
      expect(prompt).not.toContain('<<LATENT_');
      // critic reads the planner's text, solver the critic's, round-2 planner the solver's
      const from = { critic: i - 1, solver: i - 1, planner: i >= 3 ? i - 1 : -1 }[s.role]!;
      if (from >= 0 && textOf(from).trim()) expect(prompt).toContain(textOf(from));
    }
    const json = JSON.parse(r.out) as { tokens: number; text: string };
    expect(json.tokens).toBe(total);
    expect(json.text).toBe(textOf(5));
  });
});

describe('rmas ask, bad input', () => {
  const base = { question: 'What is 1 + 1?', latent_length: '2', greedy: true, max_new_tokens: '2', num_recursive_rounds: '1' };

  it('an unknown style is UnknownStyle naming the styles', async () => {
    const r = await runAsk({ ...base, style: 'sequential_heavy' }, cpu);
    expect(r.error?.name).toBe('UnknownStyle');
    expect(r.error?.message).toContain('sequential_light, sequential_scaled, mixture, distillation, deliberation');
  });

  it('a role neither given nor cached, offline, is HubOffline saying how to fetch it and which --ckpt_override to pass', async () => {
    const dir = join(tmp, 'missing');
    const o = (await overridesFor('sequential_light', dir)).filter((x) => !x.startsWith('critic='));
    const saved = { ...process.env };
    process.env.HF_HUB_CACHE = join(dir, 'empty-hub');
    process.env.HF_HUB_OFFLINE = '1';
    try {
      const r = await runAsk({ ...base, style: 'sequential_light', ckpt_override: o }, cpu);
      const repo = 'RecursiveMAS/Sequential-Light-Critic-Llama3.2-1B';
      expect([r.error?.name, r.error?.message]).toEqual(['HubOffline',
        `role critic of sequential_light: ${repo} is not in the Hugging Face cache at ${join(dir, 'empty-hub')} and HF_HUB_OFFLINE is set, ` +
        `so nothing is downloaded; unset HF_HUB_OFFLINE, or fetch it first while online (rmas download ${repo}); ` +
        `or pass --ckpt_override critic=DIR with a local copy of ${repo}`]);
    } finally {
      process.env = saved;
    }
  });

  it('an override for a role the style lacks is InvalidArgument listing the roles', async () => {
    const r = await runAsk({ ...base, style: 'distillation', ckpt_override: ['planner=/nowhere'] }, cpu);
    expect(r.error?.name).toBe('InvalidArgument');
    expect(r.error?.message).toContain('expert, learner, outer');
  });

  it('a link of the wrong size is ShapeMismatch naming the link and both sizes', async () => {
    const dir = join(tmp, 'wrong-size');
    const o = await overridesFor('sequential_light', dir);
    // a Qwen3 (48) solver where the outer links expect the Qwen2 (32) one
    const planner = o.find((x) => x.startsWith('planner='))!.slice('planner='.length);
    const swapped = o.map((x) => (x.startsWith('solver=') ? `solver=${planner}` : x));
    const r = await runAsk({ ...base, style: 'sequential_light', ckpt_override: swapped }, cpu);
    expect(r.error?.name).toBe('ShapeMismatch');
    expect(r.error?.message).toMatch(/outer_23 .*64 → 32.*64 → 48/);
    // the same without sizes in the manifest: the check falls to the tensor shapes
    const outer = o.find((x) => x.startsWith('outer='))!.slice('outer='.length);
    const { readFileSync } = await import('node:fs');
    const manifest = readFileSync(join(outer, 'outerlink_config.json'), 'utf8').replace(/"(in|out)_dim": \d+,?/g, '');
    writeFileSync(join(outer, 'outerlink_config.json'), manifest.replace(/,(\s*})/g, '$1'));
    const r2 = await runAsk({ ...base, style: 'sequential_light', ckpt_override: swapped }, cpu);
    expect(r2.error?.name).toBe('ShapeMismatch');
    expect(r2.error?.message).toMatch(/outer_23.*output \(d_out\) size is 32 .* hidden size 48/);
  });

  it('a prompt file whose template lacks its slot is PromptSlotMissing', async () => {
    const file = join(tmp, 'prompts.json');
    writeFileSync(file, JSON.stringify({ templates: { 'chain.critic.first': 'Improve the plan for: {question}' } }));
    const r = await runAsk({ ...base, style: 'sequential_light', prompts: file, ckpt_override: ['planner=/x'] }, cpu);
    expect(r.error?.name).toBe('PromptSlotMissing');
    expect(r.error?.message).toContain('chain.critic.first');
    expect(r.error?.message).toContain(SLOTS.planner);
  });

  it('bad flag values are usage errors', async () => {
    for (const [args, msg] of [
      [{ mode: 'both' }, '--mode both'], [{ latent_length: '0' }, '--latent_length 0'], [{ task: 'poetry' }, '--task poetry'],
      [{ ckpt_override: ['planner'] }, 'expected ROLE=PATH'], [{ greedy: true, temperature: '0.5' }, '--greedy does not combine'],
    ] as const) {
      const r = await runAsk({ ...base, style: 'sequential_light', ...args }, cpu);
      expect(r.error?.name, msg).toBe('UsageError');
      expect(r.error?.message).toContain(msg);
    }
  });
});

describe('cancellation', () => {
  it('an abort before the run, between stages or while decoding ends it with Cancelled, and the system stays usable', async () => {
    const { loadSystem } = await import('../../src/mas/system-folders');
    const { ask } = await import('../../src/mas/ask');
    const o = Object.fromEntries(
      (await overridesFor('sequential_light', join(tmp, 'cancel'))).map((x) => x.split('=') as [string, string]),
    );
    const system = await loadSystem('sequential_light', { backend: cpu, ckptOverride: o, task: 'math' });
    const base = { question: 'What is 1 + 1?', rounds: 2, latentSteps: 3, sampling: { greedy: true }, maxNewTokens: 4 };
    try {
      const before = new AbortController();
      before.abort();
      await expect(ask(system, { ...base, signal: before.signal })).rejects.toMatchObject({
        name: 'Cancelled',
        message: expect.stringContaining('planner, round 1'),
      });

      const between = new AbortController();
      const seen: string[] = [];
      await expect(ask(system, { ...base, signal: between.signal, onStage: (r) => { seen.push(r.role); between.abort(); } }))
        .rejects.toMatchObject({ name: 'Cancelled', message: expect.stringContaining('critic, round 1') });
      expect(seen).toEqual(['planner']);

      const decoding = new AbortController();
      const tokens: number[] = [];
      await expect(ask(system, { ...base, signal: decoding.signal, onToken: (_, id) => { tokens.push(id); decoding.abort(); } }))
        .rejects.toMatchObject({ name: 'Cancelled', message: expect.stringContaining('solver decoding') });
      expect(tokens).toHaveLength(1);

      // the same system still answers afterwards
      const r = await ask(system, { ...base, answerRetry: false });
      expect(r.stages.map((s) => s.role)).toEqual(['planner', 'critic', 'solver', 'planner', 'critic', 'solver']);
      expect(r.tokens).toBeGreaterThan(0);
    } finally {
      system.dispose();
    }
  });
});

describe('one role per device (placement)', () => {
  it('roles on three backends answer as on one: same latents, same text; messages arrive on the receiver\'s backend', async () => {
    const { loadSystem } = await import('../../src/mas/system-folders');
    const { ask } = await import('../../src/mas/ask');
    const o = Object.fromEntries(
      (await overridesFor('sequential_light', join(tmp, 'placed'))).map((x) => x.split('=') as [string, string]),
    );
    const devices = [cpu, new CpuBackend('f32'), new CpuBackend('f32')];
    const placement = { critic: devices[1], solver: devices[2] };
    await expect(loadSystem('sequential_light', { backend: cpu, ckptOverride: o, task: 'math', placement: { judge: devices[1] } }))
      .rejects.toMatchObject({ name: 'InvalidArgument', message: expect.stringContaining("placement of role 'judge'") });
    const base = { question: 'What is 2 + 3?', rounds: 2, latentSteps: 3, sampling: { greedy: true }, maxNewTokens: 6, answerRetry: false };
    const run = async (p?: Record<string, CpuBackend>) => {
      const system = await loadSystem('sequential_light', { backend: cpu, ckptOverride: o, task: 'math', ...(p ? { placement: p } : {}) });
      const sent: { key: string; on: unknown; values: number[] }[] = [];
      try {
        const r = await ask(system, {
          ...base,
          onStage: async (rec) => {
            for (const [key, L] of rec.latentsOut) sent.push({ key, on: L.backend, values: Array.from(await L.read()) });
          },
        });
        return { r, sent, backends: [...system.agents.values()].map((a) => a.decoder.backend), outer: system.outer };
      } finally {
        system.dispose();
      }
    };
    const one = await run();
    const placed = await run(placement);
    expect(placed.backends).toEqual(devices);
    expect(placed.r.text).toBe(one.r.text);
    expect(placed.r.tokens).toBe(one.r.tokens);
    expect(placed.sent.map((s) => s.key)).toEqual(['outer_12', 'outer_23', 'outer_31', 'outer_12', 'outer_23']);
    placed.sent.forEach((s, i) => expect(s.values).toEqual(one.sent[i].values));
    // outer_12 goes planner → critic, outer_23 critic → solver, outer_31 solver → planner
    const receiver = { outer_12: devices[1], outer_23: devices[2], outer_31: devices[0] } as Record<string, unknown>;
    for (const s of placed.sent) expect(s.on).toBe(receiver[s.key]);
    expect(one.sent.every((s) => s.on === cpu)).toBe(true);
  });
});

describe('onText: the answer as it is written', () => {
  it('each call holds the whole answer so far, through the answer retry, and the last is the result text', async () => {
    const { loadSystem } = await import('../../src/mas/system-folders');
    const { ask } = await import('../../src/mas/ask');
    const { retrySuffix } = await import('../../src/mas/answer');
    const o = Object.fromEntries(
      (await overridesFor('sequential_light', join(tmp, 'ontext'))).map((x) => x.split('=') as [string, string]),
    );
    const system = await loadSystem('sequential_light', { backend: cpu, ckptOverride: o, task: 'math' });
    try {
      const texts: string[] = [];
      const ids: number[] = [];
      // random links write no \boxed{}, so the retry runs: its prompt is the decode's text plus the retry suffix
      const r = await ask(system, {
        question: 'What is 2 + 3?', rounds: 1, latentSteps: 2, sampling: { greedy: true }, maxNewTokens: 6,
        onText: (role, t) => { expect(role).toBe('solver'); texts.push(t); }, onToken: (_, id) => void ids.push(id),
      });
      expect(r.retried).toBe(true);
      expect(texts.at(-1)).toBe(r.text);
      const decoded = r.text.slice(0, r.text.indexOf(retrySuffix('math')));
      const tok = system.agents.get('solver')!.tokenizer;
      // before the retry each text is the decode so far; from the retry on, the decode's text + suffix + continuation
      const i = texts.findIndex((t) => t.startsWith(decoded + retrySuffix('math')));
      expect(i).toBeGreaterThan(0);
      expect(texts[i - 1]).toBe(decoded);
      for (const t of texts.slice(0, i)) expect(decoded.startsWith(t)).toBe(true);
      expect(tok.decode(ids.slice(0, r.stages.at(-1)!.tokens), { skipSpecialTokens: true })).toBe(decoded);
      expect(new Set(texts).size).toBe(texts.length); // a call only when the text changed
    } finally {
      system.dispose();
    }
  });
});

describe('a released style without its checkpoints', () => {
  it('rmas ask --style sequential_scaled (Gemma 3, Llama, Qwen3.5) offline stops with the error of its first missing role', async () => {
    const cache = join(tmp, 'empty-hub');
    const saved = { ...process.env };
    process.env.HF_HUB_CACHE = cache; // not even created
    process.env.HF_HUB_OFFLINE = '1';
    try {
      const r = await runAsk({ style: 'sequential_scaled', question: 'What is 1 + 1?', json: true }, cpu);
      // every backbone family is runnable now: what stops it is the planner's checkpoint, named with the ways to get it
      const repo = 'RecursiveMAS/Sequential-Scaled-Planner-Gemma3-4B';
      expect([r.error?.name, r.error?.message]).toEqual([
        'HubOffline',
        `role planner of sequential_scaled: ${repo} is not in the Hugging Face cache at ${cache} and HF_HUB_OFFLINE is set, so nothing ` +
          `is downloaded; unset HF_HUB_OFFLINE, or fetch it first while online (rmas download ${repo}); or pass --ckpt_override ` +
          `planner=DIR with a local copy of ${repo}`,
      ]);
    } finally {
      process.env = saved;
    }
  });
});
