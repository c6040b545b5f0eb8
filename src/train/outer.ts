/**
 * The outer loop's per-sample work (docs/method.md §6.2), for every style: the stages of R rounds run in the
 * style's order (styles.ts, the same schedule inference uses), each teacher-forced on its gold text:
 *   x = embed(piece_0) ⊕ L_0 ⊕ embed(piece_1) ⊕ … ⊕ embed(piece_k) ⊕ embed(target)
 * The latents a stage sends are Outer(Inner(H_target)) trimmed to the first `maxLatentTokens` rows,
 * where H_target are the last-layer states at its target (assistant) positions (or, with latents
 * 'rollout', the states of the stage's own latent rollout, as inference sends them); the inner links are
 * frozen but pass gradients. The final agent's stage of each round scores its gold answer with
 * cross-entropy (HF's shift: logits[t] predicts token t + 1, only answer tokens count). One tape holds
 * every round of a sample, so the loss reaches every outer link of every round. Stages with no latents
 * coming in (round 0's first agents) run without recording: nothing upstream of them trains.
 */
import { F, Tape, noGrad } from '../autograd';
import type { InnerLink, OuterLink } from '../mas/links';
import { latentRolloutSync } from '../mas/rollout';
import { readBackRollout } from './inner';
import { receiverOf, schedule, type StyleSpec } from '../mas/styles';
import type { Decoder } from '../model/decoder';
import { tidy } from '../tensor/scope';
import type { Tensor } from '../tensor/tensor';
import type { AgentForward } from './memory';

export interface OuterStage {
  /** k + 1 prompt pieces around the stage's k slots (the last ends with the assistant header). */
  pieces: readonly (readonly number[])[];
  /** The gold assistant tokens. */
  target: readonly number[];
}

/** One sample: the tokenised stage of each `${round}:${role}` (0-based rounds). */
export type OuterSample = ReadonlyMap<string, OuterStage>;
export const stageKey = (round: number, role: string) => `${round}:${role}`;

export interface OuterAgent {
  decoder: Decoder;
  inner: InnerLink;
}

export interface OuterLossOptions {
  rounds: number;
  /** Latents kept per hand-off (upstream --max_latent_tokens 80). */
  maxLatentTokens: number;
  /** Only the last round's cross-entropy (default upstream); else + nonLastLossWeight · mean(earlier). */
  superviseFinalOnly: boolean;
  nonLastLossWeight: number;
  /** Longest sequence a stage may feed its model (--max_length 4096); longer prompts are cut on the left. */
  maxLength: number;
  /**
   * What a non-final stage sends (--outer_latents): 'teacher' (default, upstream) the states of its gold
   * text, trimmed to maxLatentTokens; 'rollout' (ours) what it sends at inference, the states of its own
   * latent rollout of m = maxLatentTokens steps from the prompt and the latents it received (no grad), read
   * back with grad as prompt ⊕ Inner(H_roll[0..m−2]), whose states at the rollout positions are H_roll:
   * gradients reach the earlier outer links through this read, truncated at the recursion.
   */
  latents?: 'teacher' | 'rollout';
  /**
   * Recompute each layer's activations in backward (--gradient_checkpointing): same gradients, less
   * memory; true for every agent, or the roles listed (what `rmas plan-memory --gradient_checkpointing auto` picks).
   */
  recompute?: boolean | readonly string[];
}

export type OuterSampleResult =
  | { loss: number; ce: number[]; tokens: number }
  | { skip: 'sequence_too_long' | 'empty_span' | 'non_finite_loss' | 'missing_stage'; detail: string };

/**
 * Forward over every round and backward of `scale` · loss (scale = 1 / batch size): gradients accumulate
 * into the outer links' parameters. A sample that cannot be trained is skipped with its reason; its
 * gradients are not added.
 */
