/**
 * `rmas forward` and `rmas generate`: the engine from the command line (Node), for tests and debugging.
 * Started by bin/rmas.js, which points Dawn at the bundled lavapipe and runs this file through tsx.
 * Exit codes: 0 done, 1 an engine error (its name and message on stderr), 2 bad arguments (usage).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { DTypeMismatch, RmasError, ShapeMismatch, WebGpuUnavailable } from '../errors';
import { SafetensorsFile, writeSafetensors } from '../formats/safetensors';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { fileSource } from '../formats/sources';
import { Decoder, formatWeightBytes, generate, loadDecoderWeights, parseDecoderConfig, readGenerationConfig, type SamplingOptions } from '../model';
import { parseKvDtype } from '../model/cache';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { CudaBackend } from '../tensor/cuda';
import { WebGpuBackend } from '../tensor/webgpu';
import { loadTokenizerFromDir } from '../tokenizer';
import { ASK_USAGE, AskUsageError, askCmd, type AskArgs } from './ask';
import { CONVERT_USAGE, ConvertUsageError, convertCmd } from './convert';
import { openPlacement, parseDevices } from './devices';
import { formatReport, healthcheck, healthLevel } from './healthcheck';
import { PLAN_MEMORY_USAGE, PlanMemoryUsageError, planMemoryCmd } from './plan-memory';
import { RUN_OPTIONS, RUN_USAGE, RunUsageError, runCmd } from './run';
import { TrainUsageError, trainCmd } from './train';
import { TRAIN_OPTIONS, TRAIN_USAGE } from './train-args';

export const USAGE = `usage:
  rmas forward --model DIR (--ids 1,2,3 | --embeds FILE.safetensors) --out FILE.safetensors [--backend webgpu|cpu|cuda]
      writes F32 hidden_states [T, d] (after the final norm) and logits [T, vocab];
      --embeds reads the F32 tensor inputs_embeds [T, d]
  rmas generate --model DIR --prompt TEXT [--chat] [--max-new-tokens N]
                [--greedy | --temperature T --top-p P --top-k K --seed S] [--backend webgpu|cpu|cuda] [--kv_dtype auto|f32|f16] [--json]
      prints the generated text, then prefill and decode tokens/s on stderr; --json prints one object instead: text,
      tokens, prefill_tokens_per_s, decode_tokens_per_s, and per token of the decode steps after the first what the
      backend counted (WebGPU; null elsewhere): dispatches_per_token, submits_per_token, readbacks_per_token,
      weight_bytes_per_token (bytes read of weights: each weight once, the embedding table only its row, again whole
      when the LM head is tied to it), activation_bytes_per_token, weight_bytes, kv_dtype;
      sampling defaults come from the model's generation_config.json
${ASK_USAGE}
${RUN_USAGE}
${TRAIN_USAGE}
${PLAN_MEMORY_USAGE}
${CONVERT_USAGE}
  rmas healthcheck [--level 1|2|3 (default 3, as upstream)] [--json]
      1: dependencies (python3 for code benchmarks a warning), styles and the models in the Hugging Face cache; 2: + a test allocation on
      cpu, webgpu and cuda; 3: + the files of RecursiveMAS/Sequential-Light-Outerlinks and the datasets rows API (a warning offline);
      exit 1 when a required check fails (an unavailable webgpu or cuda is a warning)
  --device cuda|cpu|cuda:N (forward, generate, ask, run) is upstream's spelling of --backend cuda|cpu [--devices N]
  --backend defaults to webgpu when an adapter is found, else cpu; cuda needs an NVIDIA GPU and the addon
      (npm run build:cuda). With --backend cuda, --devices 0,1,… picks the GPUs: forward, generate and
      train-inner use one; ask, run and train-outer place the roles over them in role order (role i on the
      i-th device, wrapping), one role per GPU for a system that does not fit on one`;

/** Bad command-line arguments: usage and exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

const OPTIONS = {
  model: { type: 'string' },
  ids: { type: 'string' },
  embeds: { type: 'string' },
  out: { type: 'string' },
  backend: { type: 'string' },
  devices: { type: 'string' },
  prompt: { type: 'string' },
  chat: { type: 'boolean' },
  'max-new-tokens': { type: 'string' },
  greedy: { type: 'boolean' },
  temperature: { type: 'string' },
  'top-p': { type: 'string' },
  'top-k': { type: 'string' },
  seed: { type: 'string' },
  // rmas ask (upstream run.py spellings)
  style: { type: 'string' },
  question: { type: 'string', short: 'q', multiple: true },
  questions_file: { type: 'string' },
  output_jsonl: { type: 'string' },
  device: { type: 'string' },
  enable_thinking: { type: 'string' },
  batch_size: { type: 'string' },
  trust_remote_code: { type: 'string' },
  ckpt_override: { type: 'string', multiple: true },
  num_recursive_rounds: { type: 'string' },
  latent_length: { type: 'string' },
  top_p: { type: 'string' },
  top_k: { type: 'string' },
  max_new_tokens: { type: 'string' },
  mode: { type: 'string' },
  task: { type: 'string' },
  fn_name: { type: 'string' },
  prompts: { type: 'string' },
  no_ans: { type: 'boolean' },
  dump: { type: 'string' },
  json: { type: 'boolean' },
  level: { type: 'string' },
  kv_dtype: { type: 'string' },
  // rmas convert
  in: { type: 'string' },
  dtype: { type: 'string' },
  kind: { type: 'string' },
  role: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Args = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

function need(a: Args, k: 'model' | 'out' | 'prompt'): string {
  const v = a[k];
  if (v === undefined || v === '') throw new UsageError(`--${k} is required`);
  return v;
}

function number(a: Args, k: 'max-new-tokens' | 'temperature' | 'top-p' | 'top-k' | 'seed', integer: boolean): number | undefined {
  const v = a[k];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || (integer && !Number.isInteger(n))) {
    throw new UsageError(`--${k} ${v}: expected ${integer ? 'an integer' : 'a number'}`);
  }
  return n;
}

/**
 * Upstream's --device (run.py, run_custom.py): `cuda`, `cpu` or `cuda:N`, spelled here as --backend and
 * --devices. The values of --backend and --devices to use; a --backend or --devices that says otherwise is
 * a usage error naming both.
 */
