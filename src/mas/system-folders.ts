/**
 * Loading a RecursiveMAS system from folders (Node): for each role of a style, its model folder (an upstream role
 * repo: base model + tokenizer + inner links), and the outer-link folder. Folders come from
 * `ckptOverride` (role key or `outer` → local path) or else from `repoFolder` under the style's default repo ids
 * (the runner's: the Hugging Face cache, downloading what it lacks); an embedded style (tiny_sequential) takes them from the package itself
 * (models/tiny/system, found from this module's URL so that any working folder works), never from the
 * cache, and brings its prompt file. Every link is checked against the hidden sizes of the agents it connects.
 *
 * The embedded system's folder can be moved with `embeddedRoot` or the environment variable
 * RMAS_TINY_SYSTEM (tests point it at a stand-in; a freshly built system can be tried before it is copied in).
 */
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint, RmasError, ShapeMismatch } from '../errors';
import { loadDecoderFromDir, readGenerationConfig } from '../model';
import type { Backend } from '../tensor/backend';
import { loadTokenizerFromDir } from '../tokenizer';
import { InnerLink, OuterLink } from './links';
import { loadPromptSet, type PromptSet, type TaskKind } from './prompts';
import { checkBackbones, getStyle, missingEmbedded, type StyleSpec } from './styles';
import { adapterTaskFor, holdsLinksOnly, readLinkFile, resolveOuterFolder, resolveRoleFolder } from './upstream';
import { nodeImport } from '../util/node-import';
import type { Agent, MasSystem } from './system';

export interface LoadSystemOptions {
  backend: Backend;
  /**
   * Role key → the backend that role runs on (its decoder, its inner link and the outer links it sends),
   * for a system that does not fit on one device: one role per GPU. Roles not named run on `backend`.
   * Messages move to the receiver's backend (moveTensor).
   */
  placement?: Readonly<Record<string, Backend>>;
  /** Role key (or `outer`) → local folder, like upstream's --ckpt_override KEY=PATH. */
  ckptOverride?: Readonly<Record<string, string>>;
  /**
   * The local folder of a released repo id (the runner's: its snapshot in the Hugging Face cache, fetched from the hub
   * when missing). Without it a released role or outer folder needs a ckptOverride.
   */
  repoFolder?: (repo: string, what: string) => Promise<string>;
  /** The question's task; code picks the code adapters of task-scoped styles. */
  task: TaskKind;
  /** Load inner and outer links (false for the text-MAS baseline, which needs none). Default true. */
  links?: boolean;
  onProgress?: (message: string) => void;
  /** Folder of an embedded style's system in place of the package's (default: $RMAS_TINY_SYSTEM, else models/tiny/system). */
  embeddedRoot?: string;
  /** Load an embedded style's prompt file into MasSystem.prompts (default true; false when the caller brings its own). */
  stylePrompts?: boolean;
}

/** Environment variable that moves the embedded tiny system's folder (see embeddedRoot). */
export const TINY_SYSTEM_ENV = 'RMAS_TINY_SYSTEM';

/** The package root (this file is src/mas/system-folders.ts), as a folder path without a trailing separator. */
export async function packageRoot(): Promise<string> {
  const { fileURLToPath } = await nodeImport('node:url');
  return fileURLToPath(new URL('../../', import.meta.url)).replace(/[\\/]+$/, '');
}

const tinyEnv = (): string | undefined => (typeof process !== 'undefined' ? process.env?.[TINY_SYSTEM_ENV] || undefined : undefined);

/** The folder of an embedded style's system: `root`, else $RMAS_TINY_SYSTEM, else <package root>/<style.embedded.root>. */
export async function embeddedRoot(style: StyleSpec, root?: string): Promise<string> {
  if (!style.embedded)
    throw new InvalidArgument(`style ${style.name} ships no files in the package; its checkpoints come from the Hugging Face cache`);
  const dir = root || tinyEnv() || `${await packageRoot()}/${style.embedded.root}`;
  return dir.replace(/[\\/]+$/, '');
}

/** Where `repo` (a role repo or the outerRepo of an embedded style) lies under the system folder `root`. */
export function embeddedPath(style: StyleSpec, root: string, repo: string): string {
  const base = style.embedded?.root ?? '';
  return `${root}/${repo.startsWith(`${base}/`) ? repo.slice(base.length + 1) : repo}`;
}

