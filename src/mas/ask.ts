/**
 * One question through a RecursiveMAS system: the rounds of the style's schedule (styles.ts), each stage
 * rendering its role prompt, filling its slots and then either rolling out latents (sent on through its
 * outer links) or, for the final agent in the last round, decoding the answer; then the answer-retry
 * stage (docs/method.md §7.3). `mode: 'text'` is the Recursive-TextMAS baseline: the same agents and prompts, each
 * slot filled with the text the previous agent wrote.
 *
 * Latents stay on the backend; nothing is read back except sampled token ids and, when a caller asks for
 * stage records (the dump), the tensors it reads itself.
 */
import { ContextTooLong, InvalidArgument } from '../errors';
import { type GenerateResult, generate, isGreedy, type SamplingOptions } from '../model/generate';
import type { GpuCounters } from '../gpu/counters';
import type { Tensor } from '../tensor/tensor';
import { renderChat, renderWithSlots, splitAtSlots } from '../tokenizer';
import { ablateMessage, type MessageAblation, messageKey, recordMessage, type RecordedMessages, removesStage } from './ablation';
import { hasFinalAnswer, lastBoxed, retryMaxTokens, retrySuffix, stripThink } from './answer';
import { DEFAULT_PROMPTS, detectTask, systemPrompt, userPrompt, type PromptSet, type TaskKind } from './prompts';
import { decode, decodeWithTools, type GenerateFn, samplingFor, skip } from './decode';
import { type RolloutOptions, checkCancelled, deliver, latentRollout, linkMessage, type Piece } from './rollout';
import { ALL_SLOTS } from './slots';
import { DEFAULT_ROUNDS, defaultLatentSteps, receiverOf, schedule } from './styles';
import type { Agent, MasSystem } from './system';
import type { ToolRunners } from './tools';

export interface AskOptions {
  question: string;
  /** Default: detectTask(question) ('choice' for lettered options, else 'math'). */
  task?: TaskKind;
  /** Code tasks: the function to implement (interface line), else a stdin/stdout program. */
  fnName?: string;
  /** Default 3, as upstream's run.py. */
  rounds?: number;
  /** m, the latent steps of every rollout. Default 32. */
  latentSteps?: number;
  mode?: 'latent' | 'text';
  /**
   * Sampling of every decode. topK, when absent, comes from the decoding agent's generation_config.json
   * (50 when it has none, as transformers).
   */
  sampling: SamplingOptions;
  maxNewTokens: number;
  /** Text mode: budget of each non-final agent's text. Default maxNewTokens. */
  stageMaxNewTokens?: number;
  prompts?: PromptSet;
  /** The answer-retry stage (upstream's --ans, always on there). Default true. */
  answerRetry?: boolean;
  /** Deliberation's tools; without them the tool-caller's calls get "tools disabled" results. */
  tools?: ToolRunners;
  maxToolCalls?: number;
  signal?: AbortSignal;
  /** Called after each stage with its inputs and outputs, before its tensors are released. */
  onStage?: (record: StageRecord) => void | Promise<void>;
  /** Streaming of the text the final agent writes (the first rollout's). */
  onToken?: (role: string, id: number) => void;
  /**
   * The same stream as text: the first rollout's whole answer so far (its final decode, then the answer retry's
   * prompt and continuation), each call replacing the previous one, never a piece to append. The last call's
   * text is AskResult.text once the stream completes it (an incomplete UTF-8 tail is held back meanwhile).
   */
  onText?: (role: string, text: string) => void;
  /**
   * Final decodes from the same final prompt and latents (upstream's --num_rollouts, for pass@k): rollout r
   * samples with seed + r and gets its own answer retry. Default 1.
   */
  rollouts?: number;
  /** Latent mode: send zeros or another run's recorded messages in place of the messages, or remove some (ablation.ts). */
  ablation?: MessageAblation;
  /** Latent mode: copy every message the run computes to the host, into AskResult.messages (before any ablation). */
  recordMessages?: boolean;
  /**
   * The final agent alone, the baseline without collaboration: round 1's decoding stage only, its prompt's slots left
   * empty (text mode, one round; `mode` and `rounds` are ignored). `npm run tiny:eval`'s "learner alone".
   */
  alone?: boolean;
}

