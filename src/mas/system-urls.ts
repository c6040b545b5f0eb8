/**
 * Loading a RecursiveMAS system from a SystemSpec without node:fs (the worker's path, also usable in Node):
 * each role's model folder by URL (loadDecoderFromUrl / loadTokenizerFromUrl), its generation_config.json,
 * and the links from URLs or bytes. A role whose model is a `.gguf` file takes its weights and config from
 * the GGUF and everything else (tokenizer, generation_config.json, an inner link not given) from its
 * `tokenizer` folder. Every link is checked against the hidden sizes of the agents it joins,
 * as the Node loader (system-folders.ts) does. All reads go through one fetch, which reports initiate/download events
 * and honours the abort signal; `fetchFile` replaces the network (a store-backed cache, files on disk in tests).
 * An embedded style (tiny_sequential) also needs its prompt file (`prompts` in the spec), loaded into
 * MasSystem.prompts; a missing file of that system says how to rebuild it.
 */
import { Cancelled, CorruptCheckpoint, InvalidArgument, MissingCheckpoint, ShapeMismatch } from '../errors';
import { parseGenerationConfig } from '../model/generate';
import { fetchModelFile, fileUrl, folderUrl, ggufTokenizerFolder, isGgufUrl, loadDecoderFromUrl } from '../model/url';
import { isNotFound } from '../formats/sources';
import type { Backend } from '../tensor/backend';
import { loadTokenizerFromUrl } from '../tokenizer/url';
import { InnerLink, OuterLink, type LinkStateDict } from './links';
import { loadPromptSet, type PromptSet } from './prompts';
import { getStyle, missingEmbedded } from './styles';
import type { Agent, MasSystem } from './system';
import type { LoadEvent, SystemSpec } from './spec';
import { adapterTaskFor, parseLinkBytes, pickOuterFiles, resolveRoleFiles, type AdapterTask, type RoleFolder } from './upstream';

export interface LoadSpecOptions {
  onEvent?: (e: LoadEvent) => void;
  signal?: AbortSignal;
  /**
   * Whole-file reads in place of the network (a store-backed cache, files on disk in tests): bytes, or null
   * where the file does not exist (→ 404). `onProgress` reports a download the hook makes itself.
   */
  fetchFile?: (url: string, signal?: AbortSignal, onProgress?: (loaded: number, total: number) => void) => Promise<Uint8Array | null>;
  /**
   * Range reads (a checkpoint's header and tensors) in place of the network: bytes start..end (inclusive, clipped
   * to the file) and the file's size, or null where the file does not exist (→ 404). With it, a store-backed cache
   * keeps only what the loader reads (never a vision tower's or Qwen3.5's mtp.* bytes); without it Range reads are
   * served from fetchFile's whole files.
   */
  fetchRange?: (url: string, start: number, end: number, signal?: AbortSignal) => Promise<{ bytes: Uint8Array; total: number } | null>;
  /** Load inner and outer links (false: text mode only). Default true. */
  links?: boolean;
}

const DEFAULT_INNER_TYPE = 'ln_res_adapter';
const DEFAULT_OUTER_TYPE = 'outer_ln_res_adapter';

const urlOf = (input: RequestInfo | URL) => (typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);

function throwIfAborted(signal: AbortSignal | undefined, what: string) {
  if (signal?.aborted) throw new Cancelled(`loading the system was cancelled during ${what}; nothing was kept`);
}

/**
 * A fetch that emits 'initiate' on the first request of a URL and 'download' as body bytes arrive (summed over
 * the Range reads of one file; total from Content-Range or Content-Length), passing `signal` on.
 */
