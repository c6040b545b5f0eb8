/**
 * Loading a RecursiveMAS system (Node): for each role of a style, its model folder (an upstream role
 * repo: base model + tokenizer + inner links), and the outer-link folder. Folders come from
 * `ckptOverride` (role key or `outer` → local path) or else from the local Hugging Face hub cache under
 * the style's default repo ids. Every link is checked against the hidden sizes of the agents it connects.
 */
import { InvalidArgument, MissingCheckpoint, ShapeMismatch } from '../errors';
import { loadDecoderFromDir, readGenerationConfig, type Decoder, type GenerationDefaults } from '../model';
import type { Backend } from '../tensor/backend';
import { loadTokenizerFromDir, type Tokenizer } from '../tokenizer';
import { InnerLink, OuterLink } from './links';
import type { TaskKind } from './prompts';
import { getStyle, type StyleSpec } from './styles';
import { adapterTaskFor, hfCacheSnapshot, readLinkFile, resolveOuterFolder, resolveRoleFolder } from './upstream';

export interface Agent {
  role: string;
  /** The repo id or folder it was loaded from (for the dump manifest and messages). */
  source: string;
  dir: string;
  decoder: Decoder;
  tokenizer: Tokenizer;
  /** Null in text mode (links are not loaded). */
  inner: InnerLink | null;
  generation: GenerationDefaults;
}

export interface MasSystem {
  style: StyleSpec;
  agents: ReadonlyMap<string, Agent>;
  outer: ReadonlyMap<string, OuterLink>;
  backend: Backend;
  /** The adapter task the links were resolved for (null: one adapter per role). */
  adapterTask: 'math' | 'code' | null;
  dispose(): void;
}

export interface LoadSystemOptions {
  backend: Backend;
  /** Role key (or `outer`) → local folder, like upstream's --ckpt_override KEY=PATH. */
  ckptOverride?: Readonly<Record<string, string>>;
  /** The question's task; code picks the code adapters of task-scoped styles. */
  task: TaskKind;
  /** Load inner and outer links (false for the text-MAS baseline, which needs none). Default true. */
  links?: boolean;
  onProgress?: (message: string) => void;
}

async function locate(what: string, key: string, repo: string, override: string | undefined): Promise<{ dir: string; source: string }> {
  if (override) return { dir: override, source: override };
  const snap = await hfCacheSnapshot(repo);
  if (snap) return { dir: snap, source: repo };
  throw new MissingCheckpoint(
    `${what} has no checkpoint: pass --ckpt_override ${key}=DIR with a local folder, or download ${repo} ` +
      `into the Hugging Face cache (huggingface-cli download ${repo})`,
  );
}

export async function loadSystem(styleName: string, opts: LoadSystemOptions): Promise<MasSystem> {
  const style = getStyle(styleName);
  const withLinks = opts.links ?? true;
  const override = opts.ckptOverride ?? {};
  const known = [...style.roles.map((r) => r.key), 'outer'];
  for (const k of Object.keys(override)) {
    if (!known.includes(k)) throw new InvalidArgument(`--ckpt_override ${k}=…: style ${style.name} has no role '${k}'; its keys are ${known.join(', ')}`);
  }
  const adapterTask = style.taskScoped ? adapterTaskFor(opts.task) : null;
  const say = opts.onProgress ?? (() => {});
  const agents = new Map<string, Agent>();
  const outer = new Map<string, OuterLink>();
  const dispose = () => {
    for (const a of agents.values()) { a.decoder.dispose(); a.inner?.dispose(); }
    for (const l of outer.values()) l.dispose();
  };
  try {
    for (const role of style.roles) {
      const { dir, source } = await locate(`role ${role.key} of ${style.name}`, role.key, role.repo, override[role.key]);
      const ckpt = await resolveRoleFolder(role.key, dir, adapterTask, { requireInner: withLinks });
      say(`${role.key}: loading ${source}`);
      const decoder = await loadDecoderFromDir(dir, opts.backend, { what: `role ${role.key}` });
      const agent: Agent = { role: role.key, source, dir, decoder, tokenizer: await loadTokenizerFromDir(dir), inner: null, generation: { sampling: { greedy: true }, eosTokenIds: [] } };
      agents.set(role.key, agent);
      agent.generation = await readGenerationConfig(dir, [...decoder.config.eosTokenIds, ...agent.tokenizer.eosTokenIds]);
      if (withLinks && ckpt.innerPath) {
        agent.inner = InnerLink.fromStateDict(opts.backend, await readLinkFile(ckpt.innerPath), {
          type: ckpt.innerType, d: decoder.config.hidden, name: `${role.key} inner link (${ckpt.innerPath})`,
        });
        agent.inner.freeze();
      }
    }
    if (withLinks) {
      const { dir, source } = await locate(`the outer links of ${style.name}`, 'outer', style.outerRepo, override.outer);
      say(`outer links: loading ${source}`);
      const files = await resolveOuterFolder(dir, adapterTask, style.links.map((l) => l.key));
      for (const spec of style.links) {
        const f = files.get(spec.key)!;
        const dIn = agents.get(spec.from)!.decoder.config.hidden;
        const dOut = agents.get(spec.to)!.decoder.config.hidden;
        if ((f.inDim !== undefined && f.inDim !== dIn) || (f.outDim !== undefined && f.outDim !== dOut)) {
          throw new ShapeMismatch(`outer link ${spec.key} (${spec.from} → ${spec.to}): its manifest says ${f.inDim} → ${f.outDim} but the agents ` +
            `have hidden sizes ${dIn} → ${dOut}; the outer links belong to other models`);
        }
        const link = OuterLink.fromStateDict(opts.backend, await readLinkFile(f.path), {
          type: f.type, dIn, dOut, name: `${spec.key} (${spec.from} → ${spec.to}, ${f.path})`,
        });
        outer.set(spec.key, link.freeze());
      }
    }
  } catch (e) {
    dispose();
    throw e;
  }
  return { style, agents, outer, backend: opts.backend, adapterTask, dispose };
}
