/**
 * Several questions through one system at once (upstream's --batch_size): each question runs ask()'s own flow, and
 * the flows meet at their heavy steps. When every unfinished question waits on one (a latent rollout or a generation),
 * the waiting calls of the same agent run together: latentRolloutBatch and generateBatch, whose rows give what each
 * call gives alone. So a batch answers exactly as the questions would one at a time (greedy: token for token;
 * sampled: the same draws), and only the heavy steps are shared: prompts, stage records, tools and retries stay each
 * question's own.
 *
 * Batched steps run on the fused path (Decoder.fusedSteps, WebGPU); elsewhere the questions run one after another.
 */
import { Tensor } from '../tensor/tensor';
import { type BatchPrompt, type GenerateOptions, type GenerateResult, generateBatch } from '../model/generate';
import type { Decoder } from '../model/decoder';
import { InvalidArgument } from '../errors';
import type { InnerLink } from './links';
import { type Piece, latentRolloutBatch } from './rollout';
import { type AskEngine, type AskOptions, type AskResult, ask } from './ask';
import type { MasSystem } from './system';

type Waiting =
  | { kind: 'rollout'; model: Decoder; inner: InnerLink; m: number; pieces: readonly Piece[]; signal?: AbortSignal; done: Settle<Tensor> }
  | { kind: 'generate'; model: Decoder; opts: GenerateOptions; done: Settle<GenerateResult> };

interface Settle<T> {
  resolve(v: T): void;
  reject(e: unknown): void;
}

/** The meeting point: holds each question's heavy call until every unfinished question has made one. */
class Lockstep implements AskEngine {
  private waiting: Waiting[] = [];

  constructor(private running: number) {}

  rollout: AskEngine['rollout'] = (agent, pieces, m, opts) =>
    new Promise<Tensor>((resolve, reject) =>
      this.add({ kind: 'rollout', model: agent.decoder, inner: agent.inner!, m, pieces, signal: opts.signal, done: { resolve, reject } }),
    );

  generate: AskEngine['generate'] = (model, opts) =>
    new Promise<GenerateResult>((resolve, reject) => this.add({ kind: 'generate', model, opts, done: { resolve, reject } }));

  /** A question's flow ended (answered or failed): the others no longer wait for it. */
  finished() {
    this.running--;
    this.release();
  }

  private add(w: Waiting) {
    this.waiting.push(w);
    this.release();
  }

  private release() {
    if (!this.waiting.length || this.waiting.length < this.running) return;
    const now = this.waiting;
    this.waiting = [];
    void this.run(now);
  }

  /** Runs the calls, those of one agent (and rollout length) together, in the order they came. */
  private async run(calls: Waiting[]) {
    const groups = new Map<string, Waiting[]>();
    const ids = new Map<object, number>();
    const id = (o: object) => ids.get(o) ?? (ids.set(o, ids.size), ids.size - 1);
    for (const w of calls) {
      const key = w.kind === 'rollout' ? `r${id(w.model)}:${id(w.inner)}:${w.m}` : `g${id(w.model)}`;
      groups.set(key, [...(groups.get(key) ?? []), w]);
    }
    for (const group of groups.values()) {
      try {
        if (group[0].kind === 'rollout') {
          const g = group as Extract<Waiting, { kind: 'rollout' }>[];
          const Hs = await latentRolloutBatch(
            g[0].model,
            g[0].inner,
            g.map((w) => w.pieces),
            g[0].m,
            { signal: g[0].signal, what: `${g.length} latent rollouts` },
          );
          g.forEach((w, i) => w.done.resolve(Hs[i]));
        } else {
          const g = group as Extract<Waiting, { kind: 'generate' }>[];
          const r = await generateBatch(g[0].model, { prompts: g.map((w) => batchPrompt(w.opts)), signal: g[0].opts.signal });
          g.forEach((w, i) =>
            w.done.resolve({
              tokens: r.rows[i].tokens,
              stoppedBy: r.rows[i].stoppedBy,
              prefillMs: r.prefillMs,
              decodeMs: r.decodeMs,
              prefillTokensPerSec: 0,
              decodeTokensPerSec: r.decodeTokensPerSec,
              decodeCounters: null,
            }),
          );
        }
      } catch (e) {
        group.forEach((w) => w.done.reject(e));
      }
    }
  }
}

function batchPrompt(o: GenerateOptions): BatchPrompt {
  if (o.inputIds instanceof Tensor) throw new InvalidArgument('askBatch: a generation from token ids held in a tensor cannot join a batch');
  const pieces = o.inputsEmbeds instanceof Tensor ? [o.inputsEmbeds] : o.inputsEmbeds;
  return {
    ...(o.inputIds !== undefined ? { inputIds: o.inputIds } : { inputsEmbeds: pieces ?? [] }),
    maxNewTokens: o.maxNewTokens, sampling: o.sampling ?? { greedy: true }, eosTokenIds: o.eosTokenIds ?? [],
    ...(o.onToken ? { onToken: o.onToken } : {}), ...(o.stop ? { stop: o.stop } : {}),
  };
}

/** Whether a system's agents can take batched steps (every decoder on the fused path). */
export const canBatch = (system: MasSystem): boolean => [...system.agents.values()].every((a) => a.decoder.fusedSteps);

/**
 * The questions' AskResults, in order, as ask() gives each alone. A question that fails rejects the whole call once
 * the others have finished (their tensors are released either way).
 */
export async function askBatch(system: MasSystem, questions: readonly AskOptions[]): Promise<AskResult[]> {
  if (questions.length <= 1 || !canBatch(system)) {
    const out: AskResult[] = [];
    for (const q of questions) out.push(await ask(system, q));
    return out;
  }
  const lock = new Lockstep(questions.length);
  const settled = await Promise.allSettled(questions.map(async (q) => {
    try {
      return await ask(system, q, lock);
    } finally {
      lock.finished();
    }
  }));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<AskResult>).value);
}
