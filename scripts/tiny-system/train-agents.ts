/**
 * Trains the tiny system's three agents from scratch (issue 7, item 2): a Qwen3-style planner, a
 * Llama-style critic and a Qwen2-style solver, each a full-weight decoder of this project's engine
 * (createTrainableDecoder + lmLoss + AdamW), on the task family of src/eval/tiny-task.ts in the chain
 * shape's chat format exactly as inference renders it: system prompt, the role's tiny prompt
 * (prompts.ts) with real texts in its slots, the generation prompt (with the empty think
 * block), then the gold target and <|im_end|>; loss over the target and <|im_end|> only. The planner also
 * learns the feedback prompt (the solver's answer in the feedback slot), as text-MAS rounds ≥ 2 use it,
 * and a quarter of the solver's sequences leave the refined plan empty, so the solver alone is a baseline
 * that answers rather than stalls. All three share one byte-level BPE whose merges are learned from the
 * task's train split and the prompts (TASK_MERGES).
 *
 *   npx tsx scripts/tiny-system/build.ts agents --out DIR [--role R] [--steps N] [--seed S] [--backend cpu|webgpu]
 *
 * Each agent goes to DIR/<role>/ (the system folder's layout) in Hugging Face layout (config.json with the family's key conventions,
 * generation_config.json, tokenizer files, model.safetensors). On the CPU backend the run is a pure
 * function of the seed: same bytes on every run.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { F, Tape } from '../../src/autograd/index.ts';
import { AdamW } from '../../src/autograd/ops/optim.ts';
import { InvalidArgument } from '../../src/errors.ts';
import { parseDecoderConfig } from '../../src/model/config.ts';
import type { Decoder } from '../../src/model/decoder.ts';
import { generate } from '../../src/model/generate.ts';
import { lmLoss } from '../../src/model/lm-loss.ts';
import { createTrainableDecoder, saveDecoderCheckpoint } from '../../src/model/trainable.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { loadTokenizerFromDir } from '../../src/tokenizer/index.ts';
import type { Tokenizer } from '../../src/tokenizer/tokenizer.ts';
import { initialState, trainLoop, type StepEvent } from '../../src/train/loop.ts';
import { userPrompt, type PromptKind } from '../../src/mas/prompts.ts';
import { SLOTS } from '../../src/mas/slots.ts';
import { renderChat } from '../../src/tokenizer/slots.ts';
import { buildConfig, buildGenerationConfig, specialIds, type TinySpec, vocabSize } from './tiny-models.ts';
import { buildTinyTokenizer, type TinyTokenizer } from './tokenizer.ts';
import { TINY_PROMPT_FILE, TINY_PROMPTS } from './prompts.ts';
import { Rng } from '../../src/util/rng.ts';
import { decode } from '../../src/formats/encode.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { fileSource } from '../../src/formats/sources.ts';
import { arithmeticFacts, scoreAnswer, taskSplit, type TaskRow } from '../../src/eval/tiny-task.ts';

export const ROLES = ['planner', 'critic', 'solver'] as const;
export type AgentRole = (typeof ROLES)[number];

export interface AgentSpec extends Omit<TinySpec, 'seed' | 'separateTemplate'> {
  role: AgentRole;
  /** Optimizer steps of this agent when the run gives none (the critic, who computes, needs most). */
  steps?: number;
  /** Arithmetic drill sequences mixed into this agent's data (drillExamples); default none. */
  drills?: number;
  /**
   * A second phase on the same weights after `steps`, with a fresh optimizer and cosine schedule (a warm
   * restart): the role's chats plus `drills` drill sequences, at `lr`. The critic learns its arithmetic in
   * a drill-heavy first phase, which leaves its copying of operands from the plan undertrained; this phase
   * restores the copying without losing the facts. The solver's copies results from the refined plan.
   */
  finetune?: { steps: number; drills: number; lr: number };
}