export async function outerSampleStep(
  style: StyleSpec, agents: ReadonlyMap<string, OuterAgent>, outer: ReadonlyMap<string, OuterLink>,
  sample: OuterSample, opts: OuterLossOptions, scale: number,
): Promise<OuterSampleResult> {
  const stages = schedule(style, opts.rounds);
  for (const st of stages) {
    const ex = sample.get(stageKey(st.round, st.role));
    if (!ex) return { skip: 'missing_stage', detail: `no tokenised stage for ${st.role} in round ${st.round + 1}` };
    if (ex.target.length === 0) return { skip: 'empty_span', detail: `${st.role} has an empty target in round ${st.round + 1}` };
  }
  const tape = new Tape();
  const latents = new Map<string, Tensor>();
  // a message moves to its receiver's backend when the roles live on different devices (gradients move back)
  const toReceiver = (key: string, L: Tensor): Tensor => {
    const to = agents.get(receiverOf(style, key))!.decoder.backend;
    return L.backend === to ? L : F.moveTo(L, to);
  };
  let tokens = 0;
  try {
    const run = tidy(() => tape.run((): Record<string, Tensor> | string => {
      const ces: Tensor[] = [];
      for (const st of stages) {
        const agent = agents.get(st.role)!;
        const model = agent.decoder;
        const be = model.backend;
        const ex = sample.get(stageKey(st.round, st.role))!;
        const incoming = st.fill.map(([, key]) => latents.get(key)!);
        const decodes = st.role === style.decoder;
        const recompute = opts.recompute === true || (Array.isArray(opts.recompute) && opts.recompute.includes(st.role));
        // with latents 'rollout', a stage that sends latents sends its rollout's; one that also decodes (the
        // final agent in an earlier round) still scores its gold text
        const rollout = opts.latents === 'rollout' && st.linksOut.length > 0;
        const teacher = !rollout || decodes;
        // left-truncate the first piece when the whole stage is too long (upstream: left truncation)
        const tail = Math.max(rollout ? opts.maxLatentTokens - 1 : 0, teacher ? ex.target.length : 0);
        const fixed = ex.pieces.slice(1).reduce((n, p) => n + p.length, 0) + incoming.reduce((n, l) => n + l.shape[0], 0) + tail;
        const first = ex.pieces[0];
        if (fixed > opts.maxLength)
          return `sequence_too_long:${st.role} round ${st.round + 1} needs ${fixed} positions beyond its prompt, over --max_length ${opts.maxLength}`;
        const cut = Math.max(0, first.length + fixed - opts.maxLength);
        const pieces = [first.slice(cut), ...ex.pieces.slice(1)];
        if (rollout && pieces.every((p) => !p.length) && !incoming.length) {
          return `sequence_too_long:${st.role} round ${st.round + 1} has no prompt left for its rollout under --max_length ${opts.maxLength}`;
        }
        const embed = (ids: readonly number[]) => noGrad(() => model.embed(be.fromValues(ids, [ids.length], 'i32')));
        const parts: Tensor[] = [];
        pieces.forEach((p, i) => {
          if (p.length) parts.push(embed(p));
          if (i < incoming.length) parts.push(incoming[i]);
        });
        if (rollout) {
          const m = opts.maxLatentTokens;
          const Hroll = noGrad(() => latentRolloutSync(model, agent.inner, parts, m, `${st.role} rollout, round ${st.round + 1}`));
          let H = Hroll;
          if (incoming.length) {
            // read back with grad, so that the incoming latents' links train through this stage
            const prompt = F.concatRows(parts);
            H = readBackRollout(model, agent.inner, prompt, Hroll, { output: 'hidden', recompute });
            tokens += prompt.shape[0] + m - 1;
          }
          const h = agent.inner.forward(H);
          for (const key of st.linksOut) latents.set(key, toReceiver(key, outer.get(key)!.forward(h)));
          if (!teacher) continue;
        }
        parts.push(embed(ex.target));
        const T = parts.reduce((n, p) => n + p.shape[0], 0);
        tokens += T;
        const L = ex.target.length;
        const logitRows = decodes ? Array.from({ length: L }, (_, i) => T - L - 1 + i) : false;
        const forward = () => model.forward({ inputsEmbeds: F.concatRows(parts), logits: logitRows, recompute });
        const out = incoming.length ? forward() : noGrad(forward);
        if (decodes) ces.push(F.crossEntropy(out.logits!, be.fromValues(ex.target, [L], 'i32')));
        if (!rollout && st.linksOut.length) {
          const h = agent.inner.forward(F.sliceRows(out.hidden, T - L, L));
          const keep = Math.min(opts.maxLatentTokens, L);
          for (const key of st.linksOut) latents.set(key, toReceiver(key, F.sliceRows(outer.get(key)!.forward(h), 0, keep)));
        }
      }
      const last = ces[ces.length - 1];
      let loss = last;
      if (!opts.superviseFinalOnly && ces.length > 1) {
        const earlier = ces.slice(0, -1).reduce((a, b) => F.add(a, b));
        loss = F.add(last, F.scale(earlier, opts.nonLastLossWeight / (ces.length - 1)));
      }
      const res: Record<string, Tensor> = { loss: F.scale(loss, scale) };
      ces.forEach((c, i) => (res[`ce${i}`] = c));
      return res;
    }));
    if (typeof run === 'string') {
      const [reason, detail] = [run.slice(0, run.indexOf(':')), run.slice(run.indexOf(':') + 1)];
      return { skip: reason as 'sequence_too_long', detail };
    }
    const values = await Promise.all(Object.keys(run).sort().map(async (k) => [k, (await run[k].read())[0]] as const));
    const loss = values.find(([k]) => k === 'loss')![1] / scale;
    const ce = values.filter(([k]) => k.startsWith('ce')).sort((a, b) => Number(a[0].slice(2)) - Number(b[0].slice(2))).map(([, v]) => v);
    if (!Number.isFinite(loss)) return { skip: 'non_finite_loss', detail: `loss ${loss}` };
    await tape.backward(run.loss);
    return { loss, ce, tokens };
  } finally {
    tape.dispose();
  }
}

