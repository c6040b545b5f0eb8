/**
 * Tiny multi-agent systems in upstream's checkpoint layout (docs/method.md §3.1, §3.4), for tests:
 * one role folder per agent (a copy of a tiny model from models/tiny/ plus its inner links and
 * adapter_config.json) and one outer folder with the outer links and their manifests.
 *
 * Sequential styles mimic the released repos: task-scoped `adapter(math|code).pt` with an
 * innerlink_config.json, outer files named like `Planner-Critic-Outerlink(math).pt` with a task-scoped
 * outerlink_config.json and outer_adapter_config(math|code).json. With `taskScoped: false` they mimic what
 * training writes instead (adapter.pt, outer_12.pt, …, untasked manifests). Mixture, distillation and
 * deliberation ship one adapter.pt per role and an untasked outerlink_config.json.
 *
 * Links are InnerLink / OuterLink default inits from fixed seeds, written bf16: the same bytes on every run.
 * hub-layout.ts lays the same files out under the released repo ids, with the families' real chat templates.
 */
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidArgument, UnknownStyle } from '../../src/errors.ts';
import { InnerLink, OuterLink } from '../../src/mas/links.ts';
import { type AdapterTask, outerManifests, writeLinkFile } from '../../src/mas/upstream.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { TINY_MODELS_DIR } from './paths.ts';

export type TinyStyle = 'sequential_light' | 'sequential_scaled' | 'mixture' | 'distillation' | 'deliberation';
export const TINY_STYLES: readonly TinyStyle[] = ['sequential_light', 'sequential_scaled', 'mixture', 'distillation', 'deliberation'];

export const TINY_HIDDEN: Readonly<Record<string, number>> = {
  'qwen3-tiny': 48, 'llama-tiny': 64, 'qwen2-tiny': 32, 'mistral-tiny': 40, 'gemma3-tiny': 56, 'qwen3_5-tiny': 48, 'qwen3_5-tied-tiny': 40,
};

/**
 * style → role → tiny model folder name (under models/tiny/): each role of its released backbone's family and
 * layout (sequential_light: Qwen3 / Llama / Qwen2; sequential_scaled: Gemma 3 / Llama / Qwen3.5-4B; mixture: Qwen2 /
 * Qwen2 / Mistral / Qwen3.5-2B; distillation: Qwen3.5-9B / Qwen3.5-4B; deliberation: Qwen3.5-4B twice), the 9B as
 * qwen3_5-tiny (untied), the 2B and 4B as qwen3_5-tied-tiny. Sizes differ between the two ends of every link but
 * deliberation's, whose two agents share one backbone as released, so that a mix-up of senders and receivers
 * cannot pass by accident.
 */
export const TINY_MAS_ROLES: Readonly<Record<TinyStyle, Readonly<Record<string, string>>>> = {
  sequential_light: { planner: 'qwen3-tiny', critic: 'llama-tiny', solver: 'qwen2-tiny' },
  sequential_scaled: { planner: 'gemma3-tiny', critic: 'llama-tiny', solver: 'qwen3_5-tied-tiny' },
  mixture: { math: 'qwen2-tiny', code: 'qwen2-tiny', science: 'mistral-tiny', summarizer: 'qwen3_5-tied-tiny' },
  distillation: { expert: 'qwen3_5-tiny', learner: 'qwen3_5-tied-tiny' },
  deliberation: { reflector: 'qwen3_5-tied-tiny', toolcaller: 'qwen3_5-tied-tiny' },
};

export interface TinyOuterSpec {
  key: string;
  from: string;
  to: string;
  /** Released file name without extension (and without the `(task)` suffix of sequential repos). */
  stem: string;
}

const cap = (s: string) => s[0].toUpperCase() + s.slice(1);
const link = (key: string, from: string, to: string): TinyOuterSpec => ({ key, from, to, stem: `${cap(from)}-${cap(to)}-Outerlink` });
const SEQ_LINKS = [link('outer_12', 'planner', 'critic'), link('outer_23', 'critic', 'solver'), link('outer_31', 'solver', 'planner')];

/** style → outer links (legacy key, source role, target role, released file stem). */
export const TINY_MAS_LINKS: Readonly<Record<TinyStyle, readonly TinyOuterSpec[]>> = {
  sequential_light: SEQ_LINKS,
  sequential_scaled: SEQ_LINKS,
  mixture: [
    link('outer_1s', 'math', 'summarizer'), link('outer_2s', 'code', 'summarizer'), link('outer_3s', 'science', 'summarizer'),
    link('outer_s1', 'summarizer', 'math'), link('outer_s2', 'summarizer', 'code'), link('outer_s3', 'summarizer', 'science'),
  ],
  distillation: [link('outer_el', 'expert', 'learner'), link('outer_le', 'learner', 'expert')],
  deliberation: [link('outer_rt', 'reflector', 'toolcaller'), link('outer_tr', 'toolcaller', 'reflector')],
};

/** Upstream's mas_shape / paradigm per style. */
export const TINY_MAS_PARADIGM: Readonly<Record<TinyStyle, string>> = {
  sequential_light: 'chain', sequential_scaled: 'chain', mixture: 'hie', distillation: 'distill', deliberation: 'deliberation',
};

const MODEL_FILES = [
  'config.json',
  'generation_config.json',
  'model.safetensors',
  'tokenizer.json',
  'tokenizer_config.json',
  'chat_template.jinja',
];
const TASKS: readonly AdapterTask[] = ['math', 'code'];
const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;