export function deviceFlag(v: { device?: string; backend?: string; devices?: string }, usage: (m: string) => Error): { backend?: string; devices?: string } {
  const { device, backend, devices } = v;
  if (device === undefined) return { backend, devices };
  const m = /^(cuda|cpu)(?::(\d+))?$/.exec(device.trim());
  if (!m || (m[1] === 'cpu' && m[2] !== undefined)) throw usage(`--device ${device}: expected cuda, cpu or cuda:N (upstream's spelling; --backend webgpu for WebGPU)`);
  const be = m[1]!;
  if (backend !== undefined && backend !== be) throw usage(`--device ${device} asks for the ${be} backend but --backend is ${backend}; give one of them`);
  if (m[2] !== undefined) {
    if (devices !== undefined && devices.split(',').map((x) => x.trim()).join(',') !== String(Number(m[2]))) {
      throw usage(`--device ${device} picks CUDA device ${Number(m[2])} but --devices is ${devices}; give one of them`);
    }
    return { backend: be, devices: String(Number(m[2])) };
  }
  return { backend: be, devices };
}

function only(a: Args, cmd: string, allowed: (keyof Args)[]) {
  for (const k of Object.keys(a) as (keyof Args)[]) {
    if (a[k] !== undefined && !allowed.includes(k)) throw new UsageError(`--${k} does not apply to "rmas ${cmd}"`);
  }
}

async function pickBackend(choice: string | undefined, device = 0): Promise<Backend> {
  if (choice !== undefined && choice !== 'webgpu' && choice !== 'cpu' && choice !== 'cuda') throw new UsageError(`--backend ${choice}: expected webgpu, cpu or cuda`);
  let be: Backend;
  if (choice === 'cpu') be = new CpuBackend('f32');
  else if (choice === 'cuda') be = await CudaBackend.create({ device });
  else if (choice === 'webgpu') be = await WebGpuBackend.create();
  else {
    try {
      be = await WebGpuBackend.create();
    } catch (e) {
      if (!(e instanceof WebGpuUnavailable)) throw e;
      process.stderr.write(`no WebGPU adapter (${e.message}); `);
      be = new CpuBackend('f32');
    }
  }
  process.stderr.write(`backend: ${be.name}\n`);
  return be;
}

