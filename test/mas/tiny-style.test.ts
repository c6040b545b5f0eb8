/**
 * The embedded style tiny_sequential (issue 7) on a stand-in of models/tiny/system (test/tiny-style-standin.ts:
 * same layout, random tiny models and the golden links), reached through RMAS_TINY_SYSTEM or embeddedRoot:
 * the registry entry, `rmas ask` without --style runs it with the prompts of its prompts.json (read back
 * from the dumped prompt ids), --prompts replaces them, --ckpt_override still wins, missing files say how
 * to rebuild them, and bin/rmas.js finds it from another working folder.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultMaxNewTokens } from '../../src/mas/budget';
import { loadPromptSet } from '../../src/mas/prompts';
import { ALL_STYLE_NAMES, DEFAULT_STYLE, STYLE_NAMES, getStyle, schedule } from '../../src/mas/styles';
import { embeddedRoot, loadSystem, packageRoot, TINY_SYSTEM_ENV } from '../../src/mas/system-folders';
import { CpuBackend } from '../../src/tensor/cpu';
import { loadTokenizerFromDir } from '../../src/tokenizer';
import { TINY_PROMPT_FILE } from '../../scripts/tiny-system/prompts';
import { buildTinyStandIn } from '../tiny-style-standin';
import { readDump, runAsk } from './ask-util';

const REPO = resolve(import.meta.dirname, '../..');
const tmp = mkdtempSync(join(tmpdir(), 'tiny-style-'));
const cpu = new CpuBackend('f32');
const saved = process.env[TINY_SYSTEM_ENV];
let standIn = '';
beforeAll(async () => {
  standIn = await buildTinyStandIn(join(tmp, 'system'));
  process.env[TINY_SYSTEM_ENV] = standIn;
});
afterAll(() => {
  if (saved === undefined) delete process.env[TINY_SYSTEM_ENV];
  else process.env[TINY_SYSTEM_ENV] = saved;
  rmSync(tmp, { recursive: true, force: true });
});

const Q = 'What is 2+3?';
const FLAGS = {
  question: Q,
  num_recursive_rounds: '2',
  latent_length: '3',
  greedy: true,
  max_new_tokens: '6',
  no_ans: true,
  json: true,
} as const;

/** A copy of the stand-in with `drop` (paths relative to it) removed. */
function brokenCopy(name: string, drop: string): string {
  const dir = join(tmp, name);
  cpSync(standIn, dir, { recursive: true });
  rmSync(join(dir, drop), { recursive: true, force: true });
  return dir;
}

describe('tiny_sequential in the style registry', () => {
  it('is a chain like sequential_light, one adapter per role, with embedded folders and its prompt file', () => {
    const tiny = getStyle('tiny_sequential');
    const light = getStyle('sequential_light');
    expect([tiny.shape, tiny.decoder, tiny.taskScoped, tiny.tools]).toEqual(['chain', 'solver', false, false]);
    expect(tiny.roles.map((r) => [r.key, r.repo])).toEqual([
      ['planner', 'models/tiny/system/planner'], ['critic', 'models/tiny/system/critic'], ['solver', 'models/tiny/system/solver'],
    ]);
    expect(tiny.outerRepo).toBe('models/tiny/system/outer');
    expect(tiny.embedded).toEqual({ root: 'models/tiny/system', prompts: 'prompts.json', rebuild: 'npm run tiny:build:sequential' });
    expect(tiny.links).toEqual(light.links);
    for (const rounds of [1, 3]) expect(schedule(tiny, rounds)).toEqual(schedule(light, rounds));
    expect(light.embedded).toBeUndefined();
  });

  it('is the default; STYLE_NAMES keeps the five released styles; UnknownStyle lists all eight', () => {
    expect(DEFAULT_STYLE).toBe('tiny_sequential');
    expect(STYLE_NAMES).toEqual(['sequential_light', 'sequential_scaled', 'mixture', 'distillation', 'deliberation']);
    expect(ALL_STYLE_NAMES).toEqual([...STYLE_NAMES, 'tiny_sequential', 'tiny_distillation', 'tiny_recursion']);
    expect(() => getStyle('tiny')).toThrow(
      /choose one of sequential_light, sequential_scaled, mixture, distillation, deliberation, tiny_sequential, tiny_distillation, tiny_recursion$/,
    );
    expect([
      defaultMaxNewTokens(getStyle('tiny_sequential'), { task: 'math' }),
      defaultMaxNewTokens(getStyle('tiny_sequential'), { task: 'code' }),
      defaultMaxNewTokens(getStyle('tiny_distillation'), { dataset: 'math500' }),
      defaultMaxNewTokens(getStyle('sequential_light'), { task: 'math' }),
    ]).toEqual([64, 64, 64, 1000]);
  });

  it('the system folder is found from the module, not the working folder; the option and the variable move it', async () => {
    expect(await packageRoot()).toBe(REPO);
    const tiny = getStyle('tiny_sequential');
    delete process.env[TINY_SYSTEM_ENV];
    try {
      expect(await embeddedRoot(tiny)).toBe(`${REPO}/models/tiny/system`);
    } finally {
      process.env[TINY_SYSTEM_ENV] = standIn;
    }
    expect(await embeddedRoot(tiny)).toBe(standIn);
    expect(await embeddedRoot(tiny, '/elsewhere/')).toBe('/elsewhere');
    await expect(embeddedRoot(getStyle('mixture'))).rejects.toMatchObject({ name: 'InvalidArgument' });
  });
});