export function progressFetch(opts: LoadSpecOptions): typeof fetch {
  const emit = opts.onEvent ?? (() => {});
  const seen = new Map<string, { loaded: number; total: number; covered: [number, number][] }>();
  const base: typeof fetch = opts.fetchFile
    ? async (input, init) => {
      const url = urlOf(input);
      const range = /^bytes=(\d+)-(\d+)$/.exec(new Headers(init?.headers).get('range') ?? '');
      if (range && opts.fetchRange && (init?.method ?? 'GET') === 'GET') {
        const got = await opts.fetchRange(url, Number(range[1]), Number(range[2]), opts.signal);
        if (!got) return new Response(null, { status: 404, statusText: 'Not Found' });
        const a = Number(range[1]);
        return new Response(got.bytes as BodyInit, { status: 206, headers: {
          'content-range': `bytes ${a}-${a + got.bytes.byteLength - 1}/${got.total}`, 'content-length': String(got.bytes.byteLength),
        } });
      }
      const file = url.replace(/^[a-z]+:\/\/[^/]*/i, '');
      let announced = false;
      const bytes = await opts.fetchFile!(url, opts.signal, (loaded, total) => {
        if (!announced) {
          announced = true;
          emit({ type: 'initiate', file });
        }
        emit({ type: 'download', file, loaded, total });
      });
      if (!bytes) return new Response(null, { status: 404, statusText: 'Not Found' });
      if ((init?.method ?? 'GET') === 'HEAD')
        return new Response(null, { status: 200, headers: { 'content-length': String(bytes.byteLength) } });
      return new Response(bytes as BodyInit, {
        status: 200,
        headers: { 'content-length': String(bytes.byteLength), 'content-type': 'application/octet-stream' },
      });
    }
    : (input, init) => globalThis.fetch(input, { ...init, ...(opts.signal ? { signal: opts.signal } : {}) });
  return async (input, init) => {
    throwIfAborted(opts.signal, urlOf(input));
    const url = urlOf(input);
    const file = url.replace(/^[a-z]+:\/\/[^/]*/i, '');
    let res: Response;
    try {
      res = await base(input, init);
    } catch (e) {
      throwIfAborted(opts.signal, url);
      throw e;
    }
    if (!res.ok || !res.body || (init?.method ?? 'GET') === 'HEAD') return res;
    let st = seen.get(url);
    const cr = /(\d+)-\d+\/(\d+)\s*$/.exec(res.headers.get('content-range') ?? '');
    const total = cr ? Number(cr[2]) : Number(res.headers.get('content-length') ?? 0);
    if (!st) {
      st = { loaded: 0, total, covered: [] };
      seen.set(url, st);
      emit({ type: 'initiate', file });
    }
    const s = st;
    // bytes of the file received at least once: a size probe or a re-read range is not counted twice
    let at = cr && res.status === 206 ? Number(cr[1]) : 0;
    const counted = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, ctl) {
        s.loaded += cover(s.covered, at, at + chunk.byteLength);
        at += chunk.byteLength;
        emit({ type: 'download', file, loaded: s.loaded, total: Math.max(s.total, s.loaded) });
        ctl.enqueue(chunk);
      },
    }));
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** Adds [a, b) to the sorted disjoint intervals `list` (merging); returns how many of its bytes were not in it yet. */
function cover(list: [number, number][], a: number, b: number): number {
  let added = b - a;
  let lo = a;
  let hi = b;
  const keep: [number, number][] = [];
  for (const [x, y] of list) {
    if (y < lo || x > hi) { keep.push([x, y]); continue; }
    added -= Math.max(0, Math.min(y, b) - Math.max(x, a));
    lo = Math.min(lo, x);
    hi = Math.max(hi, y);
  }
  keep.push([lo, hi]);
  keep.sort((p, q) => p[0] - q[0]);
  list.splice(0, list.length, ...keep);
  return added;
}

