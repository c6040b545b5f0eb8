/** The system the Ask view loads: a registry style or the offline tiny one, with checkpoint overrides per role. */
import type { AdapterReport, FileRef, SystemSpec } from '../../workers/protocol';
import { InvalidArgument } from '../errors';
import { STYLE_NAMES, STYLES, checkBackbones, type StyleName } from '../mas/styles';
import { DEFAULT_ENDPOINT, normalizeEndpoint, repoFolderUrl } from '../store/hub';
import { OFFLINE_CHOICES, TINY, isOffline, registryStyle } from './offline';
import type { CheckpointInfo, CheckpointRegistry, Services } from './services';

export { TINY, TINY_RECURSION, isOffline } from './offline';
/** The pickers' styles: the offline systems (the first view first), then the released ones. */
export const STYLE_CHOICES: readonly string[] = [...OFFLINE_CHOICES, ...STYLE_NAMES];
/** A style choice as the pickers name it: an offline system by its style, e.g. 'tiny distillation (offline)'. */
export const styleLabel = (style: string): string =>
  isOffline(style) ? `${registryStyle(style).replace(/_/g, ' ')} (offline)` : style;
/** The choice meaning "the released (or shipped) links". */
export const RELEASED = 'released';
/** Key of the outer-link choice in the per-role choice map. */
export const OUTER = 'outer';

const offlineSpecs = new WeakMap<Services, Map<string, Promise<SystemSpec | null>>>();

/**
 * An offline system's spec (default: the first view's), asked of the engine once per page and system. A view awaits
 * it before using the system: the worker may still be starting when the user asks (seconds on the dev server, which
 * serves it unbundled).
 */
export function offlineSystem(services: Services, style = TINY): Promise<SystemSpec | null> {
  let specs = offlineSpecs.get(services);
  if (!specs) offlineSpecs.set(services, (specs = new Map()));
  let p = specs.get(style);
  if (!p) {
    // the first view's call names no style (the engine's default manifest), as before there were two
    p = style === TINY ? services.engine.api().offlineSystem() : services.engine.api().offlineSystem(registryStyle(style));
    specs.set(style, p);
    p.catch(() => specs.delete(style)); // asked again next time
  }
  return p;
}

let hubEndpoint = DEFAULT_ENDPOINT;
/** Points released styles at another hub (the page's hub settings: `?hub=`, the Environment view). */
export function setHubEndpoint(endpoint: string): void {
  hubEndpoint = normalizeEndpoint(endpoint);
}

/** Base URL of a hub repo's files (no trailing slash), at the page's hub. */
export const hfFolder = (repo: string): string => repoFolderUrl({ endpoint: hubEndpoint }, repo).replace(/\/$/, '');

/** Roles of a style, in the registry's order; for the tiny system, those of its spec (when known). */
export function rolesOf(style: string, offline: SystemSpec | null): string[] {
  if (isOffline(style)) return offline ? Object.keys(offline.roles) : [];
  return STYLES[style as StyleName]?.roles.map((r) => r.key) ?? [];
}

/** The released repo of a role, for the checkpoint picker's label. */
/**
 * A released style's size: the parameters its role base models are named with (Qwen/Qwen3-1.7B → 1.7 billion), and
 * about what they take to download in bf16 (2 bytes a parameter); null for a style whose names say none.
 */
export function releasedSize(style: string): { params: number; bytes: number } | null {
  const spec = (STYLES as Record<string, (typeof STYLES)[StyleName] | undefined>)[style];
  if (!spec || spec.embedded) return null;
  let params = 0;
  for (const r of spec.roles) {
    const m = [...r.base.matchAll(/(\d+(?:\.\d+)?)b(?![a-z])/gi)].at(-1);
    if (!m) return null;
    params += Number(m[1]) * 1e9;
  }
  return { params, bytes: params * 2 };
}

export function releasedLabel(style: string, role: string): string {
  if (isOffline(style)) return 'shipped tiny links';
  if (role === OUTER) return STYLES[style as StyleName]?.outerRepo ?? 'released';
  return STYLES[style as StyleName]?.roles.find((r) => r.key === role)?.repo ?? 'released';
}

/** Checkpoints that fit a role's picker: inner ones of that role (or of no stated role); for 'outer', outer ones of the style. */
export function candidates(list: readonly CheckpointInfo[], style: string, role: string): CheckpointInfo[] {
  if (role === OUTER) return list.filter((c) => c.kind === 'outer' && (!c.style || c.style === style || style === TINY));
  return list.filter((c) => c.kind === 'inner' && (!c.role || c.role === role));
}

const LINK = /\.(safetensors|pt)$/;

/** The inner link file of a checkpoint's files: the adapter file, else the only link file. */
export function innerLinkOf(files: Record<string, Uint8Array>, name: string): Uint8Array {
  const links = Object.keys(files).filter((f) => LINK.test(f) && !/optimizer|scheduler|rng/.test(f));
  const pick = links.find((f) => /(^|\/)adapter[^/]*$/.test(f)) ?? (links.length === 1 ? links[0] : undefined);
  if (!pick)
    throw new InvalidArgument(
      `checkpoint '${name}' holds no single inner link file (found: ${links.join(', ') || 'none'}); pick another checkpoint`,
    );
  return files[pick]!;
}

/** The outer link files of a checkpoint by key (outer_12.safetensors → outer_12). */
export function outerLinksOf(files: Record<string, Uint8Array>, name: string): Record<string, Uint8Array> {
  const out: Record<string, Uint8Array> = {};
  for (const [f, bytes] of Object.entries(files)) {
    const m = f.match(/(?:^|\/)(outer_[A-Za-z0-9]+)\.(safetensors|pt)$/);
    if (m && !out[m[1]!]) out[m[1]!] = bytes;
  }
  if (!Object.keys(out).length)
    throw new InvalidArgument(`checkpoint '${name}' holds no outer_*.safetensors or .pt files; pick another checkpoint`);
  return out;
}