/** The default agents: different families and widths, context 512 (buildConfig's max_position_embeddings). */
export const AGENT_SPECS: readonly AgentSpec[] = [
  {
    role: 'planner',
    name: 'planner-qwen3',
    family: 'qwen3',
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 176,
    tie: true,
    steps: 4000,
  },
  {
    role: 'critic',
    name: 'critic-llama',
    family: 'llama',
    hidden: 96,
    layers: 2,
    heads: 6,
    kvHeads: 2,
    headDim: 16,
    intermediate: 256,
    tie: false,
    steps: 4000,
    drills: 3000,
    finetune: { steps: 1500, drills: 500, lr: 2e-3 },
  },
  {
    role: 'solver',
    name: 'solver-qwen2',
    family: 'qwen2',
    hidden: 64,
    layers: 3,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 176,
    tie: true,
    steps: 2500,
    finetune: { steps: 1500, drills: 0, lr: 2e-3 },
  },
];

export interface TrainAgentsOptions {
  out: string;
  /** Optimizer steps per agent (default: each spec's own, else DEFAULTS.steps). */
  steps?: number;
  seed?: number;
  backend?: Backend;
  specs?: readonly AgentSpec[];
  /** Sequences per micro-batch and micro-batches per optimizer step. */
  batchSize?: number;
  gradAccum?: number;
  lr?: number;
  warmup?: number;
  /** Longest training sequence in tokens (longer chats are right-truncated by innerExample). */
  maxLength?: number;
  /** Use only the first N train rows (tests). */
  trainRows?: number;
  /**
   * Stop after this many optimizer steps of the `steps`-step schedule (tests compare a run's start
   * with the loss curve a full build recorded). Default: run them all.
   */
  stopAfter?: number;
  /** Print the mean loss every N steps (0: never). */
  logEvery?: number;
  /**
   * Start the agents that have a fine-tune phase from the end of their first phase instead of running it:
   * the folder of that phase's checkpoint (DIR/<role>/model.safetensors) and its recorded losses. The
   * first phase is a pure function of the seed, so this equals the whole run; it saves its time.
   */
  firstPhase?: { dir: string; losses: Readonly<Record<string, readonly number[]>> };
  log?: (line: string) => void;
}

export interface AgentResult {
  name: string;
  role: AgentRole;
  dir: string;
  /** Loss of every optimizer step, in order. */
  losses: number[];
  seconds: number;
  examples: number;
  skipped: number;
  params: number;
}

/** Defaults of the full run. */
export const DEFAULTS = { steps: 1000, seed: 7, batchSize: 4, gradAccum: 1, lr: 5e-3, warmup: 20, maxLength: 512, logEvery: 50 } as const;

const json = (x: unknown) => `${JSON.stringify(x, null, 2)}\n`;

/** The last sentence of a solver's answer. */
const verdict = (row: TaskRow) => `The answer is \\boxed{${row.answer_value}}.`;

/** Merges of the task tokenizer; the task corpus offers about 250, so this takes them all. */
export const TASK_MERGES = 400;

/**
 * The shared tokenizer: merges learned from every text of the train split plus the prompt set, with
 * numbers pre-tokenized in digit groups so that every number of the task becomes a single token.
 */
export function taskTokenizer(): TinyTokenizer {
  // the solver's working repeats the refined plan's equations, so its verdict line stands for it here
  const texts = taskSplit('train').flatMap((r) => [r.question, r.plan, r.refined_plan, verdict(r)]);
  const prompts = [TINY_PROMPT_FILE.system.chain, ...Object.values(TINY_PROMPT_FILE.templates)];
  // digits in groups (Llama 3's split), so each number of the task is one token once merged
  return buildTinyTokenizer({ merges: TASK_MERGES, corpus: [...prompts, ...texts].join('\n'), digitGroups: true });
}

