/**
 * `rmas forward` and `rmas generate`: one model from the command line, for tests and debugging. forward
 * writes the hidden states and logits of some token ids (or inputs_embeds); generate prints a completion
 * and the prefill and decode rates.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { DTypeMismatch, InvalidArgument, ShapeMismatch, UnsafeModelFile, UsageError } from '../errors';
import { readModelFile } from '../formats/model-file';
import { writeFailed } from './outputs';
import { SafetensorsFile, writeSafetensors } from '../formats/safetensors';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { fileSource } from '../formats/sources';
import {
  Decoder,
  formatWeightBytes,
  generate,
  loadDecoderWeights,
  newTokensInContext,
  parseDecoderConfig,
  readGenerationConfig,
  type SamplingOptions,
} from '../model';
import type { Backend } from '../tensor/backend';
import { loadTokenizerFromDir } from '../tokenizer';
import { kvDtypeFlag, numberFlag, required, type Values } from './args';
import { withOutputLocks } from './output-lock';
import { DEVICE_OPTIONS } from './devices';

const s = { type: 'string' } as const;
const b = { type: 'boolean' } as const;

export const FORWARD_OPTIONS = { model: s, ids: s, embeds: s, out: s, ...DEVICE_OPTIONS } as const;

export const GENERATE_OPTIONS = {
  model: s,
  prompt: s,
  chat: b,
  max_new_tokens: s,
  greedy: b,
  temperature: s,
  top_p: s,
  top_k: s,
  seed: s,
  json: b,
  kv_dtype: s,
  ...DEVICE_OPTIONS,
} as const;

export const FORWARD_USAGE =
  `  rmas forward --model DIR (--ids 1,2,3 | --embeds FILE.safetensors) --out FILE.safetensors [--backend webgpu|cpu|cuda]
      writes F32 hidden_states [T, d] (after the final norm) and logits [T, vocab];
      --embeds reads the F32 tensor inputs_embeds [T, d]; an existing --out is never replaced, and T may not exceed
      the model's max_position_embeddings (ContextTooLong)`;

export const GENERATE_USAGE = `  rmas generate --model DIR --prompt TEXT [--chat] [--max_new_tokens N]
                [--greedy | --temperature T --top_p P --top_k K --seed S] [--backend webgpu|cpu|cuda] [--kv_dtype auto|f32|f16] [--json]
      prints the generated text, then prefill and decode tokens/s on stderr; --json prints one object instead: text,
      tokens, prefill_tokens_per_s, decode_tokens_per_s, and per token of the decode steps after the first what the
      backend counted (WebGPU; null elsewhere): dispatches_per_token, submits_per_token, readbacks_per_token,
      weight_bytes_per_token (bytes read of weights: each weight once, the embedding table only its row, again whole
      when the LM head is tied to it), activation_bytes_per_token, weight_bytes, kv_dtype;
      sampling defaults come from the model's generation_config.json; --max-new-tokens, --top-p and --top-k are the same flags;
      generation stops where the model's context (max_position_embeddings) ends, said on stderr before it starts when
      --max_new_tokens reaches past it; a prompt longer than the context is refused (ContextTooLong)`;

async function loadModel(dir: string, backend: Backend) {
  const configFile = `${dir.replace(/\/+$/, '')}/config.json`;
  let text: string;
  try {
    text = await readModelFile(configFile);
  } catch (e) {
    if (e instanceof UnsafeModelFile) throw e;
    throw new UsageError(`--model ${dir}: cannot read ${configFile} (${(e as Error).message}); give a Hugging Face model folder`);
  }
  const config = parseDecoderConfig(text, configFile);
  const store = await openCheckpoint(dir);
  try {
    const weights = await loadDecoderWeights(config, store, backend);
    process.stderr.write(
      `model: ${config.family}, ${config.layers} layers, hidden ${config.hidden}, weights ${formatWeightBytes(weights)}\n`,
    );
    return new Decoder(config, weights);
  } finally {
    await store.close();
  }
}

function parseIds(s: string): number[] {
  const ids = s.split(',').map((x) => x.trim());
  if (!ids.length || ids.some((x) => !/^\d+$/.test(x))) throw new UsageError(`--ids ${s}: expected comma-separated token ids, e.g. 1,2,3`);
  return ids.map(Number);
}

async function readEmbeds(path: string, hidden: number, backend: Backend) {
  const f = await SafetensorsFile.open(fileSource(path));
  if (!f.names().includes('inputs_embeds')) {
    throw new ShapeMismatch(
      `${path} has no tensor "inputs_embeds" (it holds ${f.names().join(', ') || 'none'}); write the embeddings under that name`,
    );
  }
  const t = await f.read('inputs_embeds');
  if (t.dtype !== 'F32') throw new DTypeMismatch(`${path}: inputs_embeds is ${t.dtype}, expected F32`);
  if (t.shape.length !== 2 || t.shape[1] !== hidden || t.shape[0] < 1) {
    throw new ShapeMismatch(`${path}: inputs_embeds has shape [${t.shape.join(', ')}], expected [T, ${hidden}] for this model`);
  }
  return backend.fromBytes(t.bytes, t.shape, 'f32');
}

const f32 = (a: Float32Array, shape: number[]) => ({
  dtype: 'F32' as const,
  shape,
  bytes: new Uint8Array(a.buffer, a.byteOffset, a.byteLength),
});

export async function forwardCmd(a: Values<typeof FORWARD_OPTIONS>, backend: () => Promise<Backend>) {
  const out = required('out', a.out);
  // one writer per output: a second forward to the same --out is refused before it loads
  return withOutputLocks('forward', async (locks) => {
    locks.take('out', out);
    await forward(a, out, backend);
  });
}

async function forward(a: Values<typeof FORWARD_OPTIONS>, out: string, backend: () => Promise<Backend>) {
  const dir = required('model', a.model);
  if ((a.ids === undefined) === (a.embeds === undefined)) throw new UsageError('give exactly one of --ids and --embeds');
  const ids = a.ids !== undefined ? parseIds(a.ids) : null;
  // as convert: an existing file is never replaced (checked again when writing)
  if (existsSync(out)) throw new InvalidArgument(`--out ${out} exists; name a new file (nothing was changed)`);
  const be = await backend();
  const model = await loadModel(dir, be);
  if (ids) newTokensInContext(model, ids.length, 1, '--ids');
  const embeds = ids ? null : await readEmbeds(a.embeds!, model.config.hidden, be);
  if (embeds) newTokensInContext(model, embeds.shape[0], 1, `inputs_embeds of --embeds ${a.embeds}`);
  const input = ids ? { inputIds: be.fromValues(ids, [ids.length], 'i32') } : { inputsEmbeds: embeds! };
  const t0 = performance.now();
  const r = model.forward({ ...input, logits: 'all' });
  const [hidden, logits] = await Promise.all([r.hidden.read(), r.logits!.read()]);
  const ms = performance.now() - t0;
  const T = r.hidden.shape[0];
  const bytes = writeSafetensors({
    hidden_states: f32(hidden, [T, model.config.hidden]), logits: f32(logits, [T, model.config.vocabSize]),
  });
  try {
    writeFileSync(out, bytes, { flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      throw new InvalidArgument(`--out ${out} appeared while the forward pass ran; nothing was replaced`);
    // the file was made by this call (wx): a half-written one goes
    if ((e as NodeJS.ErrnoException).syscall === 'write') rmSync(out, { force: true });
    throw writeFailed(e, `writing --out ${out}`, 'no part of it was left; run the command again once the disk can be written');
  }
  process.stderr.write(`forward: ${T} positions in ${ms.toFixed(1)} ms; wrote ${out}\n`);
}

export async function generateCmd(a: Values<typeof GENERATE_OPTIONS>, backend: () => Promise<Backend>) {
  const dir = required('model', a.model);
  const prompt = required('prompt', a.prompt);
  const maxNewTokens = numberFlag('max_new_tokens', a.max_new_tokens, { integer: true, min: 1 }) ?? 128;
  const temperature = numberFlag('temperature', a.temperature);
  const topP = numberFlag('top_p', a.top_p);
  const topK = numberFlag('top_k', a.top_k, { integer: true });
  const seed = numberFlag('seed', a.seed, { integer: true });
  if (a.greedy && [temperature, topP, topK, seed].some((x) => x !== undefined)) {
    throw new UsageError('--greedy does not combine with --temperature, --top_p, --top_k or --seed');
  }
  const kv = kvDtypeFlag(a.kv_dtype);
  const be = await backend();
  const model = await loadModel(dir, be);
  if (kv !== 'auto') model.kvDtype = kv;
  const tok = await loadTokenizerFromDir(dir);
  const defaults = await readGenerationConfig(dir, [...model.config.eosTokenIds, ...tok.eosTokenIds]);
  let sampling: SamplingOptions = defaults.sampling;
  if (a.greedy) sampling = { greedy: true };
  else if ([temperature, topP, topK, seed].some((x) => x !== undefined)) {
    const base = defaults.sampling.greedy ? {} : defaults.sampling;
    sampling = {
      ...base,
      ...(temperature !== undefined && { temperature }),
      ...(topP !== undefined && { topP }),
      ...(topK !== undefined && { topK }),
      ...(seed !== undefined && { seed }),
    };
  }
  const text = a.chat ? tok.applyChatTemplate([{ role: 'user', content: prompt }], { addGenerationPrompt: true }) : prompt;
  const ids = tok.encode(text, { addSpecialTokens: !a.chat });
  // refused before any forward pass; a budget past the context is cut to what fits, and said so
  const fits = newTokensInContext(model, ids.length, maxNewTokens, a.chat ? '--prompt with the chat template' : '--prompt');
  if (fits < maxNewTokens) {
    process.stderr.write(`note: --max_new_tokens ${maxNewTokens} runs past the model's context (max_position_embeddings ` +
      `${model.config.maxPositions}): the ${ids.length}-token prompt leaves room for ${fits} new tokens; generation stops there\n`);
  }
  process.stderr.write(
    `prompt: ${ids.length} tokens; sampling ${JSON.stringify(sampling)}; eos ${JSON.stringify(defaults.eosTokenIds)}; ${model.kvDtype} KV cache\n`,
  );

  // Stream the text as it grows (an incomplete UTF-8 tail held back until the next token completes it).
  const tokens: number[] = [];
  let shown = '';
  const show = (final: boolean) => {
    const s = final ? tok.decode(tokens, { skipSpecialTokens: true }) : tok.decodeStreaming(tokens);
    if (s.startsWith(shown)) process.stdout.write(s.slice(shown.length));
    shown = s;
  };
  const r = await generate(model, {
    inputIds: ids, maxNewTokens: fits, sampling, eosTokenIds: defaults.eosTokenIds,
    onToken: (id) => { tokens.push(id); if (!a.json) show(false); },
  });
  if (a.json) {
    // decode steps after the first: per token, the work the backend counted (null on a backend that counts none)
    const c = r.decodeCounters;
    const per = (n: number | undefined) => (c && n !== undefined ? n / c.steps : null);
    process.stdout.write(`${JSON.stringify({
      text: tok.decode(r.tokens, { skipSpecialTokens: true }), tokens: r.tokens.length, stopped_by: r.stoppedBy,
      prefill_tokens_per_s: r.prefillTokensPerSec, decode_tokens_per_s: r.decodeTokensPerSec,
      dispatches_per_token: per(c?.dispatches), submits_per_token: per(c?.submits), readbacks_per_token: per(c?.readbacks),
      weight_bytes_per_token: per(c?.weightBytes), activation_bytes_per_token: per(c?.activationBytes),
      weight_bytes: model.weights.totalBytes, counted_steps: c?.steps ?? 0, kv_dtype: model.kvDtype,
    })}\n`);
    return;
  }
  show(true);
  process.stdout.write('\n');
  process.stderr.write(`${r.tokens.length} tokens, stopped by ${r.stoppedBy}; prefill ${r.prefillTokensPerSec.toFixed(1)} tokens/s ` +
    `(${r.prefillMs.toFixed(1)} ms), decode ${r.decodeTokensPerSec.toFixed(1)} tokens/s (${r.decodeMs.toFixed(1)} ms)\n`);
}