/** One final decode of a question, its answer retry included. */
export interface RolloutResult {
  answer: string;
  text: string;
  /** Tokens of this decode and its retry. */
  tokens: number;
  retried: boolean;
}

export interface StageRecord {
  index: number;
  /** 0-based. */
  round: number;
  role: string;
  model: string;
  /** Slot strings in prompt order. */
  slots: string[];
  /** Outer links applied to this stage's rollout. */
  linksOut: string[];
  /** Token ids of the k + 1 pieces around the k slots (text mode: one piece, the slots already filled). */
  ids: number[][];
  /** Latent mode: what went into each slot, [m_i, d]. */
  latentsIn: Tensor[];
  /** Text mode: what went into each slot. */
  textsIn: string[];
  /** The post-norm hidden states the rollout collected, [m, d]. */
  hidden: Tensor | null;
  latentsOut: ReadonlyMap<string, Tensor>;
  generatedIds: number[] | null;
  text: string | null;
  seconds: number;
}

export interface AskResult {
  /** \boxed{} content, or the code block for code tasks, or the whole text when neither is there. */
  answer: string;
  text: string;
  /** Generated text tokens, every agent and the retry included (latent steps not counted). */
  tokens: number;
  /** Latent steps run (m per rollout). */
  latentSteps: number;
  seconds: number;
  rounds: number;
  mode: 'latent' | 'text';
  task: TaskKind;
  retried: boolean;
  toolCalls: { tool: string; body: string; result: string }[];
  stages: { round: number; role: string; seconds: number; tokens: number }[];
  /** Seconds in the answer retries (every rollout's), part of `seconds`. */
  retrySeconds: number;
  /** generate()'s figures for the final agent's decode (absent with tools, whose decode is several calls). */
  prefillTokensPerSec?: number;
  decodeTokensPerSec?: number;
  /**
   * What the backends counted (WebGPU; absent elsewhere): the latent steps after each rollout's first, summed over
   * every rollout, and the final agent's decode steps after its first (generate()'s decodeCounters).
   */
  counters?: { latent: (GpuCounters & { steps: number }) | null; decode: (GpuCounters & { steps: number }) | null };
  /** Every rollout of the final decode, the first one being answer/text/retried above. */
  rollouts: RolloutResult[];
  /** The messages the links computed (AskOptions.recordMessages). */
  messages?: RecordedMessages;
}

/** The final answer as scoring reads it (eval/ does the full normalisation). */
export function extractAnswer(text: string, task: TaskKind): string {
  const t = stripThink(text);
  if (task === 'code') {
    const m = /```python[^\n]*\n([\s\S]*?)(```|$)/.exec(t);
    if (m) return m[1].trim();
  }
  return lastBoxed(t) ?? t.trim();
}

/**
 * Where ask() sends its heavy steps: a latent rollout and a generation. One question alone uses latentRollout and
 * generate; askBatch (batch.ts) gathers the same calls of several questions and runs them together.
 */
export interface AskEngine {
  rollout(agent: Agent, pieces: readonly Piece[], m: number, opts: RolloutOptions): Promise<Tensor>;
  generate: GenerateFn;
}

export const SINGLE_ENGINE: AskEngine = {
  rollout: (agent, pieces, m, opts) => latentRollout(agent.decoder, agent.inner!, pieces, m, opts),
  generate,
};

