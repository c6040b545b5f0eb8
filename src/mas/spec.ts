/**
 * A RecursiveMAS system described by where its files are (SystemSpec), as the playground's page hands it to
 * the engine worker and loadSystemFromSpec (system-urls.ts) loads it; the progress events of that load; and
 * the key under which a loaded system is reused.
 */

/** A file of a system: a URL (the served app, the Hugging Face hub) or bytes the page already holds (IndexedDB, an upload). */
export type FileRef = string | Uint8Array;

/**
 * A RecursiveMAS system the worker can load: a registry style (src/mas/styles.ts) or the offline
 * 'tiny_sequential' one, with a Hugging Face-layout model folder per role (by base URL; files are read
 * through the model cache of src/store), each role's inner link, and the outer links by key.
 */
export interface SystemSpec {
  style: string;
  /**
   * model: the role's Hugging Face model folder URL, or the URL of a llama.cpp `.gguf` file (e.g.
   * …/Qwen3-1.7B-Q8_0.gguf; q8_0/q4_0 tensors run as stored). tokenizer: a folder URL with the tokenizer files
   * (tokenizer.json, tokenizer_config.json, chat template) and generation_config.json, read for a .gguf model
   * only and required with one, as GGUF repos ship none (its inner link, when not given, is looked for there too).
   * innerType: the inner link's adapter_type (default ln_res_adapter; `adapter` and `res_adapter` share keys).
   */
  roles: Record<string, { model: string; tokenizer?: string; innerLink?: FileRef; innerType?: string }>;
  /** The system's prompt file (a --prompts file, by URL or bytes); embedded styles (tiny_sequential) need it. */
  prompts?: FileRef;
  outer?: Record<string, FileRef>;
  /** Outer link types by key (default outer_ln_res_adapter). */
  outerTypes?: Record<string, string>;
  /**
   * An upstream outer-links folder (a RecursiveMAS *-Outerlinks repo URL): links not given in `outer` are
   * resolved from its outerlink_config.json. Roles without `innerLink` resolve theirs from their model
   * folder (resolveRoleFiles: innerlink_config.json, adapter(task).pt, adapter.pt), as upstream's resolver does.
   */
  outerRepo?: string;
  /** The question's task; picks the math or code links of task-scoped (sequential) styles. Default math. */
  task?: 'math' | 'choice' | 'code';
  /** Quantize the backbones' projection weights on upload (q4_0 / q8_0); null keeps the checkpoint's dtype. */
  quantize?: 'q4_0' | 'q8_0' | null;
  /** For messages and the UI: where the system came from ('offline tiny', 'released', a checkpoint name). */
  label?: string;
}

/** Progress of loading a system: a file's first request, its bytes as they arrive, a role's model compiled. */
export type LoadEvent =
  | { type: 'initiate'; file: string }
  | { type: 'download'; file: string; loaded: number; total: number }
  | { type: 'compile'; what: string };

/** FNV-1a over bytes, so that a spec holding link bytes has a cheap stable key. */
function fnv(b: Uint8Array): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i], 0x01000193);
  return `${b.length}:${(h >>> 0).toString(16)}`;
}

/**
 * A key for a spec: `prefix` (what else decides the loaded system, such as the backend) and the spec's JSON
 * with byte payloads replaced by their length and hash. Equal keys load equal systems.
 */
export function specKey(spec: SystemSpec, prefix: string): string {
  return prefix + JSON.stringify(spec, (_k, v: unknown) => (v instanceof Uint8Array ? `bytes ${fnv(v)}` : v));
}

/**
 * `spec` with every file path in it (each role's model, tokenizer and inner link, the prompt file, the outer links and
 * the outer folder) resolved against `base` (the offline system's manifest names them by paths of the app); bytes and
 * absolute URLs stay as they are.
 */
export function specAt(spec: SystemSpec, base: string): SystemSpec {
  const abs = <T extends FileRef>(v: T): T => (typeof v === 'string' ? (new URL(v, base).href as T) : v);
  const roles: SystemSpec['roles'] = {};
  for (const [r, v] of Object.entries(spec.roles))
    roles[r] = {
      ...v,
      model: abs(v.model),
      ...(v.innerLink !== undefined ? { innerLink: abs(v.innerLink) } : {}),
      ...(v.tokenizer !== undefined ? { tokenizer: abs(v.tokenizer) } : {}),
    };
  return {
    ...spec,
    roles,
    outer: Object.fromEntries(Object.entries(spec.outer ?? {}).map(([key, v]) => [key, abs(v)])),
    ...(spec.prompts !== undefined ? { prompts: abs(spec.prompts) } : {}),
    ...(spec.outerRepo !== undefined ? { outerRepo: abs(spec.outerRepo) } : {}),
  };
}