/**
 * The forwards of one outer step as src/train/memory.ts plans them, at the largest size any sample reaches
 * per stage: positions = prompt pieces + the latents received (maxLatentTokens per slot, the most a hand-off
 * carries) + the gold target (or, for a stage that rolls out, the m - 1 read-back positions when that is
 * longer), capped by maxLength; recorded when latents come in (outer.ts runs the others without grad); the
 * style's decoder scores its longest target. `weightBytesPerParam` gives each role's bytes per weight.
 */
export function outerStepForwards(
  style: StyleSpec, samples: readonly OuterSample[], opts: OuterLossOptions,
  agents: ReadonlyMap<string, OuterAgent>, weightBytesPerParam: (role: string) => number,
): AgentForward[] {
  const m = opts.maxLatentTokens;
  return schedule(style, opts.rounds).map((st) => {
    const rollout = opts.latents === 'rollout' && st.linksOut.length > 0;
    const decodes = st.role === style.decoder;
    let tokens = 1;
    let rows = 0;
    for (const s of samples) {
      const ex = s.get(stageKey(st.round, st.role));
      if (!ex) continue;
      const prompt = ex.pieces.reduce((n, p) => n + p.length, 0) + st.fill.length * m;
      const tail = Math.max(rollout ? m - 1 : 0, !rollout || decodes ? ex.target.length : 0);
      tokens = Math.max(tokens, Math.min(opts.maxLength, prompt + tail));
      if (decodes) rows = Math.max(rows, Math.min(ex.target.length, tokens));
    }
    return {
      name: st.role,
      config: agents.get(st.role)!.decoder.config,
      weightBytesPerParam: weightBytesPerParam(st.role),
      tokens,
      recorded: st.fill.length > 0,
      logitRows: rows,
    };
  });
}
