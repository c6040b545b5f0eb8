/**
 * The decode loop: prefill a prompt (token ids or embedding vectors) into a KV cache sized for the whole
 * generation, then feed one token at a time. The sampler runs on the backend (F.sample / F.argmax), and the
 * id it draws is fed straight back as the next input; only one i32 per step is read back, for the EOS check
 * and the caller's stream. Sampling step i uses `step = i`, so a seed reproduces the same tokens on any
 * backend that computes the same logits.
 */
import { F } from '../autograd';
import { ContextTooLong, InvalidArgument, InvalidModelConfig, UnsafeModelFile } from '../errors';
import { readModelFile } from '../formats/model-file';
import { tidy } from '../tensor/scope';
import { Tensor } from '../tensor/tensor';
import { type GpuCounters, counterDelta } from '../gpu/counters';
import type { Decoder } from './decoder';
import { showValue } from '../util/show';

export interface SamplingOptions {
  /** Argmax decoding; the other fields are ignored. */
  greedy?: boolean;
  /** Default 1; 0 is greedy. */
  temperature?: number;
  /** Default 0 (off). */
  topK?: number;
  /** Default 1 (off). */
  topP?: number;
  /** Default 0. */
  seed?: number;
}

/** Sampling that always picks the argmax: greedy, or temperature 0. */
export const isGreedy = (s: SamplingOptions): boolean => !!s.greedy || s.temperature === 0;

export interface GenerateOptions {
  /** Prompt token ids [T] (numbers or an i32 tensor); exactly one of inputIds / inputsEmbeds. */
  inputIds?: ArrayLike<number> | Tensor;
  /**
   * Prompt embeddings, f32 [T, hidden], or several pieces [T_i, hidden] prefilled in order into the same
   * cache (embed(prefix), latents, embed(suffix)): the same as their concatenation, without copying.
   */
  inputsEmbeds?: Tensor | readonly Tensor[];
  maxNewTokens: number;
  sampling?: SamplingOptions;
  /** Generation stops after any of these (the EOS token is included in `tokens`). */
  eosTokenIds?: readonly number[];
  /** Called with each new id as soon as it has been read back. */
  onToken?: (id: number) => void;
  /** Checked before every step; an abort ends the loop with stoppedBy 'abort'. */
  signal?: AbortSignal;
  /** Called after each token with all tokens so far; true ends the loop with stoppedBy 'stop'. */
  stop?: (tokens: readonly number[]) => boolean;
}

export interface GenerateResult {
  tokens: number[];
  /** Prompt tokens per second, timed up to the first sampled id being read back. */
  prefillTokensPerSec: number;
  /** Tokens after the first, per second. */
  decodeTokensPerSec: number;
  prefillMs: number;
  decodeMs: number;
  stoppedBy: 'eos' | 'length' | 'abort' | 'stop';
  /**
   * The work of the decode steps after the first (each samples one token: forward, pick, read back one id), summed
   * over `steps` of them, on a backend that counts (WebGPU); null elsewhere or with fewer than two decode steps.
   */
  decodeCounters: (GpuCounters & { steps: number }) | null;
}

function pick(logits: Tensor, s: SamplingOptions, step: number): Tensor {
  if (isGreedy(s)) return F.argmax(logits);
  return F.sample(logits, { temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed, step });
}

function checkSampling(s: SamplingOptions) {
  const bad = (what: string) => { throw new InvalidArgument(`generate: sampling.${what}`); };
  if (s.temperature !== undefined && !(s.temperature >= 0)) bad(`temperature must be >= 0, got ${s.temperature}`);
  if (s.topK !== undefined && !(Number.isInteger(s.topK) && s.topK >= 0)) bad(`topK must be an integer >= 0, got ${s.topK}`);
  if (s.topP !== undefined && !(s.topP > 0 && s.topP <= 1)) bad(`topP must be in (0, 1], got ${s.topP}`);
  if (s.seed !== undefined && !Number.isInteger(s.seed)) bad(`seed must be an integer, got ${s.seed}`);
}

/**
 * How many of `maxNewTokens` fit the model's context (max_position_embeddings) after a prompt of `promptTokens`: the
 * first new token comes from the prompt's last position, each later one takes a position, so at most
 * context − prompt + 1. A prompt longer than the context is ContextTooLong (`what` names it in the message).
 */
export function newTokensInContext(
  model: Pick<Decoder, 'config'>, promptTokens: number, maxNewTokens: number, what = 'the prompt',
): number {
  const context = model.config.maxPositions;
  if (promptTokens > context) {
    throw new ContextTooLong(`${what} is ${promptTokens} tokens, longer than the model's context of ${context} positions ` +
      '(max_position_embeddings); shorten it');
  }
  return Math.min(maxNewTokens, context - promptTokens + 1);
}