/** The error for an embedded system whose files are absent or incomplete (Node: names the ways to point elsewhere). */
export function missingTinySystem(style: StyleSpec, what: string, detail: string): MissingCheckpoint {
  return missingEmbedded(style, what, detail, `or point ${TINY_SYSTEM_ENV} (or --ckpt_override ROLE=DIR) at a built system`);
}

/** Runs `body`; for files of the embedded system, a missing file becomes missingTinySystem and a damaged one says to rebuild. */
async function embeddedFiles<T>(style: StyleSpec, embedded: boolean, what: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (e) {
    if (embedded && e instanceof MissingCheckpoint) throw missingTinySystem(style, what, e.message);
    if (embedded && e instanceof CorruptCheckpoint)
      throw new CorruptCheckpoint(
        `${what}: the tiny system files are damaged or incomplete (${e.message}); rebuild them with \`${style.embedded?.rebuild}\``,
      );
    throw e;
  }
}

/** An embedded style's prompt set from `root` (its prompt file missing → missingTinySystem, with the --prompts way out). */
export async function loadEmbeddedPrompts(style: StyleSpec, root: string): Promise<PromptSet> {
  const file = `${root}/${style.embedded!.prompts}`;
  const fs = await nodeImport('node:fs/promises');
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    throw missingTinySystem(style, `the prompts of ${style.name}`, `${file} does not exist; --prompts FILE also gives them`);
  }
  return loadPromptSet(text, file);
}

/**
 * A released repo's folder through `repoFolder`; its named error (offline, gated, not found, a failed download) keeps its
 * class and gains `what` and `orElse`, the other way to give the folder.
 */
async function fromHub(what: string, repo: string, orElse: string, repoFolder: LoadSystemOptions['repoFolder']): Promise<string> {
  if (!repoFolder) throw new MissingCheckpoint(`${what} has no checkpoint: ${orElse}`);
  try {
    return await repoFolder(repo, what);
  } catch (e) {
    if (!(e instanceof RmasError)) throw e;
    const Named = e.constructor as new (message: string) => RmasError;
    throw new Named(`${what}: ${e.message}; or ${orElse}`);
  }
}