/** Writes everything of an agent folder but the weights (with `tok`, default the task's); returns config.json's content. */
export async function writeAgentFiles(
  dir: string,
  spec: Omit<TinySpec, 'seed' | 'separateTemplate'>,
  tok: TinyTokenizer = taskTokenizer(),
): Promise<Record<string, unknown>> {
  const ids = specialIds(tok.tokenizerJson);
  const vocab = vocabSize(tok.tokenizerJson);
  // rope_theta 10000 for every family: with 16-dim heads and ~130-token chats, the families' long-context
  // bases (1e6, 5e5, and Llama 3's scaling) leave only a few rotary pairs that turn at all, and copying
  // a number from the prompt needs sharp relative positions
  const config = {
    ...buildConfig({ ...spec, seed: 0, separateTemplate: spec.family === 'llama' }, vocab, ids),
    rope_theta: 10000,
    rope_scaling: null,
  };
  const tokenizerConfig: Record<string, unknown> = { ...tok.tokenizerConfig };
  await mkdir(dir, { recursive: true });
  // Llama 3 folders keep the template in chat_template.jinja and name the generic fast class
  if (spec.family === 'llama') {
    delete tokenizerConfig.chat_template;
    tokenizerConfig.tokenizer_class = 'PreTrainedTokenizerFast';
    await writeFile(join(dir, 'chat_template.jinja'), tok.chatTemplate);
  }
  // greedy by default: these agents are evaluated and chained greedily
  const generation: Record<string, unknown> = { ...buildGenerationConfig(ids), do_sample: false };
  delete generation.temperature;
  delete generation.top_k;
  delete generation.top_p;
  await writeFile(join(dir, 'config.json'), json(config));
  await writeFile(join(dir, 'generation_config.json'), json(generation));
  await writeFile(join(dir, 'tokenizer.json'), json(tok.tokenizerJson));
  await writeFile(join(dir, 'tokenizer_config.json'), json(tokenizerConfig));
  return config;
}

/** What one training sequence of a role shows: prompt kind, the text in its slot, the target. */
function roleTurn(role: AgentRole, rows: readonly TaskRow[], index: number): { kind: PromptKind; slot: string; target: string } {
  const row = rows[index]!;
  // Half the planner's sequences are the feedback prompt of round ≥ 2, whose slot holds the solver's
  // answer of the round before: its own row's gold answer, or (one in two) another row's, which may be
  // as wrong as a tiny solver's. The plan follows from the question alone, so the planner learns to keep
  // it whatever the feedback says; text-MAS rounds then repeat the plan instead of drifting.
  if (role === 'planner') {
    if (index % 2 === 0) return { kind: 'first', slot: '', target: row.plan };
    const other = rows[(index * 7 + 13) % rows.length]!;
    return { kind: 'feedback', slot: (index % 4 === 1 ? row : other).answer, target: row.plan };
  }
  if (role === 'critic') return { kind: 'first', slot: row.plan, target: row.refined_plan };
  return { kind: 'first', slot: index % 4 === 3 ? '' : row.refined_plan, target: row.answer };
}

/** The rendered prompt of a role (generation prompt included) with `slot` as the text of its slot. */
export function rolePrompt(tok: Tokenizer, role: AgentRole, kind: PromptKind, question: string, slot: string): string {
  let user = userPrompt('chain', role, kind, { question, task: 'math', round: kind === 'first' ? 1 : 2 }, TINY_PROMPTS);
  for (const s of Object.values(SLOTS)) user = user.replace(s, () => slot);
  return renderChat(tok, TINY_PROMPTS.system.chain, user);
}

/** The role's training sequences (ids + target mask) over some rows, and how many were too long. */
export function roleExamples(tok: Tokenizer, role: AgentRole, rows: readonly TaskRow[], maxLength: number) {
  const examples: { ids: number[]; lossMask: number[] }[] = [];
  let skipped = 0;
  const enc = (text: string) => tok.encode(text, { addSpecialTokens: false });
  rows.forEach((row, i) => {
    const turn = roleTurn(role, rows, i);
    const prompt = enc(rolePrompt(tok, role, turn.kind, row.question, turn.slot));
    const target = enc(`${turn.target}<|im_end|>`);
    if (prompt.length + target.length > maxLength) {
      skipped++;
      return;
    }
    examples.push({ ids: [...prompt, ...target], lossMask: [...prompt.map(() => 0), ...target.map(() => 1)] });
  });
  return { examples, skipped };
}