/**
 * Embedding pieces [T_i, d] as the inputs of one forward pass: one tensor of all their rows when they share a dtype
 * (upstream concatenates inputs_embeds too), else the pieces as they are, each its own forward on the cache. A prompt
 * with a latent message in a slot is three pieces; one pass is a third of the prefill's dispatches. Call in a scope.
 */
export function joinPieces(pieces: readonly Tensor[]): Tensor[] {
  if (pieces.length < 2 || pieces.some((p) => p.dtype !== pieces[0]!.dtype)) return [...pieces];
  return [F.concatRows(pieces)];
}

/**
 * Prefills the prompt and decodes up to maxNewTokens, stopping (stoppedBy 'length') where the model's context ends
 * (newTokensInContext); a prompt longer than the context is refused before any forward pass.
 */
export async function generate(model: Decoder, opts: GenerateOptions): Promise<GenerateResult> {
  const { inputsEmbeds, signal, onToken } = opts;
  let maxNewTokens = opts.maxNewTokens;
  const sampling = opts.sampling ?? { greedy: true };
  const eos = new Set(opts.eosTokenIds ?? []);
  if ((opts.inputIds === undefined) === (inputsEmbeds === undefined)) {
    throw new InvalidArgument('generate: pass exactly one of inputIds and inputsEmbeds');
  }
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1) {
    throw new InvalidArgument(`generate: maxNewTokens must be a positive integer, got ${maxNewTokens}`);
  }
  checkSampling(sampling);
  const be = model.backend;
  const ownIds = opts.inputIds !== undefined && !(opts.inputIds instanceof Tensor);
  const ids = opts.inputIds === undefined ? undefined
    : opts.inputIds instanceof Tensor ? opts.inputIds
    : be.fromValues(Array.from(opts.inputIds), [opts.inputIds.length], 'i32');
  const pieces: readonly Tensor[] = inputsEmbeds === undefined ? [] : inputsEmbeds instanceof Tensor ? [inputsEmbeds] : inputsEmbeds;
  const nonEmpty = pieces.filter((p) => p.shape[0] > 0);
  const T = ids ? ids.shape[0] : nonEmpty.reduce((n, p) => n + p.shape[0], 0);
  if (T < 1) throw new InvalidArgument('generate: the prompt is empty; give at least one token or embedding row');
  try {
    maxNewTokens = newTokensInContext(model, T, maxNewTokens, 'generate: the prompt');
  } catch (e) {
    if (ownIds) ids!.dispose();
    throw e;
  }

  const tokens: number[] = [];
  let counted: { from: GpuCounters; to: GpuCounters; steps: number } | null = null;
  const result = (stoppedBy: GenerateResult['stoppedBy'], prefillMs: number, decodeMs: number): GenerateResult => ({
    tokens,
    prefillMs,
    decodeMs,
    prefillTokensPerSec: prefillMs > 0 ? (T * 1000) / prefillMs : 0,
    decodeTokensPerSec: decodeMs > 0 ? ((tokens.length - 1) * 1000) / decodeMs : 0,
    stoppedBy,
    decodeCounters: counted && counted.steps > 0 ? { ...counterDelta(counted.from, counted.to), steps: counted.steps } : null,
  });
  if (signal?.aborted) {
    if (ownIds) ids!.dispose();
    return result('abort', 0, 0);
  }

  const cache = model.newCache(T + maxNewTokens);
  let next: Tensor | null = null;
  try {
    const t0 = performance.now();
    next = tidy(() => {
      if (ids) return pick(model.forward({ inputIds: ids, cache, logits: 'last' }).logits!, sampling, 0);
      const x = joinPieces(nonEmpty);
      for (let i = 0; i < x.length - 1; i++) model.forward({ inputsEmbeds: x[i], cache });
      return pick(model.forward({ inputsEmbeds: x[x.length - 1], cache, logits: 'last' }).logits!, sampling, 0);
    });
    let id = (await next.readI32())[0];
    const prefillMs = performance.now() - t0;
    tokens.push(id);
    onToken?.(id);
    const t1 = performance.now();
    let stoppedBy: GenerateResult['stoppedBy'] = 'length';
    for (let step = 1; ; step++) {
      if (eos.has(id)) { stoppedBy = 'eos'; break; }
      if (opts.stop?.(tokens)) { stoppedBy = 'stop'; break; }
      if (step >= maxNewTokens) break;
      if (signal?.aborted) { stoppedBy = 'abort'; break; }
      // the counters cover the steps after the first decode step (whose pipelines may still be compiling)
      if (step === 2 && be.counters) counted = { from: be.counters(), to: be.counters(), steps: 0 };
      const prev: Tensor = next;
      next = tidy(() => pick(model.forward({ inputIds: prev, cache, logits: 'last' }).logits!, sampling, step));
      prev.dispose();
      id = (await next.readI32())[0];
      if (counted) counted = { ...counted, to: be.counters!(), steps: counted.steps + 1 };
      tokens.push(id);
      onToken?.(id);
    }
    return result(stoppedBy, prefillMs, tokens.length > 1 ? performance.now() - t1 : 0);
  } finally {
    next?.dispose();
    cache.dispose();
    if (ownIds) ids!.dispose();
  }
}