/** Bytes of a link given by URL (relative to `base`) or already held. */
async function linkBytes(ref: string | Uint8Array, fetcher: typeof fetch, base: string | undefined, what: string): Promise<Uint8Array> {
  if (typeof ref !== 'string') return ref;
  const url = base ? new URL(ref, base).href : folderUrl(ref).replace(/\/$/, '');
  const bytes = await fetchModelFile(url.replace(/[^/]*$/, ''), url.replace(/^.*\//, ''), { fetch: fetcher });
  if (!bytes) throw new InvalidArgument(`${what}: ${url} is empty`);
  return bytes;
}

/** Turns a link's state-dict mismatch into a ShapeMismatch that names the link and both sizes. */
function checkedLink<T>(make: () => T, link: string, want: string): T {
  try {
    return make();
  } catch (e) {
    if (e instanceof ShapeMismatch)
      throw new ShapeMismatch(`${link} does not fit its agents (${want}): ${e.message}; give links trained for these models`);
    throw e;
  }
}

/** For link messages: which GGUF file (and architecture) an agent's backbone came from; '' for a folder. */
const fromGguf = (a: Agent) => (isGgufUrl(a.source) ? ` (${a.decoder.config.family} from the GGUF ${a.source})` : '');

/** The shape of a link's first weight matrix, for messages. */
const firstShape = (s: LinkStateDict) => [...s.values()][0]?.shape.join('×') ?? '?';

/** The prompt set of a spec's prompt file; an embedded style's missing file says how to rebuild it. */
async function specPrompts(spec: SystemSpec, fetcher: typeof fetch, embedded: boolean): Promise<PromptSet | undefined> {
  if (spec.prompts === undefined) {
    if (embedded)
      throw new InvalidArgument(
        `system spec: style ${spec.style} needs prompts, the URL of its prompts.json (models/tiny-system.json names it)`,
      );
    return undefined;
  }
  let bytes: Uint8Array;
  try {
    bytes = await linkBytes(spec.prompts, fetcher, undefined, 'prompts file');
  } catch (e) {
    if (!isNotFound(e) && !(e instanceof MissingCheckpoint)) throw e;
    const what = `the prompts of ${spec.style}`;
    if (embedded) throw missingEmbedded(getStyle(spec.style), what, `${String(spec.prompts)}: ${(e as Error).message}`, 'then reload');
    throw new MissingCheckpoint(`${what}: ${String(spec.prompts)} cannot be fetched (${(e as Error).message}); fix the spec's prompts URL`);
  }
  const file = typeof spec.prompts === 'string' ? spec.prompts : `the prompts file of ${spec.style}`;
  return loadPromptSet(new TextDecoder().decode(bytes), file);
}

/** A MasSystem (the same shape as system-folders.ts returns, so ask() runs on it) from a SystemSpec (and its prompt file, if any). */
export async function loadSystemFromSpec(spec: SystemSpec, backend: Backend, opts: LoadSpecOptions = {}): Promise<MasSystem> {
  const style = getStyle(spec.style);
  const withLinks = opts.links ?? true;
  const emit = opts.onEvent ?? (() => {});
  const fetcher = progressFetch(opts);
  const adapterTask: AdapterTask | null = style.taskScoped ? adapterTaskFor(spec.task ?? 'math') : null;
  for (const k of Object.keys(spec.roles ?? {})) {
    if (!style.roles.some((r) => r.key === k))
      throw new InvalidArgument(
        `system spec: style ${style.name} has no role '${k}'; its roles are ${style.roles.map((r) => r.key).join(', ')}`,
      );
  }
  const agents = new Map<string, Agent>();
  const outer = new Map<string, OuterLink>();
  const dispose = () => {
    for (const a of agents.values()) { a.decoder.dispose(); a.inner?.dispose(); }
    for (const l of outer.values()) l.dispose();
    agents.clear();
    outer.clear();
  };
  let prompts: PromptSet | undefined;
  try {
    prompts = await specPrompts(spec, fetcher, !!style.embedded);
    for (const role of style.roles) {
      const r = spec.roles?.[role.key];
      if (!r?.model)
        throw new InvalidArgument(
          `system spec: role ${role.key} of ${style.name} needs model, the URL of its model folder or of a .gguf file`,
        );
      throwIfAborted(opts.signal, `role ${role.key}`);
      // a GGUF role: weights and config from the file, the rest from its tokenizer folder
      const gguf = isGgufUrl(r.model) ? fileUrl(r.model) : null;
      const root = gguf ? ggufTokenizerFolder(`system spec: role ${role.key}`, r) : folderUrl(r.model);
      const decoder = await loadDecoderFromUrl(gguf ?? root, backend, {
        fetch: fetcher,
        what: `role ${role.key}`,
        ...(spec.quantize ? { quantize: spec.quantize } : {}),
      });
      const source = gguf ?? root;
      const agent: Agent = {
        role: role.key,
        source,
        dir: root,
        decoder,
        tokenizer: null!,
        inner: null,
        generation: { sampling: { greedy: true }, eosTokenIds: [] },
      };
      agents.set(role.key, agent);
      agent.tokenizer = await loadTokenizerFromUrl(root, { fetch: fetcher });
      let gen: Uint8Array | undefined;
      try {
        gen = await fetchModelFile(root, 'generation_config.json', { fetch: fetcher, optional: true });
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
      agent.generation = parseGenerationConfig(
        gen ? new TextDecoder().decode(gen) : null,
        [...decoder.config.eosTokenIds, ...agent.tokenizer.eosTokenIds],
        `${root}generation_config.json`,
      );
      emit({ type: 'compile', what: `${role.key} (${decoder.config.hidden}-wide, ${decoder.config.layers} layers)` });
      if (withLinks) {
        const name = `${role.key} inner link`;
        const found = r.innerLink === undefined ? await resolveInnerLink(role.key, root, fetcher, adapterTask) : null;
        const state = parseLinkBytes(found ? found.bytes : await linkBytes(r.innerLink!, fetcher, undefined, name), name);
        const d = decoder.config.hidden;
        agent.inner = checkedLink(
          () => InnerLink.fromStateDict(backend, state, { type: r.innerType ?? found?.type ?? DEFAULT_INNER_TYPE, d, name }),
          `${name} (weights ${firstShape(state)})`,
          `${role.key} has hidden size ${d}${fromGguf(agent)}`,
        ).freeze();
      }
    }
    if (withLinks) {
      const missing = style.links.filter((l) => spec.outer?.[l.key] === undefined).map((l) => l.key);
      const fromRepo =
        missing.length && spec.outerRepo
          ? await resolveOuterLinks(spec.outerRepo, fetcher, adapterTask, missing)
          : new Map<string, { url: string; type: string }>();
      for (const l of style.links) {
        const ref = spec.outer?.[l.key] ?? fromRepo.get(l.key)?.url;
        if (ref === undefined)
          throw new InvalidArgument(
            `system spec: outer link ${l.key} (${l.from} → ${l.to}) is missing; ${style.name} needs ${style.links.map((x) => x.key).join(', ')}`,
          );
        throwIfAborted(opts.signal, `outer link ${l.key}`);
        const name = `outer link ${l.key} (${l.from} → ${l.to})`;
        const state = parseLinkBytes(await linkBytes(ref, fetcher, undefined, name), name);
        const dIn = agents.get(l.from)!.decoder.config.hidden;
        const dOut = agents.get(l.to)!.decoder.config.hidden;
        const link = checkedLink(
          () =>
            OuterLink.fromStateDict(backend, state, {
              type: spec.outerTypes?.[l.key] ?? fromRepo.get(l.key)?.type ?? DEFAULT_OUTER_TYPE,
              dIn,
              dOut,
              name,
            }),
          `${name} (weights ${firstShape(state)})`,
          `${l.from} has hidden size ${dIn}${fromGguf(agents.get(l.from)!)}, ${l.to} has ${dOut}${fromGguf(agents.get(l.to)!)}`,
        );
        outer.set(l.key, link.freeze());
      }
    }
  } catch (e) {
    dispose();
    if (opts.signal?.aborted && !(e instanceof Cancelled))
      throw new Cancelled(`loading the system was cancelled (${(e as Error).message}); nothing was kept`);
    // a file of the shipped tiny system that is not there: say how to rebuild it
    if (style.embedded && e instanceof MissingCheckpoint && !/the tiny system files are missing/.test(e.message))
      throw missingEmbedded(style, `${style.name} (${spec.label ?? 'system spec'})`, e.message, 'then reload');
    throw e;
  }
  return { style, agents, outer, backend, adapterTask: null, ...(prompts ? { prompts } : {}), dispose };
}

async function optionalJson(root: string, file: string, fetcher: typeof fetch): Promise<Record<string, unknown> | null> {
  let bytes: Uint8Array | undefined;
  try {
    bytes = await fetchModelFile(root, file, { fetch: fetcher, optional: true });
  } catch (e) {
    if (isNotFound(e)) return null;
    throw e;
  }
  if (!bytes) return null;
  try {
    const v = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new CorruptCheckpoint(`${root}${file} is not a JSON object; re-download the repo`);
}

/**
 * A role repo's inner link when the spec names none, by resolveRoleFiles: a folder cannot be listed over HTTP,
 * so each candidate is fetched in the rule's order (the first found is the link's bytes).
 */
async function resolveInnerLink(
  role: string,
  root: string,
  fetcher: typeof fetch,
  task: AdapterTask | null,
): Promise<{ bytes: Uint8Array; type: string }> {
  let bytes: Uint8Array | undefined;
  const folder: RoleFolder = {
    manifest: (name) => optionalJson(root, name, fetcher),
    async has(name) {
      bytes = await fetchModelFile(root, name, { fetch: fetcher, optional: true });
      return bytes !== undefined;
    },
  };
  const { inner, innerType, tried } = await resolveRoleFiles(folder, task);
  if (inner && bytes) return { bytes, type: innerType };
  throw noInnerLink(role, root, task, tried);
}

/** A role folder URL without the inner link resolveRoleFiles looked for (`tried`). */
export function noInnerLink(role: string, root: string, task: AdapterTask | null, tried: readonly string[]): MissingCheckpoint {
  return new MissingCheckpoint(
    `role ${role}: ${root} holds no inner link for task ${task ?? '(none)'}; looked for ${tried.join(', ')}. Give the role's innerLink, or a repo that ships its adapters`,
  );
}

/** Outer links from an upstream outer-links folder's outerlink_config.json (task-scoped or not). */
async function resolveOuterLinks(
  repo: string,
  fetcher: typeof fetch,
  task: AdapterTask | null,
  keys: string[],
): Promise<Map<string, { url: string; type: string }>> {
  const root = folderUrl(repo);
  const cfg = await optionalJson(root, 'outerlink_config.json', fetcher);
  if (!cfg)
    throw new MissingCheckpoint(
      `${root}outerlink_config.json does not exist; give the outer links by key, or the folder of a RecursiveMAS *-Outerlinks repo`,
    );
  // the files cannot be listed over HTTP: take every file the manifest names as present
  const lists = [cfg.adapters, ...Object.values((cfg.tasks ?? {}) as Record<string, { adapters?: unknown }>).map((t) => t?.adapters)];
  const files = lists.flatMap((a) => (Array.isArray(a) ? a.map((e) => String((e as { filename?: unknown }).filename)) : []));
  const picked = pickOuterFiles(files, task, keys, cfg as never, null, root);
  return new Map([...picked].map(([k, f]) => [k, { url: new URL(f.path, root).href, type: f.type }]));
}