/** Lines per arithmetic drill sequence: about as many tokens as a critic's training chat. */
export const DRILL_LINES = 10;

/**
 * Arithmetic drills: sequences of DRILL_LINES equations, each drawn uniformly from arithmeticFacts(), with
 * the loss on the result tokens only. Format 'plan' (the critic's): lines "Step k: a op b = c." (k = 1, 2, 3,
 * 1, …) in exactly the tokens of a refined plan's lines; 'answer' (the solver's): "a op b = c, d op e = f, …."
 * in the tokens of a solver's working. A refined plan holds 2–3 equations among ~110 tokens of chat, so an
 * agent meets each of the task's 470 facts a few times per epoch; a drill carries 10 of them for about the
 * same compute. They are plain text, no chat template, like pretraining data. A pure function of `seed`.
 */
export function drillExamples(
  tok: Tokenizer,
  count: number,
  seed: number,
  format: 'plan' | 'answer' = 'plan',
): { ids: number[]; lossMask: number[] }[] {
  const facts = arithmeticFacts();
  const rng = new Rng(seed);
  const enc = (text: string) => tok.encode(text, { addSpecialTokens: false });
  const examples: { ids: number[]; lossMask: number[] }[] = [];
  for (let e = 0; e < count; e++) {
    const ids: number[] = [];
    const lossMask: number[] = [];
    const lines: string[] = [];
    for (let j = 0; j < DRILL_LINES; j++) {
      const fact = facts[rng.int(facts.length)]!;
      const eq = fact.lastIndexOf(' = ');
      const last = j + 1 === DRILL_LINES;
      const head = format === 'plan' ? `Step ${(j % 3) + 1}: ` : j ? ' ' : '';
      const end = format === 'plan' ? (last ? '.' : '.\n') : last ? '.' : ',';
      const pieces: [string, number][] = [
        [`${head}${fact.slice(0, eq)} =`, 0],
        [` ${fact.slice(eq + 3)}`, 1],
        [end, 0],
      ];
      for (const [text, loss] of pieces) {
        const t = enc(text);
        ids.push(...t);
        lossMask.push(...t.map(() => loss));
      }
      lines.push(format === 'plan' ? `Step ${(j % 3) + 1}: ${fact}.` : fact);
    }
    // the pieces must tokenize as the whole text does, or the drills would teach other tokens
    const whole = format === 'plan' ? lines.join('\n') : `${lines.join(', ')}.`;
    const wholeIds = enc(whole);
    if (wholeIds.length !== ids.length || wholeIds.some((t, i) => t !== ids[i]))
      throw new Error(`drillExamples: piecewise tokens differ from the text's: ${JSON.stringify(whole)}`);
    examples.push({ ids, lossMask });
  }
  return examples;
}