export interface BatchPrompt {
  /** Token ids, or embedding pieces [T_i, hidden] prefilled in order (as generate's inputsEmbeds). */
  inputIds?: ArrayLike<number>;
  inputsEmbeds?: readonly Tensor[];
  /** This sequence's own settings (default: the batch's). */
  maxNewTokens?: number;
  sampling?: SamplingOptions;
  eosTokenIds?: readonly number[];
  onToken?: (id: number) => void;
  stop?: (tokens: readonly number[]) => boolean;
}

export interface GenerateBatchOptions extends Pick<GenerateOptions, 'sampling' | 'eosTokenIds' | 'signal'> {
  prompts: readonly BatchPrompt[];
  maxNewTokens?: number;
}

export interface BatchResult {
  /** Per sequence, in prompt order. */
  rows: { tokens: number[]; stoppedBy: GenerateResult['stoppedBy'] }[];
  /** Decode steps (each one token for every sequence still running) and their tokens per second. */
  steps: number;
  decodeTokensPerSec: number;
  prefillMs: number;
  decodeMs: number;
}

/**
 * Several prompts at once: each is prefilled into its own rows of a batch cache, then every step feeds one token of
 * each sequence still running through one batched forward (Decoder.stepBatch), reading back one id per sequence.
 * A sequence stops on its own (EOS, its stop callback, its length) and leaves the batch. A row's numbers do not depend
 * on the others, and a lone sequence's steps are generate()'s, so each sequence gets the tokens generate() gives it
 * (greedy: identical; sampled: the same draws, each sequence drawing as a lone one does, from (seed, step)).
 */
export async function generateBatch(model: Decoder, opts: GenerateBatchOptions): Promise<BatchResult> {
  const { prompts, signal } = opts;
  if (!prompts.length) throw new InvalidArgument('generateBatch: no prompts');
  const rowOpts = prompts.map((p, i) => {
    const maxNewTokens = p.maxNewTokens ?? opts.maxNewTokens;
    if (!Number.isInteger(maxNewTokens) || maxNewTokens! < 1)
      throw new InvalidArgument(`generateBatch: prompt ${i}: maxNewTokens must be a positive integer, got ${maxNewTokens}`);
    const sampling = p.sampling ?? opts.sampling ?? { greedy: true };
    checkSampling(sampling);
    if ((p.inputIds === undefined) === (p.inputsEmbeds === undefined))
      throw new InvalidArgument(`generateBatch: prompt ${i}: pass exactly one of inputIds and inputsEmbeds`);
    const length = p.inputIds ? p.inputIds.length : p.inputsEmbeds!.reduce((s, t) => s + t.shape[0], 0);
    if (length < 1) throw new InvalidArgument(`generateBatch: prompt ${i} is empty`);
    const fits = newTokensInContext(model, length, maxNewTokens!, `generateBatch: prompt ${i}`);
    return { maxNewTokens: fits, sampling, eos: new Set(p.eosTokenIds ?? opts.eosTokenIds ?? []), length };
  });
  const be = model.backend;
  const rows: BatchResult['rows'] = prompts.map(() => ({ tokens: [], stoppedBy: 'length' }));
  const cache = model.newBatchCache(prompts.length, Math.max(...rowOpts.map((o) => o.length + o.maxNewTokens)));
  const greedy = rowOpts.every((o) => isGreedy(o.sampling));
  // greedy: one argmax over the rows; sampled: each row draws as a lone sequence does, from its own [1, V] logits
  const pickRows = (logits: Tensor, running: readonly number[], step: number): Tensor[] => greedy
    ? [F.argmax(logits)]
    : running.map((r, i) => pick(F.sliceRows(logits, i, 1), rowOpts[r].sampling, step));
  const readIds = async (ts: Tensor[]) => {
    const got = (await Promise.all(ts.map((t) => t.readI32()))).flatMap((a) => Array.from(a));
    ts.forEach((t) => t.dispose());
    return got;
  };
  let running: number[] = [];
  let ids: number[] = [];
  const take = (r: number, id: number) => {
    const row = rows[r];
    row.tokens.push(id);
    prompts[r].onToken?.(id);
    if (rowOpts[r].eos.has(id)) row.stoppedBy = 'eos';
    else if (prompts[r].stop?.(row.tokens)) row.stoppedBy = 'stop';
    else if (row.tokens.length >= rowOpts[r].maxNewTokens) row.stoppedBy = 'length';
    else return true;
    return false;
  };
  try {
    const t0 = performance.now();
    for (const [b, p] of prompts.entries()) {
      if (signal?.aborted) {
        rows.slice(b).forEach((r) => (r.stoppedBy = 'abort'));
        break;
      }
      const own = p.inputIds ? be.fromValues(Array.from(p.inputIds), [p.inputIds.length], 'i32') : null;
      const next = tidy(() => {
        const out = model.prefillRow(cache, b, own ? { inputIds: own } : { inputsEmbeds: p.inputsEmbeds! }, 'last');
        return pick(out.logits!, rowOpts[b].sampling, 0);
      });
      own?.dispose();
      const id = (await next.readI32())[0];
      next.dispose();
      if (take(b, id)) {
        running.push(b);
        ids.push(id);
      }
    }
    const prefillMs = performance.now() - t0;
    const t1 = performance.now();
    let steps = 0;
    let tokens = 0;
    for (let step = 1; running.length; step++) {
      if (signal?.aborted) {
        for (const r of running) rows[r].stoppedBy = 'abort';
        break;
      }
      const now = running;
      const next = tidy(() => {
        const x = be.fromValues(ids, [ids.length], 'i32');
        return pickRows(model.stepBatch({ inputIds: x, cache, rows: now, logits: true }).logits!, now, step);
      });
      const got = await readIds(next);
      steps++;
      tokens += now.length;
      running = [];
      ids = [];
      now.forEach((r, i) => {
        if (take(r, got[i])) {
          running.push(r);
          ids.push(got[i]);
        }
      });
    }
    const decodeMs = steps ? performance.now() - t1 : 0;
    return { rows, steps, decodeTokensPerSec: decodeMs > 0 ? (tokens * 1000) / decodeMs : 0, prefillMs, decodeMs };
  } finally {
    cache.dispose();
  }
}