/** A role's own backbone in place of the style's: a model folder URL, or a .gguf file URL with its tokenizer folder. */
export interface Backbone { model: string; tokenizer?: string }

/** Whether a model URL names a GGUF file (model/url.ts isGgufUrl's rule; kept here so the page does not bundle the loader). */
export const isGgufModel = (url: string): boolean => /\.gguf$/i.test(url.trim().replace(/[?#].*$/, ''));

/**
 * `spec` with the backbones typed in for some roles. A GGUF takes its tokenizer (and, when the role keeps its
 * released link, its inner link) from the tokenizer folder given, else from the role's own model folder.
 */
export function withBackbones(spec: SystemSpec, backbones: Record<string, Backbone>): { spec: SystemSpec; changed: string[] } {
  const roles = { ...spec.roles };
  const changed: string[] = [];
  for (const [role, b] of Object.entries(backbones)) {
    const model = b.model.trim();
    if (!model || !roles[role]) continue;
    const was = roles[role]!.model;
    if (isGgufModel(model)) {
      const tokenizer = b.tokenizer?.trim() || (isGgufModel(was) ? roles[role]!.tokenizer : was);
      if (!tokenizer)
        throw new InvalidArgument(
          `role ${role}: ${model} is a GGUF file, which brings no tokenizer; give its tokenizer folder (a Hugging Face folder URL with tokenizer.json)`,
        );
      roles[role] = { ...roles[role]!, model, tokenizer };
    } else {
      const { tokenizer: _t, ...rest } = roles[role]!;
      roles[role] = { ...rest, model };
    }
    changed.push(`${role}: ${model.replace(/[?#].*$/, '').replace(/\/+$/, '').replace(/^.*\//, '')}`);
  }
  return { spec: { ...spec, roles }, changed };
}

/** The SystemSpec for `style` with each role's (and the outer links') choice: RELEASED or a checkpoint id; `backbones` replace role models. */
export async function buildSpec(
  style: string,
  choice: Record<string, string>,
  offline: SystemSpec | null,
  reg: () => Promise<CheckpointRegistry>,
  names: Map<string, string>,
  backbones: Record<string, Backbone> = {},
): Promise<SystemSpec> {
  let spec: SystemSpec;
  if (isOffline(style)) {
    if (!offline) {
      const rebuild = STYLES[registryStyle(style) as StyleName]?.embedded?.rebuild ?? 'npm run tiny:build';
      throw new InvalidArgument(`this build has no files of the ${styleLabel(style)} system; run \`${rebuild}\` and reload, or pick another style`);
    }
    spec = { ...offline, roles: { ...offline.roles }, outer: offline.outer ? { ...offline.outer } : undefined, label: 'offline tiny' };
  } else {
    const s = STYLES[style as StyleName];
    if (!s) throw new InvalidArgument(`unknown style '${style}'; pick one of ${STYLE_CHOICES.join(', ')}`);
    // released links: each role repo's adapters and the style's Outerlinks repo, resolved by the worker from
    // their manifests (innerlink_config.json, outerlink_config.json) as upstream's resolver does
    spec = {
      style,
      roles: Object.fromEntries(s.roles.map((r) => [r.key, { model: hfFolder(r.repo) }])),
      outerRepo: hfFolder(s.outerRepo),
      label: 'released',
    };
  }
  const swapped = withBackbones(spec, backbones);
  // before anything is planned or downloaded, as rmas ask refuses it
  if (!isOffline(style))
    checkBackbones(
      STYLES[style as StyleName],
      Object.entries(backbones)
        .filter(([, b]) => b.model.trim())
        .map(([r]) => r),
    );
  spec = swapped.spec;
  const overrides = swapped.changed.map((c) => `backbone ${c}`);
  for (const role of Object.keys(spec.roles)) {
    const id = choice[role];
    if (!id || id === RELEASED) continue;
    const name = names.get(id) ?? id;
    spec.roles[role] = { ...spec.roles[role]!, innerLink: innerLinkOf(await (await reg()).files(id), name) };
    overrides.push(`${role}: ${name}`);
  }
  const outerId = choice[OUTER];
  if (outerId && outerId !== RELEASED) {
    const name = names.get(outerId) ?? outerId;
    spec.outer = { ...(spec.outer ?? {}), ...(outerLinksOf(await (await reg()).files(outerId), name) as Record<string, FileRef>) };
    overrides.push(`outer: ${name}`);
  }
  if (overrides.length) spec.label = `${spec.label} + ${overrides.join(', ')}`;
  return spec;
}

/**
 * Why to choose the CPU device for `work` on the offline tiny system, when WebGPU would run it on a fallback adapter (a
 * software rasteriser such as SwiftShader: the GPU's work done on the CPU, slower there than the CPU backend); else
 * null. The Ask and Train views both show it, with a button that chooses the CPU device.
 */
export function fallbackNote(adapter: AdapterReport | null, style: string, backend: string, work: string): string | null {
  if (!adapter?.isFallback || !isOffline(style) || backend === 'cpu') return null;
  const name = adapter.description || adapter.device || adapter.vendor;
  return `WebGPU here is a fallback adapter${name ? ` (${name})` : ''}: a software implementation that runs the GPU's work on ` +
    `the CPU. The offline tiny system ${work} faster on the CPU device.`;
}
