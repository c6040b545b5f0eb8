/**
 * What a system spec (mas/spec.ts) needs downloaded, found with small reads only, for the download and memory plan
 * (plan.ts): each file's size and each role's config and weight bytes.
 */
import { InvalidArgument, MissingCheckpoint } from '../errors';
import { SafetensorsFile } from '../formats/safetensors';
import { INDEX_FILE, SINGLE_FILE, parseIndex } from '../formats/safetensors-sharded';
import { isNotFound, readAll, urlSource } from '../formats/sources';
import { getStyle } from '../mas/styles';
import { adapterTaskFor, parseManifest, pickOuterFiles, resolveRoleFiles, type AdapterTask, type RoleFolder } from '../mas/upstream';
import type { SystemSpec } from '../mas/spec';
import { noInnerLink } from '../mas/system-urls';
import { type DecoderConfig, parseDecoderConfig } from '../model/config';
import { type TensorLayout, detectLayout, storedName } from '../model/layout';
import { folderUrl, ggufTokenizerFolder, isGgufUrl, modelFetch } from '../model/url';
import { weightSpecs } from '../model/weights';
import { planGgufModel, type PlanModel } from './plan';

/**
 * The files loading `spec` reads (URL → bytes) and each role's config and safetensors payload size, found
 * with small reads only: sizes by a one-byte Range probe, safetensors by their header (8 + header bytes),
 * config.json and the small JSON manifests whole. Files held as bytes in the spec are not listed.
 */