async function loadModel(dir: string, backend: Backend) {
  const configFile = `${dir.replace(/\/+$/, '')}/config.json`;
  let text: string;
  try {
    text = readFileSync(configFile, 'utf8');
  } catch (e) {
    throw new UsageError(`--model ${dir}: cannot read ${configFile} (${(e as Error).message}); give a Hugging Face model folder`);
  }
  const config = parseDecoderConfig(text, configFile);
  const store = await openCheckpoint(dir);
  try {
    const weights = await loadDecoderWeights(config, store, backend);
    process.stderr.write(`model: ${config.family}, ${config.layers} layers, hidden ${config.hidden}, weights ${formatWeightBytes(weights)}\n`);
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
    throw new ShapeMismatch(`${path} has no tensor "inputs_embeds" (it holds ${f.names().join(', ') || 'none'}); write the embeddings under that name`);
  }
  const t = await f.read('inputs_embeds');
  if (t.dtype !== 'F32') throw new DTypeMismatch(`${path}: inputs_embeds is ${t.dtype}, expected F32`);
  if (t.shape.length !== 2 || t.shape[1] !== hidden || t.shape[0] < 1) {
    throw new ShapeMismatch(`${path}: inputs_embeds has shape [${t.shape.join(', ')}], expected [T, ${hidden}] for this model`);
  }
  return backend.fromBytes(t.bytes, t.shape, 'f32');
}

const f32 = (a: Float32Array, shape: number[]) => ({ dtype: 'F32' as const, shape, bytes: new Uint8Array(a.buffer, a.byteOffset, a.byteLength) });

async function forwardCmd(a: Args, backend: () => Promise<Backend>) {
  only(a, 'forward', ['model', 'ids', 'embeds', 'out', 'backend', 'devices', 'device']);
  const dir = need(a, 'model');
  const out = need(a, 'out');
  if ((a.ids === undefined) === (a.embeds === undefined)) throw new UsageError('give exactly one of --ids and --embeds');
  const ids = a.ids !== undefined ? parseIds(a.ids) : null;
  const be = await backend();
  const model = await loadModel(dir, be);
  const input = ids ? { inputIds: be.fromValues(ids, [ids.length], 'i32') } : { inputsEmbeds: await readEmbeds(a.embeds!, model.config.hidden, be) };
  const t0 = performance.now();
  const r = model.forward({ ...input, logits: 'all' });
  const [hidden, logits] = await Promise.all([r.hidden.read(), r.logits!.read()]);
  const ms = performance.now() - t0;
  const T = r.hidden.shape[0];
  writeFileSync(out, writeSafetensors({ hidden_states: f32(hidden, [T, model.config.hidden]), logits: f32(logits, [T, model.config.vocabSize]) }));
  process.stderr.write(`forward: ${T} positions in ${ms.toFixed(1)} ms; wrote ${out}\n`);
}