export async function ask(system: MasSystem, opts: AskOptions, engine: AskEngine = SINGLE_ENGINE): Promise<AskResult> {
  const { style, agents } = system;
  const mode = opts.alone ? 'text' : (opts.mode ?? 'latent');
  const rounds = opts.alone ? 1 : (opts.rounds ?? DEFAULT_ROUNDS);
  const m = opts.latentSteps ?? defaultLatentSteps(style);
  const task = opts.task ?? detectTask(opts.question);
  const prompts = opts.prompts ?? system.prompts ?? DEFAULT_PROMPTS;
  const signal = opts.signal;
  if (!Number.isInteger(rounds) || rounds < 1) throw new InvalidArgument(`rounds must be a positive integer, got ${rounds}`);
  if (mode === 'latent' && (!Number.isInteger(m) || m < 1)) throw new InvalidArgument(`latent steps must be a positive integer, got ${m}`);
  if (!opts.question.trim()) throw new InvalidArgument('the question is empty');
  const nRollouts = opts.rollouts ?? 1;
  if (!Number.isInteger(nRollouts) || nRollouts < 1) throw new InvalidArgument(`rollouts must be a positive integer, got ${nRollouts}`);
  if (mode === 'text' && (opts.ablation || opts.recordMessages))
    throw new InvalidArgument('message ablations and recording apply to latent messages; text mode sends none');
  if (mode === 'latent') {
    for (const a of agents.values()) {
      if (!a.inner) throw new InvalidArgument(`role ${a.role} has no inner link loaded; load the system with links for latent mode`);
    }
  }
  checkQuestionFits(system, opts.question);
  const system0 = systemPrompt(style.shape, prompts);
  const vars = (round: number) => ({
    question: opts.question,
    task,
    round: round + 1,
    ...(opts.fnName ? { fnName: opts.fnName, codeType: 'function' as const } : {}),
  });

  const latents = new Map<string, Tensor>();
  const texts = new Map<string, string>();
  const result: AskResult = {
    answer: '',
    text: '',
    tokens: 0,
    latentSteps: 0,
    seconds: 0,
    rounds,
    mode,
    task,
    retried: false,
    toolCalls: [],
    stages: [],
    retrySeconds: 0,
    rollouts: [],
    ...(opts.recordMessages ? { messages: { question: opts.question, messages: new Map() } } : {}),
  };
  const finals: { ids: number[]; text: string }[] = [];
  const stream = answerStream(opts, (role) => agents.get(role)!.tokenizer);
  opts = { ...opts, onToken: stream.onToken };
  const t0 = performance.now();
  try {
    const stages = opts.alone ? schedule(style, 1).filter((st) => st.decode) : schedule(style, rounds);
    for (const [index, st] of stages.entries()) {
      checkCancelled(signal, `${st.role}, round ${st.round + 1}`);
      const agent = agents.get(st.role)!;
      const tok = agent.tokenizer;
      const where = `the ${style.name} ${st.role} prompt (${st.kind}, round ${st.round + 1})`;
      // a stage whose every message is removed runs as its role does in the first round (ablation.ts)
      const removed = removesStage(st.fill.map(([, key]) => key), opts.ablation, where);
      if (removed && st.round === 0)
        throw new InvalidArgument(`message ablation: ${where} reads only removed links, and there is no earlier prompt to run instead`);
      const { kind, fill } = removed ? schedule(style, 1).find((s) => s.role === st.role)! : st;
      const user = userPrompt(style.shape, st.role, kind, vars(st.round), prompts);
      const expected = fill.map(([slot]) => slot);
      const ts = performance.now();
      const rec: StageRecord = {
        index, round: st.round, role: st.role, model: agent.source, slots: expected, linksOut: [...st.linksOut],
        ids: [], latentsIn: [], textsIn: [], hidden: null, latentsOut: new Map(), generatedIds: null, text: null, seconds: 0,
      };
      const outs = rec.latentsOut as Map<string, Tensor>;
      let pieces: Piece[];
      if (mode === 'latent') {
        const r = renderWithSlots(tok, system0, user, ALL_SLOTS, expected, where);
        rec.ids = r.ids;
        rec.latentsIn = fill.map(([, key]) => latents.get(key)!);
        pieces = r.ids.flatMap((ids, i) => (i < rec.latentsIn.length ? [ids, rec.latentsIn[i]] : [ids]));
      } else {
        // the baseline fills each slot with text before rendering, so the template sees the whole message
        const { pieces: parts } = splitAtSlots(user, ALL_SLOTS, expected, where);
        rec.textsIn = fill.map(([, key]) => texts.get(key) ?? ''); // empty: an agent alone
        const filled = parts.map((p, i) => p + (rec.textsIn[i] ?? '')).join('');
        rec.ids = [tok.encode(renderChat(tok, system0, filled), { addSpecialTokens: false })];
        pieces = [rec.ids[0]];
      }
      // before the stage's forward pass: its prompt (and a rollout's latent steps) within the agent's context
      checkStageFits(agent, rec.ids.flat().length, rec.latentsIn.reduce((n, L) => n + L.shape[0], 0),
        st.decode || mode === 'text' ? 0 : m, where);

      let H: Tensor | null = null;
      try {
        if (st.decode || mode === 'text') {
          const final = st.decode;
          const budget = final ? opts.maxNewTokens : opts.stageMaxNewTokens ?? opts.maxNewTokens;
          const out: {
            ids: number[];
            text: string;
            prefillTokensPerSec?: number;
            decodeTokensPerSec?: number;
            decodeCounters?: GenerateResult['decodeCounters'];
          } =
            final && style.tools
              ? await decodeWithTools(agent, pieces, budget, opts, result, engine.generate)
              : await decode(agent, pieces, budget, opts, final, undefined, engine.generate);
          if (final) {
            finals.push(out);
            for (let r = 1; r < nRollouts; r++) {
              const again = { ...opts, sampling: reseed(opts.sampling, r) };
              finals.push(style.tools ? await decodeWithTools(agent, pieces, budget, again, { toolCalls: [] }, engine.generate)
                : await decode(agent, pieces, budget, again, false, undefined, engine.generate));
            }
          }
          rec.generatedIds = out.ids;
          rec.text = out.text;
          result.tokens += out.ids.length;
          for (const key of st.linksOut) texts.set(key, out.text);
          if (final) {
            result.text = out.text;
            if (out.prefillTokensPerSec !== undefined) {
              result.prefillTokensPerSec = out.prefillTokensPerSec;
              result.decodeTokensPerSec = out.decodeTokensPerSec;
            }
            if (out.decodeCounters) (result.counters ??= { latent: null, decode: null }).decode = out.decodeCounters;
          }
        } else {
          H = await engine.rollout(agent, pieces, m, {
            signal, what: `${st.role} rollout, round ${st.round + 1}`,
            onCounted: (c, steps) => {
              const counted = (result.counters ??= { latent: null, decode: null });
              counted.latent = addCounters(counted.latent, c, steps);
            },
          });
          result.latentSteps += m;
          for (const key of st.linksOut) {
            // made on the sender's backend, read on the receiver's (roles placed on different devices)
            const to = agents.get(receiverOf(style, key))!.decoder.backend;
            const L = deliver(linkMessage(agent.inner!, system.outer.get(key)!, H), to);
            outs.set(key, L);
            if (result.messages) result.messages.messages.set(messageKey(st.round, key), await recordMessage(L));
            if (opts.ablation) outs.set(key, ablateMessage(L, st.round, key, opts.ablation));
          }
          rec.hidden = H;
        }
        rec.seconds = (performance.now() - ts) / 1000;
        await opts.onStage?.(rec);
      } finally {
        H?.dispose();
        // a message replaces the previous round's one only after the stage that read it is done
        for (const [key, L] of outs) {
          const old = latents.get(key);
          if (old && old !== L) old.dispose();
          latents.set(key, L);
        }
      }
      result.stages.push({ round: st.round, role: st.role, seconds: rec.seconds, tokens: rec.generatedIds?.length ?? 0 });
    }

    const decoder = agents.get(style.decoder)!;
    for (const [r, f] of finals.entries()) {
      const o: RolloutResult = { answer: '', text: f.text, tokens: f.ids.length, retried: false };
      if ((opts.answerRetry ?? true) && !hasFinalAnswer(o.text, task)) {
        checkCancelled(signal, 'the answer retry');
        const tr = performance.now();
        // upstream feeds the output as a raw prompt, without chat template, and appends what it generates
        const raw = o.text + retrySuffix(task);
        if (r === 0) stream.restart(raw);
        const g = await engine.generate(decoder.decoder, {
          inputIds: decoder.tokenizer.encode(raw),
          maxNewTokens: retryMaxTokens(task),
          sampling: samplingFor(decoder, reseed(opts.sampling, r)),
          eosTokenIds: decoder.generation.eosTokenIds,
          signal,
          ...(r === 0 ? { onToken: (id: number) => opts.onToken?.(decoder.role, id) } : {}),
        });
        checkCancelled(signal, 'the answer retry');
        result.retrySeconds += (performance.now() - tr) / 1000;
        o.text = raw + skip(decoder.tokenizer, g.tokens);
        o.tokens += g.tokens.length;
        o.retried = true;
        if (r === 0) result.tokens += g.tokens.length;
      }
      o.answer = extractAnswer(o.text, task);
      result.rollouts.push(o);
    }
    const first = result.rollouts[0]!;
    result.text = first.text;
    result.retried = first.retried;
    result.answer = first.answer;
    result.seconds = (performance.now() - t0) / 1000;
    return result;
  } finally {
    for (const L of latents.values()) L.dispose();
  }
}