describe('rmas ask with the embedded system', () => {
  it('without --style runs tiny_sequential from its folder with the prompts of prompts.json', async () => {
    const dump = join(tmp, 'dump-default');
    const r = await runAsk({ ...FLAGS, dump }, cpu);
    expect(r.error).toBeNull();
    expect(r.err).toContain('loaded tiny_sequential');
    expect(r.err).toContain(`planner: loading ${standIn}/planner`);
    const stages = await readDump(dump);
    expect(stages.map((s) => `${s.round} ${s.role}`)).toEqual(['1 planner', '1 critic', '1 solver', '2 planner', '2 critic', '2 solver']);
    const toks = {
      planner: await loadTokenizerFromDir(`${standIn}/planner`),
      critic: await loadTokenizerFromDir(`${standIn}/critic`),
      solver: await loadTokenizerFromDir(`${standIn}/solver`),
    };
    const piece = (i: number, k: number) =>
      toks[stages[i].role as keyof typeof toks].decode(Array.from(stages[i].tensors.get(`ids.${k}`)!.values));
    // the rendered prompts hold the tiny templates, slot by slot (the chat template wraps them)
    expect(piece(0, 0)).toContain('You are a helpful assistant.');
    expect(piece(0, 0)).toContain(`Question: ${Q}\nWrite the plan.`);
    expect(piece(1, 0)).toContain(`Question: ${Q}\nPlan:\n`);
    expect(piece(1, 1).startsWith('\nWork out each step.')).toBe(true);
    expect(piece(2, 0)).toContain(`Question: ${Q}\nRefined plan:\n`);
    expect(piece(2, 1).startsWith('\nGive the answer.')).toBe(true);
    expect(piece(3, 0)).toContain(`Question: ${Q}\nFeedback:\n`);
    expect(piece(3, 1).startsWith('\nWrite the plan.')).toBe(true);
    // exactly what sequential_light computes on the same folders with the same file as --prompts
    const same = await runAsk({
      ...FLAGS, style: 'sequential_light', prompts: join(standIn, 'prompts.json'),
      ckpt_override: [...['planner', 'critic', 'solver'].map((k) => `${k}=${standIn}/${k}`), `outer=${standIn}/outer`],
    }, cpu);
    expect(same.error).toBeNull();
    const [a, b] = [JSON.parse(r.out), JSON.parse(same.out)] as { text: string; tokens: number }[];
    expect([a.text, a.tokens]).toEqual([b.text, b.tokens]);
  });

  it("--prompts replaces the style's prompts (laid over the defaults, not over prompts.json), " +
    'even where prompts.json is absent', async () => {
    const dir = brokenCopy('no-prompts', 'prompts.json');
    const file = join(tmp, 'mine.json');
    writeFileSync(file, JSON.stringify({ templates: { 'chain.planner.first': 'Q: {question}\nMARKER plan please.' } }));
    const dump = join(tmp, 'dump-mine');
    const saved = process.env[TINY_SYSTEM_ENV];
    process.env[TINY_SYSTEM_ENV] = dir;
    try {
      const r = await runAsk({ ...FLAGS, num_recursive_rounds: '1', prompts: file, dump }, cpu);
      expect(r.error).toBeNull();
    } finally {
      process.env[TINY_SYSTEM_ENV] = saved;
    }
    const stages = await readDump(dump);
    const tok = await loadTokenizerFromDir(`${dir}/planner`);
    const planner = tok.decode(Array.from(stages[0].tensors.get('ids.0')!.values));
    expect(planner).toContain(`Q: ${Q}\nMARKER plan please.`);
    expect(planner).not.toContain('Write the plan.');
    const critic = (await loadTokenizerFromDir(`${dir}/critic`)).decode(Array.from(stages[1].tensors.get('ids.1')!.values));
    expect(critic).not.toContain('Work out each step.'); // the default critic template, not the tiny one
    expect(critic).toContain(loadPromptSet({}).templates['chain.critic.first'].split('\n').at(-1)!.trim().slice(0, 20));
  });

  it('loadSystem: embeddedRoot option, system.prompts from the file, an override wins per role', async () => {
    const other = join(tmp, 'other-critic');
    cpSync(join(standIn, 'critic'), other, { recursive: true });
    const sys = await loadSystem('tiny_sequential', { backend: cpu, task: 'math', embeddedRoot: standIn, ckptOverride: { critic: other } });
    try {
      expect([...sys.agents.values()].map((a) => a.source)).toEqual([`${standIn}/planner`, other, `${standIn}/solver`]);
      expect(sys.prompts!.templates).toEqual(loadPromptSet(JSON.parse(JSON.stringify(TINY_PROMPT_FILE))).templates);
      expect([...sys.outer.keys()]).toEqual(['outer_12', 'outer_23', 'outer_31']);
      expect(sys.adapterTask).toBeNull();
    } finally {
      sys.dispose();
    }
    const bare = await loadSystem('tiny_sequential', {
      backend: cpu,
      task: 'math',
      embeddedRoot: standIn,
      stylePrompts: false,
      links: false,
    });
    expect(bare.prompts).toBeUndefined();
    bare.dispose();
  });
});