async function generateCmd(a: Args, backend: () => Promise<Backend>) {
  only(a, 'generate', ['model', 'prompt', 'chat', 'max-new-tokens', 'greedy', 'temperature', 'top-p', 'top-k', 'seed', 'backend', 'devices', 'device', 'json', 'kv_dtype']);
  const dir = need(a, 'model');
  const prompt = need(a, 'prompt');
  const maxNewTokens = number(a, 'max-new-tokens', true) ?? 128;
  if (maxNewTokens < 1) throw new UsageError(`--max-new-tokens ${maxNewTokens}: expected at least 1`);
  const temperature = number(a, 'temperature', false);
  const topP = number(a, 'top-p', false);
  const topK = number(a, 'top-k', true);
  const seed = number(a, 'seed', true);
  if (a.greedy && [temperature, topP, topK, seed].some((x) => x !== undefined)) {
    throw new UsageError('--greedy does not combine with --temperature, --top-p, --top-k or --seed');
  }
  const kv = parseKvDtype(a.kv_dtype, (m) => new UsageError(m));
  const be = await backend();
  const model = await loadModel(dir, be);
  if (kv !== 'auto') model.kvDtype = kv;
  const tok = await loadTokenizerFromDir(dir);
  const defaults = await readGenerationConfig(dir, [...model.config.eosTokenIds, ...tok.eosTokenIds]);
  let sampling: SamplingOptions = defaults.sampling;
  if (a.greedy) sampling = { greedy: true };
  else if ([temperature, topP, topK, seed].some((x) => x !== undefined)) {
    const base = defaults.sampling.greedy ? {} : defaults.sampling;
    sampling = { ...base, ...(temperature !== undefined && { temperature }), ...(topP !== undefined && { topP }), ...(topK !== undefined && { topK }), ...(seed !== undefined && { seed }) };
  }
  const text = a.chat ? tok.applyChatTemplate([{ role: 'user', content: prompt }], { addGenerationPrompt: true }) : prompt;
  const ids = tok.encode(text, { addSpecialTokens: !a.chat });
  process.stderr.write(`prompt: ${ids.length} tokens; sampling ${JSON.stringify(sampling)}; eos ${JSON.stringify(defaults.eosTokenIds)}; ${model.kvDtype} KV cache\n`);

  // Stream the text as it grows (an incomplete UTF-8 tail held back until the next token completes it).
  const tokens: number[] = [];
  let shown = '';
  const show = (final: boolean) => {
    const s = final ? tok.decode(tokens, { skipSpecialTokens: true }) : tok.decodeStreaming(tokens);
    if (s.startsWith(shown)) process.stdout.write(s.slice(shown.length));
    shown = s;
  };
  const r = await generate(model, {
    inputIds: ids, maxNewTokens, sampling, eosTokenIds: defaults.eosTokenIds,
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

async function healthcheckCmd(a: Args): Promise<number> {
  only(a, 'healthcheck', ['level', 'json']);
  const level = healthLevel(a.level);
  if (level === null) throw new UsageError(`--level ${a.level}: expected 1, 2 or 3`);
  const report = await healthcheck(level, {
    webgpu: async () => {
      const backend = await WebGpuBackend.create();
      return { backend, close: () => backend.ctx.destroy() };
    },
    cuda: () => CudaBackend.create(),
  });
  process.stdout.write(a.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
  return report.ok ? 0 : 1;
}

/**
 * The flags of a command with its own option table (argv[0] is the command); null after printing the usage
 * for --help. Unknown flags and stray arguments throw `usage`'s error.
 */
function commandArgs<O extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: O, usage: (m: string) => Error) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv.slice(1), options, allowPositionals: true, strict: true });
  } catch (e) {
    throw usage((e as Error).message);
  }
  if ((parsed.values as { help?: boolean }).help) {
    process.stdout.write(`${USAGE}\n`);
    return null;
  }
  if (parsed.positionals.length) throw usage(`unexpected argument ${parsed.positionals[0]}`);
  return parsed;
}