export async function specFiles(spec: SystemSpec, fetcher: typeof fetch): Promise<{ files: Map<string, number>; models: PlanModel[] }> {
  const style = getStyle(spec.style);
  const f = modelFetch(fetcher);
  const files = new Map<string, number>();
  const missing = (e: unknown, optional: boolean) => { if (!(optional && isNotFound(e))) throw e; return null; };
  const size = async (url: string, optional = false): Promise<number | null> => {
    try {
      const n = await urlSource(url, { fetch: f }).size();
      files.set(url, n);
      return n;
    } catch (e) { return missing(e, optional); }
  };
  const whole = async (url: string, optional = false): Promise<Uint8Array | null> => {
    try {
      const b = await readAll(urlSource(url, { fetch: f }));
      files.set(url, b.byteLength);
      return b;
    } catch (e) { return missing(e, optional); }
  };
  /** An optional JSON manifest; one that is not a JSON object is a CorruptCheckpoint, as the loaders say. */
  const json = async (url: string) => {
    const b = await whole(url, true);
    return b ? parseManifest(new TextDecoder().decode(b), url) : null;
  };
  /**
   * The bytes of `config`'s tensors in the safetensors file at `url` (the only ones the loader reads: never a
   * vision tower's or Qwen3.5's mtp.*); the file is listed with its header and those bytes. `layout`: the
   * checkpoint's (a sharded one's, told by its index), default told by the file's own tensors.
   */
  const payload = async (url: string, config: DecoderConfig, layout?: TensorLayout): Promise<number> => {
    const src = urlSource(url, { fetch: f });
    const st = await SafetensorsFile.open(src);
    const own = new Set(st.names());
    layout ??= detectLayout({ name: url, has: (n) => own.has(n) });
    let n = 0;
    for (const s of weightSpecs(config)) {
      const stored = storedName(layout, s.name);
      if (!own.has(stored)) continue;
      const t = st.info(stored);
      n += t.end - t.begin;
    }
    files.set(url, st.dataStart + n);
    return n;
  };
  const task: AdapterTask | null = style.taskScoped ? adapterTaskFor(spec.task ?? 'math') : null;
  const linkUrl = (ref: string) => folderUrl(ref).replace(/\/$/, '');
  const models: PlanModel[] = [];
  const prompts = spec.prompts;
  if (typeof prompts === 'string') await size(linkUrl(prompts));
  for (const role of style.roles) {
    const r = spec.roles?.[role.key];
    if (!r?.model)
      throw new InvalidArgument(
        `system spec: role ${role.key} of ${style.name} needs model, the URL of its model folder or of a .gguf file`,
      );
    // a GGUF role: the file's size and stored tensors; tokenizer, generation config and inner link from its tokenizer folder
    if (isGgufUrl(r.model)) {
      const root = ggufTokenizerFolder(`system spec: role ${role.key}`, r);
      const g = await planGgufModel(r.model, f);
      files.set(g.url, g.bytes);
      models.push(g.model);
      await roleFiles(root, r, role.key);
      continue;
    }
    const root = folderUrl(r.model);
    const cfg = await whole(`${root}config.json`, true);
    if (!cfg)
      throw new MissingCheckpoint(`role ${role.key}: ${root}config.json does not exist; give the URL of a Hugging Face model folder`);
    const config = parseDecoderConfig(new TextDecoder().decode(cfg), `${root}config.json`);
    const index = await whole(root + INDEX_FILE, true);
    let weightsBytes = 0;
    if (index) {
      const map = parseIndex(root + INDEX_FILE, index).weightMap;
      const layout = detectLayout({ name: root + INDEX_FILE, has: (n) => map.has(n) });
      for (const shard of new Set(map.values())) weightsBytes += await payload(new URL(shard, root).href, config, layout);
    } else {
      try {
        weightsBytes = await payload(root + SINGLE_FILE, config);
      } catch (e) {
        if (!isNotFound(e)) throw e;
        throw new MissingCheckpoint(
          `role ${role.key}: ${root} has neither ${INDEX_FILE} nor ${SINGLE_FILE}; point at a folder that holds the safetensors weights`,
        );
      }
    }
    models.push({ config, weightsBytes });
    await roleFiles(root, r, role.key);
  }
  async function roleFiles(root: string, r: SystemSpec['roles'][string], roleKey: string) {
    await size(`${root}tokenizer.json`);
    for (const opt of ['tokenizer_config.json', 'chat_template.jinja', 'chat_template.json', 'generation_config.json'])
      await size(root + opt, true);
    if (typeof r.innerLink === 'string') await size(linkUrl(r.innerLink));
    else if (r.innerLink === undefined) {
      // loadSystemFromSpec's rule (resolveRoleFiles), with size probes in place of reads
      const folder: RoleFolder = {
        manifest: (name) => json(`${root}${name}`),
        has: async (name) => (await size(new URL(name, root).href, true)) !== null,
      };
      const { inner, tried } = await resolveRoleFiles(folder, task);
      if (!inner) throw noInnerLink(roleKey, root, task, tried);
    }
  }
  const absent = style.links.filter((l) => spec.outer?.[l.key] === undefined).map((l) => l.key);
  for (const l of style.links) {
    const ref = spec.outer?.[l.key];
    if (typeof ref === 'string') await size(linkUrl(ref));
  }
  if (absent.length) {
    if (!spec.outerRepo)
      throw new InvalidArgument(
        `system spec: outer link ${absent[0]} is missing; ${style.name} needs ${style.links.map((x) => x.key).join(', ')}`,
      );
    const root = folderUrl(spec.outerRepo);
    const cfg = await json(`${root}outerlink_config.json`);
    if (!cfg)
      throw new MissingCheckpoint(
        `${root}outerlink_config.json does not exist; give the outer links by key, or the folder of a RecursiveMAS *-Outerlinks repo`,
      );
    const lists = [cfg.adapters, ...Object.values((cfg.tasks ?? {}) as Record<string, { adapters?: unknown }>).map((t) => t?.adapters)];
    const names = lists.flatMap((a) => (Array.isArray(a) ? a.map((e) => String((e as { filename?: unknown }).filename)) : []));
    for (const p of pickOuterFiles(names, task, absent, cfg as never, null, root).values()) await size(new URL(p.path, root).href);
  }
  return { files, models };
}