/** Trains one agent and writes its folder. */
async function trainAgent(
  spec: AgentSpec,
  o: Required<Omit<TrainAgentsOptions, 'specs' | 'backend' | 'trainRows' | 'log' | 'stopAfter' | 'firstPhase'>> & {
    backend: Backend;
    rows: readonly TaskRow[];
    log: (s: string) => void;
    stopAfter: number | undefined;
    firstPhase: TrainAgentsOptions['firstPhase'];
  },
): Promise<AgentResult> {
  const dir = join(o.out, spec.role);
  const configJson = await writeAgentFiles(dir, spec);
  const config = parseDecoderConfig(json(configJson), join(dir, 'config.json'));
  const tok = await loadTokenizerFromDir(dir);
  const { examples: chats, skipped } = roleExamples(tok, spec.role, o.rows, o.maxLength);
  // each role draws its own init and data order from the run seed (independent of which specs run)
  const seed = o.seed * 1000 + ROLES.indexOf(spec.role);
  const examples = spec.drills ? [...chats, ...drillExamples(tok, spec.drills, seed + 500)] : chats;
  const { decoder, params } = createTrainableDecoder(config, o.backend, { seed });
  const losses: number[] = [];
  const t0 = performance.now();
  const stop = new AbortController();
  const phase = async (data: { ids: number[]; lossMask: number[] }[], steps: number, lr: number, phaseSeed: number) => {
    // a fresh optimizer: the AdamW moments live in the parameter buffers, so they are zeroed too
    params.resetOptimizerState();
    const optimizer = new AdamW([params], { weightDecay: 0.01 });
    optimizer.zeroGrad();
    await trainLoop(
      data.length,
      {
        maxSteps: steps,
        batchSize: o.batchSize,
        gradAccumSteps: o.gradAccum,
        lr,
        scheduler: 'cosine',
        warmupSteps: Math.min(o.warmup, Math.max(0, steps - 1)),
        seed: phaseSeed,
        shuffle: true,
        saveSteps: 0,
      },
      {
        optimizer,
        runBatch: async (indices, scale) => {
          let loss = 0;
          let tokens = 0;
          for (const i of indices) {
            const ex = data[i]!;
            loss += (await sequenceStep(decoder, ex, scale / indices.length)) / indices.length;
            tokens += ex.ids.length;
          }
          optimizer.gather();
          return { loss, tokens, valid: indices.length, skipped: {} };
        },
        signal: stop.signal,
        onStep: (e) => {
          losses.push(e.loss);
          if (o.stopAfter !== undefined && e.step >= o.stopAfter) stop.abort();
          if (o.logEvery > 0 && (e.step % o.logEvery === 0 || e.step === e.maxSteps)) {
            const recent = losses.slice(-o.logEvery);
            const mean = recent.reduce((a, b) => a + b, 0) / recent.length;
            o.log(
              `${spec.name} step ${e.step}/${e.maxSteps} loss ${mean.toFixed(4)} lr ${e.lr.toExponential(2)} ${e.elapsedSec.toFixed(1)}s`,
            );
          }
        },
      },
      initialState(data.length, { seed: phaseSeed, shuffle: true }),
    );
  };
  try {
    if (spec.finetune && o.firstPhase) {
      // the first phase's end state, saved by an earlier run with the same seed
      params.import(await loadF32Checkpoint(join(o.firstPhase.dir, spec.role, 'model.safetensors'), 'a second phase'));
      const recorded = o.firstPhase.losses[spec.role];
      if (!recorded || recorded.length !== o.steps)
        throw new InvalidArgument(`firstPhase: ${spec.role} needs the ${o.steps} recorded losses of its first phase`);
      losses.push(...recorded);
    } else {
      await phase(examples, o.steps, o.lr, seed);
    }
    if (spec.finetune && !stop.signal.aborted) {
      await phase([...chats, ...drillExamples(tok, spec.finetune.drills, seed + 600)], spec.finetune.steps, spec.finetune.lr, seed + 1);
    }
    await saveDecoderCheckpoint(dir, params, { dtype: 'f32' });
  } finally {
    params.dispose();
    decoder.dispose();
  }
  const seconds = (performance.now() - t0) / 1000;
  return {
    name: spec.name,
    role: spec.role,
    dir,
    losses,
    seconds,
    examples: examples.length,
    skipped,
    params: params.entries.reduce((s, e) => s + e.numel, 0),
  };
}

/**
 * The tensors of a training checkpoint this script wrote (f32), to continue from; `what` names the
 * continuation in the error a checkpoint of another dtype gets.
 */
export async function loadF32Checkpoint(file: string, what: string): Promise<Map<string, Float32Array>> {
  const st = await SafetensorsFile.open(fileSource(file));
  try {
    const values = new Map<string, Float32Array>();
    for (const name of st.names()) {
      const info = st.info(name);
      if (info.dtype !== 'F32')
        throw new InvalidArgument(`${file}: tensor ${name} is ${info.dtype}; ${what} continues f32 training checkpoints only`);
      values.set(name, decode('f32', (await st.read(name)).bytes, info.shape));
    }
    return values;
  } finally {
    await st.close();
  }
}