/**
 * Refuses a question longer than some agent's context (max_position_embeddings) before any forward pass: every
 * stage's prompt holds it, so none could run.
 */
function checkQuestionFits(system: MasSystem, question: string): void {
  const counted = new Map<Agent['tokenizer'], number>();
  for (const a of system.agents.values()) {
    const n = counted.get(a.tokenizer) ?? a.tokenizer.encode(question, { addSpecialTokens: false }).length;
    counted.set(a.tokenizer, n);
    const context = a.decoder.config.maxPositions;
    if (n > context) {
      throw new ContextTooLong(`the question is ${n} tokens, longer than the context of the ${a.role} model ` +
        `(max_position_embeddings ${context}); shorten the question (nothing was run)`);
    }
  }
}

/** Refuses a stage whose prompt, latents in and latent steps (the last one is not fed) do not fit its agent's context. */
function checkStageFits(agent: Agent, tokens: number, latentRows: number, m: number, where: string): void {
  const context = agent.decoder.config.maxPositions;
  const positions = tokens + latentRows + Math.max(0, m - 1);
  if (positions <= context) return;
  throw new ContextTooLong(`${where}: ${tokens} prompt tokens${latentRows ? `, ${latentRows} latent rows` : ''}` +
    `${m ? ` and ${m} latent steps` : ''} need ${positions} positions, more than the ${agent.role} model's context of ` +
    `${context} (max_position_embeddings); shorten the question${m ? ' or lower the latent steps' : ''}`);
}