const folderName = (style: TinyStyle, role: string) => `${style}-${role}`;

/**
 * The released sliding window in a role copy's config.json (Mistral 7B: 4096, Gemma 3: 1024). The tiny models'
 * windows (4) are narrow so that the decoder goldens test the window; in a system they would cut the latents in
 * a prompt's middle off from the positions that answer, which the released windows never do at these lengths.
 */
async function releasedWindow(file: string): Promise<void> {
  const c = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  const t = (c.text_config ?? c) as Record<string, unknown>;
  if (typeof t.sliding_window !== 'number') return;
  t.sliding_window = t.model_type === 'gemma3_text' ? 1024 : 4096;
  await writeFile(file, json(c));
}

export interface TinySystemOptions {
  seed?: number;
  taskScoped?: boolean;
  linkFormat?: 'pt' | 'safetensors';
  /**
   * Folder of a role key or of 'outer', relative to outDir, in place of `<style>-<role>` / `<style>-outerlinks`:
   * hub-layout.ts writes each repo straight into its `<Org>/<Name>` folder.
   */
  folders?: Readonly<Record<string, string>>;
}

/** Writes role folders and an outer folder for `style` under outDir; returns their paths. */
export async function buildTinySystem(
  style: TinyStyle,
  outDir: string,
  opts: TinySystemOptions = {},
): Promise<{ roles: Record<string, string>; outer: string }> {
  if (!Object.hasOwn(TINY_MAS_ROLES, style))
    throw new UnknownStyle(`unknown style '${style}'; tiny systems exist for ${TINY_STYLES.join(', ')}`);
  const seed = opts.seed ?? 1;
  if (!Number.isSafeInteger(seed) || seed < 0) throw new InvalidArgument(`seed must be a non-negative integer, got ${seed}`);
  const ext = `.${opts.linkFormat ?? 'pt'}`;
  const sequential = style.startsWith('sequential');
  const tasked = sequential && (opts.taskScoped ?? true);
  const backend = new CpuBackend('f32');
  // Every link gets its own seed: role/link index, task, style-independent base.
  let n = 0;
  const nextSeed = () => seed * 1000 + ++n;

  const roles: Record<string, string> = {};
  for (const [role, model] of Object.entries(TINY_MAS_ROLES[style])) {
    const dir = join(outDir, opts.folders?.[role] ?? folderName(style, role));
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    for (const f of MODEL_FILES) {
      await copyFile(join(TINY_MODELS_DIR, model, f), join(dir, f)).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT' || f !== 'chat_template.jinja') throw e;
      });
    }
    await releasedWindow(join(dir, 'config.json'));
    await writeFile(join(dir, 'adapter_config.json'), json({ adapter_type: 'ln_res_adapter' }));
    const d = TINY_HIDDEN[model];
    const inner = async (file: string) => {
      const l = InnerLink.create(backend, d, { seed: nextSeed(), name: `${role} inner` });
      await writeLinkFile(l, join(dir, file));
      l.dispose();
    };
    if (tasked) {
      for (const t of TASKS) await inner(`adapter(${t})${ext}`);
      const tasks = Object.fromEntries(TASKS.map((t) => [t, { 'adapter.pt': `adapter(${t})${ext}` }]));
      await writeFile(join(dir, 'innerlink_config.json'), json({ format_version: 1, tasks }));
    } else {
      await inner(`adapter${ext}`);
    }
    roles[role] = dir;
  }

  const outer = join(outDir, opts.folders?.outer ?? folderName(style, 'outerlinks'));
  await rm(outer, { recursive: true, force: true });
  await mkdir(outer, { recursive: true });
  const paradigm = TINY_MAS_PARADIGM[style];
  const writeLinks = async (task: AdapterTask | null) => {
    const entries = [];
    for (const s of TINY_MAS_LINKS[style]) {
      const inDim = TINY_HIDDEN[TINY_MAS_ROLES[style][s.from]];
      const outDim = TINY_HIDDEN[TINY_MAS_ROLES[style][s.to]];
      const filename = task ? `${s.stem}(${task})${ext}` : sequential ? `${s.key}${ext}` : `${s.stem}${ext}`;
      const l = OuterLink.create(backend, inDim, outDim, { seed: nextSeed(), name: s.key });
      await writeLinkFile(l, join(outer, filename));
      l.dispose();
      entries.push({ key: s.key, filename, type: 'outer_ln_res_adapter', inDim, outDim });
    }
    return outerManifests(paradigm, entries);
  };
  const extra = (task: AdapterTask) => ({ mas_shape: paradigm, mas_task: task, num_recursive_rounds: 3 });
  if (tasked) {
    const tasks: Record<string, unknown> = {};
    for (const t of TASKS) {
      const { outerlinkConfig, outerAdapterConfig } = await writeLinks(t);
      const legacy = `outer_adapter_config(${t}).json`;
      tasks[t] = { legacy_config_filename: legacy, adapters: outerlinkConfig.adapters };
      await writeFile(join(outer, legacy), json({ ...extra(t), ...outerAdapterConfig }));
    }
    await writeFile(join(outer, 'outerlink_config.json'), json({ format_version: 1, paradigm, tasks }));
  } else {
    const { outerlinkConfig, outerAdapterConfig } = await writeLinks(null);
    await writeFile(join(outer, 'outerlink_config.json'), json(outerlinkConfig));
    await writeFile(join(outer, 'outer_adapter_config.json'), json({ ...extra('math'), ...outerAdapterConfig }));
  }
  return { roles, outer };
}