/** Runs one command; returns the exit code (never calls process.exit, so tests can call it in-process). */
export async function main(argv: string[]): Promise<number> {
  let made: Backend | null = null;
  let devices: number[] | null = null;
  const backend = async (choice?: string) => (made = await pickBackend(choice, devices?.[0]));
  /** A system's roles over several GPUs (--devices with more than one), else none: every role on `backend`. */
  const place = () => (devices && devices.length > 1
    ? (roles: readonly string[]) => openPlacement(roles, devices!, (s) => process.stderr.write(s))
    : undefined);
  /** --devices for a command that runs one model: one device. */
  const oneDevice = (usage: (m: string) => Error) => {
    if (devices && devices.length > 1) throw usage(`--devices ${devices.join(',')}: this command runs one model; give one device`);
  };
  try {
    if (argv[0] === 'train-inner' || argv[0] === 'train-outer') {
      const usage = (m: string) => new TrainUsageError(m);
      const t = commandArgs(argv, TRAIN_OPTIONS, usage);
      if (!t) return 0;
      devices = parseDevices(t.values.devices, t.values.backend, usage);
      if (argv[0] === 'train-inner') oneDevice(usage);
      await trainCmd(argv[0] === 'train-inner' ? 'inner' : 'outer', t.values, () => backend(t.values.backend), {
        out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s), tty: !!process.stderr.isTTY,
      }, place());
      return 0;
    }
    if (argv[0] === 'run') {
      const usage = (m: string) => new RunUsageError(m);
      const r = commandArgs(argv, RUN_OPTIONS, usage);
      if (!r) return 0;
      Object.assign(r.values, deviceFlag(r.values, usage));
      devices = parseDevices(r.values.devices, r.values.backend, usage);
      await runCmd(r.values, () => backend(r.values.backend), (s) => process.stdout.write(s), (s) => process.stderr.write(s), place());
      return 0;
    }
    if (argv[0] === 'plan-memory') {
      if (argv.includes('--help') || argv.includes('-h')) {
        process.stdout.write(`${USAGE}\n`);
        return 0;
      }
      planMemoryCmd(argv.slice(1), (s) => process.stdout.write(s));
      return 0;
    }
    let parsed;
    try {
      parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const { values: a, positionals } = parsed;
    if (a.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    const [cmd, ...rest] = positionals;
    if (rest.length) throw new UsageError(`unexpected argument ${rest[0]}`);
    const usage = (m: string) => new UsageError(m);
    if (cmd === 'forward' || cmd === 'generate' || cmd === 'ask') {
      Object.assign(a, deviceFlag(a, usage));
      devices = parseDevices(a.devices, a.backend, usage);
    }
    if (cmd === 'forward') {
      oneDevice(usage);
      await forwardCmd(a, () => backend(a.backend));
    } else if (cmd === 'generate') {
      oneDevice(usage);
      await generateCmd(a, () => backend(a.backend));
    } else if (cmd === 'ask') {
      only(a, 'ask', ['style', 'question', 'questions_file', 'output_jsonl', 'ckpt_override', 'num_recursive_rounds', 'latent_length', 'greedy', 'temperature',
        'top_p', 'top_k', 'seed', 'max_new_tokens', 'mode', 'task', 'fn_name', 'prompts', 'no_ans', 'backend', 'devices', 'device', 'dump', 'json',
        'enable_thinking', 'batch_size', 'trust_remote_code', 'dtype', 'kv_dtype']);
      await askCmd(a as AskArgs, () => backend(a.backend), (s) => process.stdout.write(s), (s) => process.stderr.write(s), place());
    }
    else if (cmd === 'healthcheck') return await healthcheckCmd(a);
    else if (cmd === 'convert') {
      only(a, 'convert', ['in', 'out', 'dtype', 'kind', 'style', 'role']);
      process.stdout.write(await convertCmd(a));
    }
    else throw new UsageError(cmd === undefined ? 'no command given' : `unknown command "${cmd}"`);
    return 0;
  } catch (e) {
    if (e instanceof UsageError || e instanceof AskUsageError || e instanceof RunUsageError || e instanceof ConvertUsageError || e instanceof TrainUsageError || e instanceof PlanMemoryUsageError) {
      process.stderr.write(`rmas: ${e.message}\n${USAGE}\n`);
      return 2;
    }
    const err = e as Error;
    process.stderr.write(`rmas: ${err instanceof RmasError ? err.name : err?.name ?? 'Error'}: ${err?.message ?? String(e)}\n`);
    if (process.env.RMAS_DEBUG && err?.stack) process.stderr.write(`${err.stack}\n`);
    return 1;
  } finally {
    const m = made as Backend | null;
    if (m instanceof WebGpuBackend) m.ctx.destroy();
  }
}

// Dawn keeps the event loop alive after the device is gone: exit explicitly once stdout has drained.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const code = await main(process.argv.slice(2));
  process.stdout.write('', () => process.exit(code));
}