export async function loadSystem(styleName: string, opts: LoadSystemOptions): Promise<MasSystem> {
  const style = getStyle(styleName);
  const withLinks = opts.links ?? true;
  const override = opts.ckptOverride ?? {};
  const known = [...style.roles.map((r) => r.key), 'outer'];
  for (const k of Object.keys(override)) {
    if (!known.includes(k))
      throw new InvalidArgument(`--ckpt_override ${k}=…: style ${style.name} has no role '${k}'; its keys are ${known.join(', ')}`);
  }
  for (const k of Object.keys(opts.placement ?? {})) {
    if (!style.roles.some((r) => r.key === k))
      throw new InvalidArgument(
        `placement of role '${k}': style ${style.name} has no such role; its roles are ${style.roles.map((r) => r.key).join(', ')}`,
      );
  }
  const backendOf = (role: string): Backend => opts.placement?.[role] ?? opts.backend;
  const adapterTask = style.taskScoped ? adapterTaskFor(opts.task) : null;
  const say = opts.onProgress ?? (() => {});
  const root = style.embedded ? await embeddedRoot(style, opts.embeddedRoot) : null;
  /** A role's (or the outer links') folder: the override, the embedded folder, or the hub cache snapshot. */
  const where = async (
    what: string,
    key: string,
    repo: string,
    useOverride = true,
  ): Promise<{ dir: string; source: string; embedded: boolean }> => {
    const over = useOverride ? override[key] : undefined;
    if (over) return { dir: over, source: over, embedded: false };
    if (root === null) {
      const orElse = `pass --ckpt_override ${key}=DIR with a local copy of ${repo}`;
      return { dir: await fromHub(what, repo, orElse, opts.repoFolder), source: repo, embedded: false };
    }
    const dir = embeddedPath(style, root, repo);
    // the dump records the package path when the package's own system ran
    return { dir, source: opts.embeddedRoot || tinyEnv() ? dir : repo, embedded: true };
  };
  const prompts = root !== null && (opts.stylePrompts ?? true) ? await loadEmbeddedPrompts(style, root) : undefined;
  const agents = new Map<string, Agent>();
  const outer = new Map<string, OuterLink>();
  const dispose = () => {
    for (const a of agents.values()) { a.decoder.dispose(); a.inner?.dispose(); }
    for (const l of outer.values()) l.dispose();
  };
  // an override of links only (a train-inner save_dir, a bundle of one) keeps the style's model for that role
  const linksOnly = new Map<string, string>();
  for (const r of style.roles)
    if (override[r.key] !== undefined && (await holdsLinksOnly(override[r.key]!))) linksOnly.set(r.key, override[r.key]!);
  checkBackbones(style, style.roles.filter((r) => override[r.key] !== undefined && !linksOnly.has(r.key)).map((r) => r.key));
  try {
    for (const role of style.roles) {
      const what = `role ${role.key} of ${style.name}`;
      const linkDir = linksOnly.get(role.key) ?? null;
      // an override of links only: the model still comes from the style's repo
      const { dir, source, embedded } = linkDir === null || root !== null
        ? await where(what, role.key, role.repo, linkDir === null)
        : {
          dir: await fromHub(`${what}: ${linkDir} holds its inner link only, so the model comes from the style's repo ${role.repo}`,
            role.repo, "copy the link files into the role's model folder and pass that", opts.repoFolder),
          source: role.repo, embedded: false,
        };
      await embeddedFiles(style, embedded && linkDir === null, what, async () => {
        const ckpt = await resolveRoleFolder(role.key, linkDir ?? dir, adapterTask, {
          requireInner: withLinks,
          linksOnly: linkDir !== null,
        });
        say(
          `${role.key}: loading ${source}${linkDir !== null ? ` with the inner link of ${linkDir}` : ''}${backendOf(role.key) !== opts.backend ? ` on ${backendOf(role.key).name}` : ''}`,
        );
        const decoder = await loadDecoderFromDir(dir, backendOf(role.key), { what: `role ${role.key}` });
        const agent: Agent = {
          role: role.key,
          source,
          dir,
          decoder,
          tokenizer: null!,
          inner: null,
          generation: { sampling: { greedy: true }, eosTokenIds: [] },
        };
        agents.set(role.key, agent);
        agent.tokenizer = await loadTokenizerFromDir(dir);
        agent.generation = await readGenerationConfig(dir, [...decoder.config.eosTokenIds, ...agent.tokenizer.eosTokenIds]);
        if (withLinks && ckpt.innerPath) {
          agent.inner = InnerLink.fromStateDict(backendOf(role.key), await readLinkFile(ckpt.innerPath), {
            type: ckpt.innerType, d: decoder.config.hidden, name: `${role.key} inner link (${ckpt.innerPath})`,
          });
          agent.inner.freeze();
        }
      });
    }
    if (withLinks) {
      const what = `the outer links of ${style.name}`;
      const { dir, source, embedded } = await where(what, 'outer', style.outerRepo);
      say(`outer links: loading ${source}`);
      const files = await embeddedFiles(style, embedded, what, () => resolveOuterFolder(dir, adapterTask, style.links.map((l) => l.key)));
      for (const spec of style.links) {
        const f = files.get(spec.key)!;
        const dIn = agents.get(spec.from)!.decoder.config.hidden;
        const dOut = agents.get(spec.to)!.decoder.config.hidden;
        if ((f.inDim !== undefined && f.inDim !== dIn) || (f.outDim !== undefined && f.outDim !== dOut)) {
          throw new ShapeMismatch(
            `outer link ${spec.key} (${spec.from} → ${spec.to}): its manifest says ${f.inDim} → ${f.outDim} but the agents ` +
              `have hidden sizes ${dIn} → ${dOut}; the outer links belong to other models`,
          );
        }
        const state = await embeddedFiles(style, embedded, what, () => readLinkFile(f.path));
        const link = OuterLink.fromStateDict(backendOf(spec.from), state, {
          type: f.type, dIn, dOut, name: `${spec.key} (${spec.from} → ${spec.to}, ${f.path})`,
        });
        outer.set(spec.key, link.freeze());
      }
    }
  } catch (e) {
    dispose();
    throw e;
  }
  return { style, agents, outer, backend: opts.backend, adapterTask, ...(prompts ? { prompts } : {}), dispose };
}
