/**
 * The final agent's text decode: plain (one generate call) or, for the deliberation tool-caller, a loop that runs
 * each tool call it writes and decodes on (docs/method.md §7.6). ask (ask.ts) drives both.
 */
import { generate, isGreedy, type SamplingOptions } from '../model/generate';
import { checkCancelled, embedPieces, type Piece } from './rollout';
import type { AskOptions, AskResult } from './ask';
import type { Agent } from './system';
import { endsToolCall, toolLoop, type ToolRunners } from './tools';

/** Token ids as text, special tokens dropped. */
export const skip = (tok: Agent['tokenizer'], ids: readonly number[]) => tok.decode(ids, { skipSpecialTokens: true });

/** The sampling of a stage: a repo that samples gets its top-k (else 50) unless the caller set one; greedy stays greedy. */
export function samplingFor(agent: Agent, s: SamplingOptions): SamplingOptions {
  if (isGreedy(s)) return s;
  const fromRepo = agent.generation.sampling.greedy ? undefined : agent.generation.sampling.topK;
  return { ...s, topK: s.topK ?? fromRepo ?? 50 };
}

export type GenerateFn = typeof generate;

/** The final agent's decode from its prompt pieces (latents included), disposing what it embedded. */
export async function decode(
  agent: Agent,
  pieces: Piece[],
  maxNewTokens: number,
  opts: AskOptions,
  stream: boolean,
  stop?: (t: readonly number[]) => boolean,
  gen: GenerateFn = generate,
) {
  const embeds = embedPieces(agent.decoder, pieces);
  try {
    const r = await gen(agent.decoder, {
      inputsEmbeds: embeds,
      maxNewTokens,
      sampling: samplingFor(agent, opts.sampling),
      eosTokenIds: agent.generation.eosTokenIds,
      signal: opts.signal,
      ...(stream ? { onToken: (id: number) => opts.onToken?.(agent.role, id) } : {}),
      ...(stop ? { stop } : {}),
    });
    checkCancelled(opts.signal, `${agent.role} decoding`);
    return {
      ids: r.tokens,
      text: skip(agent.tokenizer, r.tokens),
      stoppedBy: r.stoppedBy,
      prefillTokensPerSec: r.prefillTokensPerSec,
      decodeTokensPerSec: r.decodeTokensPerSec,
      decodeCounters: r.decodeCounters,
    };
  } finally {
    for (const e of embeds) if (!pieces.includes(e)) e.dispose(); // ids became new tensors; latents stay
  }
}

/** What the tool-caller's calls get in a run given no tools (AskOptions.tools). */
export const DISABLED_TOOLS: ToolRunners = {
  python: async () => '[python tool disabled] No Python runner was given to this run.',
  search: async () => '[search disabled] No web-search API key was given; web search is off.',
};

/**
 * The tool-caller's final decode (docs/method.md §7.6): each continuation re-reads prompt + the text so far (no cache
 * reuse), and a decode stops once its last 16 tokens hold a closing tool tag. `gen` is injectable for tests.
 */
export async function decodeWithTools(
  agent: Agent,
  pieces: Piece[],
  maxNewTokens: number,
  opts: AskOptions,
  result: Pick<AskResult, 'toolCalls'>,
  gen: GenerateFn = generate,
) {
  const tok = agent.tokenizer;
  const ids: number[] = [];
  const r = await toolLoop({
    runners: opts.tools ?? DISABLED_TOOLS,
    maxNewTokens,
    ...(opts.maxToolCalls !== undefined ? { maxToolCalls: opts.maxToolCalls } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
    generate: async (soFar, budget) => {
      const more = soFar ? [...pieces, tok.encode(soFar, { addSpecialTokens: false })] : pieces;
      const out = await decode(
        agent,
        more,
        budget,
        opts,
        true,
        (t) => endsToolCall(tok.decode(t.slice(-16), { skipSpecialTokens: true })),
        gen,
      );
      ids.push(...out.ids);
      return { text: out.text, tokens: out.ids.length, stoppedBy: out.stoppedBy === 'stop' ? 'tool' : out.stoppedBy };
    },
  });
  checkCancelled(opts.signal, 'the tool loop');
  result.toolCalls.push(...r.calls);
  return { ids, text: r.text };
}
