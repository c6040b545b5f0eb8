/**
 * Slot injection on the text side (docs/method.md §4.2): render the whole chat first, then cut the rendered text at
 * each slot string and tokenise the pieces separately (no special tokens added, since the template already
 * wrote them). The caller interleaves embed(piece) with the latents (or text) that fill each slot.
 */
import { PromptSlotMissing, TokenizerError } from '../errors.ts';
import type { ChatMessage, Tokenizer } from './tokenizer.ts';

export interface RenderedPrompt {
  /** The rendered chat, slot strings still in it. */
  text: string;
  /** k + 1 text pieces around the k slots, in order. */
  pieces: string[];
  /** Token ids of each piece (tokenised separately, add_special_tokens false). */
  ids: number[][];
  /** The slot strings in the order they occur. */
  slots: string[];
}

/**
 * Renders system + user with the generation prompt and thinking off. Like upstream: a template that rejects
 * `enable_thinking` is retried without it, and one that refuses a system turn ("roles must alternate",
 * "system role not supported") gets the system text merged into the user message.
 */
export function renderChat(tok: Tokenizer, system: string | null, user: string): string {
  return withChatFallbacks(system, user, (messages, kwargs) => tok.applyChatTemplate(messages, { addGenerationPrompt: true, kwargs }));
}

/**
 * Runs `render` with upstream's fallbacks in order: system + user with thinking off, then without the
 * `enable_thinking` variable, then the system text merged into the user message. A missing template is
 * not retried; the last template error is re-raised when every attempt fails.
 */
export function withChatFallbacks<T>(
  system: string | null,
  user: string,
  render: (messages: ChatMessage[], kwargs: Record<string, unknown>) => T,
): T {
  const withSystem: ChatMessage[] = system
    ? [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ]
    : [{ role: 'user', content: user }];
  const attempts: [ChatMessage[], Record<string, unknown>][] = [
    [withSystem, { enable_thinking: false }],
    [withSystem, {}],
  ];
  if (system) attempts.push([[{ role: 'user', content: `${system}\n\n${user}` }], { enable_thinking: false }]);
  let last: unknown;
  for (const [messages, kwargs] of attempts) {
    try {
      return render(messages, kwargs);
    } catch (e) {
      if (!(e instanceof TokenizerError) || /no chat template/.test(e.message)) throw e;
      last = e;
    }
  }
  throw last;
}

/**
 * Cuts `text` at every occurrence of the given slot strings. `expected`, when given, is the exact sequence
 * of slots the stage fills: a missing, repeated or unexpected slot is a PromptSlotMissing that names it.
 */
export function splitAtSlots(
  text: string,
  slotStrings: readonly string[],
  expected?: readonly string[],
  where = 'the prompt',
): { pieces: string[]; slots: string[] } {
  const pieces: string[] = [];
  const slots: string[] = [];
  let at = 0;
  for (;;) {
    let best = -1;
    let which = '';
    for (const s of slotStrings) {
      const i = text.indexOf(s, at);
      if (i >= 0 && (best < 0 || i < best)) {
        best = i;
        which = s;
      }
    }
    if (best < 0) break;
    pieces.push(text.slice(at, best));
    slots.push(which);
    at = best + which.length;
  }
  pieces.push(text.slice(at));
  if (expected && expected.join('\n') !== slots.join('\n')) {
    const missing = expected.filter((s) => !slots.includes(s));
    const extra = slots.filter((s) => !expected.includes(s));
    const detail = missing.length
      ? `lacks ${missing.join(', ')}`
      : extra.length
        ? `holds ${extra.join(', ')} that nothing fills`
        : `has the slots in the order ${slots.join(', ')}`;
    throw new PromptSlotMissing(
      `${where} ${detail}; it must hold exactly ${expected.length ? expected.join(', ') : 'no slot'} in that order. ` +
        'Fix the prompt template (or the chat template, if it rewrites the user text)',
    );
  }
  return { pieces, slots };
}

/** renderChat + splitAtSlots + per-piece tokenisation. */
export function renderWithSlots(
  tok: Tokenizer,
  system: string | null,
  user: string,
  slotStrings: readonly string[],
  expected?: readonly string[],
  where?: string,
): RenderedPrompt {
  const text = renderChat(tok, system, user);
  const { pieces, slots } = splitAtSlots(text, slotStrings, expected, where);
  return { text, pieces, slots, ids: pieces.map((p) => (p ? tok.encode(p, { addSpecialTokens: false }) : [])) };
}