export interface GenerationDefaults {
  sampling: SamplingOptions;
  eosTokenIds: number[];
}

/**
 * generation_config.json as sampling defaults: do_sample false (or absent with no temperature) means greedy,
 * as in transformers; its eos_token_id (number or list) is merged with `extraEos` (config.json's and the
 * tokenizer's), in order, without repeats.
 */
export function parseGenerationConfig(
  json: string | Record<string, unknown> | null,
  extraEos: readonly number[] = [],
  file = 'generation_config.json',
): GenerationDefaults {
  let g: Record<string, unknown> = {};
  if (typeof json === 'string') {
    try {
      g = JSON.parse(json) as Record<string, unknown>;
    } catch (e) {
      throw new InvalidModelConfig(`${file} is not valid JSON (${(e as Error).message}); fix or delete it`);
    }
    if (typeof g !== 'object' || g === null || Array.isArray(g)) throw new InvalidModelConfig(`${file} must hold a JSON object`);
  } else if (json) g = json;
  const num = (k: string): number | undefined => {
    const v = g[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new InvalidModelConfig(`${file}: "${k}" must be a number, got ${showValue(v)}`);
    return v;
  };
  const e = g.eos_token_id;
  const own = Array.isArray(e) ? e.filter((x): x is number => typeof x === 'number') : typeof e === 'number' ? [e] : [];
  const eosTokenIds = [...new Set([...own, ...extraEos])];
  const temperature = num('temperature');
  const doSample = g.do_sample === true;
  if (!doSample) return { sampling: { greedy: true }, eosTokenIds };
  const sampling: SamplingOptions = { temperature: temperature ?? 1 };
  const topK = num('top_k');
  const topP = num('top_p');
  if (topK !== undefined) sampling.topK = topK;
  if (topP !== undefined) sampling.topP = topP;
  return { sampling, eosTokenIds };
}

/** Reads `dir`/generation_config.json (Node only); a folder without one gets greedy decoding. */
export async function readGenerationConfig(dir: string, extraEos: readonly number[] = []): Promise<GenerationDefaults> {
  const file = `${dir.replace(/\/+$/, '')}/generation_config.json`;
  let text: string | null = null;
  try {
    text = await readModelFile(file);
  } catch (e) {
    if (e instanceof UnsafeModelFile) throw e;
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new InvalidModelConfig(`${file} cannot be read (${(e as Error).message})`);
  }
  return parseGenerationConfig(text, extraEos, file);
}