/** Forward + backward of one sequence's masked LM loss times `weight`; returns the unweighted loss. */
export async function sequenceStep(decoder: Decoder, ex: { ids: number[]; lossMask: number[] }, weight: number): Promise<number> {
  const tape = new Tape();
  try {
    const loss = tape.run(() => lmLoss(decoder, ex.ids, ex.lossMask));
    const value = (await loss.read())[0]!;
    const scaled = tape.run(() => F.scale(loss, weight));
    await tape.backward(scaled);
    return value;
  } finally {
    tape.dispose();
  }
}

/**
 * A trainLoop onStep for runs of several schedules into one loss record: each step's loss goes to
 * `losses`, `stop` aborts once `losses` holds `stopAfter` values, and every `every` steps (and at a
 * schedule's end) `log` gets `label(e)` with the mean of the last `every` losses.
 */
export function recordSteps(
  losses: number[],
  stop: AbortController,
  o: { stopAfter?: number; every: number; log: (s: string) => void; label: (e: StepEvent) => string },
) {
  return (e: StepEvent) => {
    losses.push(e.loss);
    if (o.stopAfter !== undefined && losses.length >= o.stopAfter) stop.abort();
    if (e.step % o.every === 0 || e.step === e.maxSteps) {
      const recent = losses.slice(-o.every);
      o.log(`${o.label(e)} loss ${(recent.reduce((a, b) => a + b, 0) / recent.length).toFixed(4)} ${e.elapsedSec.toFixed(0)}s`);
    }
  };
}

/** Trains every agent of `opts.specs` (default AGENT_SPECS) in turn; see the file comment. */
export async function trainTinyAgents(opts: TrainAgentsOptions): Promise<AgentResult[]> {
  const steps = opts.steps;
  if (steps !== undefined && (!Number.isInteger(steps) || steps < 1))
    throw new InvalidArgument(`steps must be a positive integer, got ${steps}`);
  const rows = taskSplit('train').slice(0, opts.trainRows ?? Infinity);
  const o = {
    out: resolve(opts.out), seed: opts.seed ?? DEFAULTS.seed, batchSize: opts.batchSize ?? DEFAULTS.batchSize,
    gradAccum: opts.gradAccum ?? DEFAULTS.gradAccum, lr: opts.lr ?? DEFAULTS.lr, warmup: opts.warmup ?? DEFAULTS.warmup,
    maxLength: opts.maxLength ?? DEFAULTS.maxLength, logEvery: opts.logEvery ?? DEFAULTS.logEvery, stopAfter: opts.stopAfter,
    backend: opts.backend ?? new CpuBackend('f32'), rows, log: opts.log ?? ((s: string) => process.stdout.write(`${s}\n`)),
    firstPhase: opts.firstPhase,
  };
  const results: AgentResult[] = [];
  const specs = opts.specs ?? AGENT_SPECS;
  for (const spec of specs) results.push(await trainAgent(spec, { ...o, steps: steps ?? spec.steps ?? DEFAULTS.steps }));
  return results;
}

/** Greedy accuracy of a trained solver folder on some rows, given each row's gold refined plan. */
export async function evalSolver(dir: string, rows: readonly TaskRow[], backend: Backend = new CpuBackend('f32'), maxNewTokens = 64) {
  const { loadDecoderFromDir } = await import('../../src/model/dir.ts');
  const decoder = await loadDecoderFromDir(dir, backend);
  const tok = await loadTokenizerFromDir(dir);
  const eos = [tok.idOf('<|im_end|>'), tok.idOf('<|endoftext|>')].filter((x): x is number => typeof x === 'number');
  let correct = 0;
  const outputs: string[] = [];
  try {
    for (const row of rows) {
      const prompt = tok.encode(rolePrompt(tok, 'solver', 'first', row.question, row.refined_plan), { addSpecialTokens: false });
      const r = await generate(decoder, { inputIds: prompt, maxNewTokens, sampling: { greedy: true }, eosTokenIds: eos });
      const text = tok.decode(r.tokens, { skipSpecialTokens: true });
      outputs.push(text);
      if (scoreAnswer(text, row)) correct++;
    }
  } finally {
    decoder.dispose();
  }
  return { correct, total: rows.length, outputs };
}