describe('missing embedded files', () => {
  const hint = "`npm run tiny:build:sequential`";
  it('an empty system folder: MissingCheckpoint naming the prompt file and the rebuild command', async () => {
    const empty = join(tmp, 'empty');
    mkdirSync(empty, { recursive: true });
    await expect(loadSystem('tiny_sequential', { backend: cpu, task: 'math', embeddedRoot: empty })).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringMatching(
        new RegExp(
          `^the prompts of tiny_sequential: the tiny system files are missing \\(${empty}/prompts\\.json does not exist.*rebuild them with ${hint}`,
        ),
      ),
    });
    // with its own prompts the first missing thing is the planner's folder
    const r = await loadSystem('tiny_sequential', { backend: cpu, task: 'math', embeddedRoot: empty, stylePrompts: false }).catch(
      (e: Error) => e,
    );
    expect(r).toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringContaining(
        `role planner of tiny_sequential: the tiny system files are missing (role planner: ${empty}/planner is not a folder`,
      ),
    });
    expect((r as Error).message).toContain(hint);
  });

  for (const [drop, what, name] of [
    ['planner/adapter.pt', 'role planner of tiny_sequential', 'MissingCheckpoint'],
    ['outer', 'the outer links of tiny_sequential', 'MissingCheckpoint'],
    ['solver/model.safetensors', 'role solver of tiny_sequential', 'CorruptCheckpoint'],
  ] as const) {
    it(`without ${drop}: ${name} for ${what} with the rebuild command`, async () => {
      const dir = brokenCopy(drop.replace(/\W/g, '-'), drop);
      const saved = process.env[TINY_SYSTEM_ENV];
      process.env[TINY_SYSTEM_ENV] = dir;
      try {
        const r = await runAsk({ ...FLAGS, num_recursive_rounds: '1' }, cpu);
        expect(r.error?.name).toBe(name);
        const how = name === 'MissingCheckpoint' ? 'missing' : 'damaged or incomplete';
        expect(r.error?.message.startsWith(`${what}: the tiny system files are ${how} (`)).toBe(true);
        expect(r.error?.message).toContain(drop.split('/').at(-1)!.replace('outer', `${dir}/outer`));
        expect(r.error?.message).toContain(`rebuild them with ${hint}`);
      } finally {
        process.env[TINY_SYSTEM_ENV] = saved;
      }
    });
  }
});

describe('bin/rmas.js from another working folder', () => {
  it('runs the default style and prints what the in-process run computes', async () => {
    const cwd = join(tmp, 'cwd');
    mkdirSync(cwd, { recursive: true });
    const args = [
      'ask',
      '--question',
      Q,
      '--num_recursive_rounds',
      '2',
      '--latent_length',
      '3',
      '--greedy',
      '--max_new_tokens',
      '6',
      '--no_ans',
      '--json',
      '--backend',
      'cpu',
    ];
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
      execFile(
        process.execPath,
        [join(REPO, 'bin/rmas.js'), ...args],
        { cwd, encoding: 'utf8', env: { ...process.env, [TINY_SYSTEM_ENV]: standIn } },
        (err, stdout, stderr) => {
          res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
        },
      );
    });
    expect(r.stderr).toContain('loaded tiny_sequential');
    expect(r.code).toBe(0);
    const same = await runAsk(FLAGS, cpu);
    const [a, b] = [JSON.parse(r.stdout), JSON.parse(same.out)] as { text: string; tokens: number }[];
    expect([a.text, a.tokens]).toEqual([b.text, b.tokens]);
  });
});