/**
 * One token stream for onToken and onText: the text is `prefix` (the retry's prompt, once it starts) followed by
 * the stream's tokens decoded, and is passed on only when it changed.
 */
function answerStream(opts: AskOptions, tokenizerOf: (role: string) => Agent['tokenizer']) {
  let ids: number[] = [];
  let prefix = '';
  let last = '';
  return {
    restart(p: string) {
      ids = [];
      prefix = p;
    },
    onToken(role: string, id: number) {
      opts.onToken?.(role, id);
      if (!opts.onText) return;
      ids.push(id);
      const text = prefix + tokenizerOf(role).decodeStreaming(ids);
      if (text !== last) opts.onText(role, (last = text));
    },
  };
}

/** Rollout r's sampling: seed + r (upstream's set_rollout_seed(sample_seed + r)); greedy stays greedy. */
function reseed(s: SamplingOptions, r: number): SamplingOptions {
  return r === 0 || isGreedy(s) ? s : { ...s, seed: (s.seed ?? 0) + r };
}

/** `sum` with `steps` more steps of work `c` added (null: none counted yet). */
function addCounters(sum: (GpuCounters & { steps: number }) | null, c: GpuCounters, steps: number): GpuCounters & { steps: number } {
  if (!sum) return { ...c, steps };
  return {
    dispatches: sum.dispatches + c.dispatches, submits: sum.submits + c.submits, readbacks: sum.readbacks + c.readbacks,
    weightBytes: sum.weightBytes + c.weightBytes, activationBytes: sum.activationBytes + c.activationBytes,
    workgroups: sum.workgroups + c.workgroups, invocations: sum.invocations + c.invocations, steps: sum.steps + steps,
  };
}
