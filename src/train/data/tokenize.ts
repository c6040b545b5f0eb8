/**
 * Training examples as token ids. Inner loop (docs/method.md §6.1): one chat per row with real text in the slots and
 * a loss mask over the assistant span. Outer loop (docs/method.md §6.2, `build_stage_with_slot`): the prompt-only chat cut
 * at its slots (the trainer splices latents there) followed by the gold assistant tokens.
 */
import { InvalidArgument, TokenizerError } from '../../errors.ts';
import {
  PROMPT_SLOTS,
  systemPrompt,
  userPrompt,
  type PromptKind,
  type PromptSet,
  type StyleShape,
  type TaskKind,
} from '../../mas/prompts.ts';
import { ALL_SLOTS } from '../../mas/slots.ts';
import { splitAtSlots, withChatFallbacks } from '../../tokenizer/slots.ts';
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';
import { canonicalRole, roleExample, rowTask } from './roles.ts';
import type { Row } from './rows.ts';
import type { InnerExample } from '../inner.ts';

export type { InnerExample } from '../inner.ts';

export interface StageExample {
  /** k + 1 token pieces around the k slots of the prompt (the last one ends with the generation prompt). */
  pieces: number[][];
  /** The assistant tokens (gold target incl. end-of-turn), which follow the last piece. */
  target: number[];
  /** The slot strings, in prompt order. */
  slots: string[];
  /**
   * Whether the prompt-only render is a text prefix of the full render (false for Qwen3-style empty think blocks,
   * docs/method.md §12.7).
   */
  promptIsPrefix: boolean;
}

/** The prompt-only render (generation prompt) and the full render (gold assistant turn) of one chat. */
export interface ChatPair {
  prompt: string;
  full: string;
}

/**
 * Renders system + user twice, once with the generation prompt and once with `assistant` as the last turn,
 * thinking off. The fallbacks are renderChat's (src/tokenizer/slots.ts): a template that rejects
 * `enable_thinking` is retried without it, one that refuses a system turn gets the system text merged into
 * the user message; the first variant under which both renders succeed is used for both.
 */
export function renderChatPair(tok: Tokenizer, system: string | null, user: string, assistant: string): ChatPair {
  return withChatFallbacks(system, user, (messages, kwargs) => ({
    prompt: tok.applyChatTemplate(messages, { addGenerationPrompt: true, kwargs }),
    full: tok.applyChatTemplate([...messages, { role: 'assistant', content: assistant }], { addGenerationPrompt: false, kwargs }),
  }));
}

const encode = (tok: Tokenizer, text: string): number[] => (text ? tok.encode(text, { addSpecialTokens: false }) : []);

const isPrefix = (a: readonly number[], b: readonly number[]): boolean => a.length <= b.length && a.every((v, i) => v === b[i]);

/** Texts of the row that would be mistaken for slot strings in the rendered chat. */
function straySlot(texts: readonly string[]): string | undefined {
  for (const t of texts) for (const s of ALL_SLOTS) if (t.includes(s)) return s;
  return undefined;
}

interface Prepared {
  system: string;
  /** User prompt with the slot strings still in it. */
  user: string;
  slots: readonly string[];
  target: string;
  slotTexts: string[];
}

/** Row → system prompt, user prompt (slot strings kept), gold target; or the reason to skip the row. */
function prepare(
  shape: StyleShape,
  role: string,
  kind: PromptKind,
  row: Row,
  task: TaskKind,
  round: number | undefined,
  prompts: PromptSet | undefined,
): Prepared | { skip: string } {
  const name = canonicalRole(shape, role);
  const ex = roleExample(shape, name, row, round);
  if ('skip' in ex) return ex;
  const key = `${shape}.${name}.${kind}`;
  const slots = PROMPT_SLOTS[key];
  if (!slots) throw new InvalidArgument(`role '${name}' of shape '${shape}' has no '${kind}' prompt; use kind 'first'`);
  const t = rowTask(row, task);
  if (t.task === 'code' && t.codeType === 'function' && !t.fnName) return { skip: 'missing:fn_name' };
  const stray = straySlot([ex.question, ex.target, ...ex.slotTexts]);
  if (stray) return { skip: `slot_string_in_text:${stray}` };
  const vars = {
    question: ex.question,
    task: t.task,
    round: round ?? (kind === 'feedback' ? 2 : 1),
    ...(t.codeType ? { codeType: t.codeType } : {}),
    ...(t.fnName ? { fnName: t.fnName } : {}),
  };
  return {
    system: systemPrompt(shape, prompts),
    user: userPrompt(shape, name, kind, vars, prompts),
    slots,
    target: ex.target,
    slotTexts: ex.slotTexts,
  };
}

/**
 * docs/method.md §6.1: inner example: ids = the full chat (user prompt with the slot texts inline, gold assistant turn),
 * lossMask 0 over the first len(prompt_ids) positions (prompt render with the generation prompt) and 1
 * after; both right-truncated to maxLength. Like upstream the mask goes by length even when prompt_ids is
 * not a prefix of the full ids (`promptIsPrefix` false; count those rows). Skips a row whose fields are
 * missing, whose assistant span is truncated away entirely ('target_truncated'), or whose whole chat is no longer than
 * its prompt's render, so that masking by length leaves no target position ('target_not_past_prompt': a template
 * that renders the generation prompt with more than the full chat has there, such as an empty think block, and
 * a target shorter than the difference). Inner training uses
 * first-round prompts only: kind 'feedback' has no text for its feedback slot (InvalidArgument).
 */
export function innerExample(
  tok: Tokenizer,
  shape: StyleShape,
  role: string,
  kind: PromptKind,
  row: Row,
  opts: { task: TaskKind; maxLength: number; round?: number; prompts?: PromptSet },
): (InnerExample & { promptIsPrefix: boolean }) | { skip: string } {
  if (!Number.isInteger(opts.maxLength) || opts.maxLength < 2)
    throw new InvalidArgument(`maxLength must be an integer ≥ 2, got ${opts.maxLength}`);
  if (kind !== 'first') {
    throw new InvalidArgument(
      "inner training renders first-round prompts with real text in the slots; a 'feedback' prompt has no text for its feedback slot, use kind 'first'",
    );
  }
  const p = prepare(shape, role, kind, row, opts.task, opts.round, opts.prompts);
  if ('skip' in p) return p;
  let user = p.user;
  p.slots.forEach((slot, i) => {
    user = user.replace(slot, () => p.slotTexts[i]!);
  });
  const { prompt, full } = renderChatPair(tok, p.system, user, p.target);
  const promptIds = encode(tok, prompt);
  const fullIds = encode(tok, full);
  const promptIsPrefix = isPrefix(promptIds, fullIds);
  const ids = fullIds.slice(0, opts.maxLength);
  const promptLen = Math.min(promptIds.length, opts.maxLength);
  if (promptLen >= ids.length) return { skip: fullIds.length > opts.maxLength ? 'target_truncated' : 'target_not_past_prompt' };
  return { ids, lossMask: ids.map((_, i) => (i < promptLen ? 0 : 1)), promptIsPrefix };
}

function commonPrefixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * docs/method.md §6.2: outer stage: the prompt-only render cut at the slots (pieces, tokenised separately) and the gold
 * assistant tokens (what the full render adds after the prompt, tokenised on their own). When the
 * prompt-only render is not a prefix of the full one (a generation prompt with an empty think block that
 * the full render lacks), the target starts where the gold text starts in the full render's tail, so the
 * sequence is the inference prompt followed by the gold answer; `promptIsPrefix` is then false.
 */
export function stageExample(
  tok: Tokenizer,
  shape: StyleShape,
  role: string,
  kind: PromptKind,
  row: Row,
  opts: { task: TaskKind; round?: number; prompts?: PromptSet },
): StageExample | { skip: string } {
  const p = prepare(shape, role, kind, row, opts.task, opts.round, opts.prompts);
  if ('skip' in p) return p;
  const { prompt, full } = renderChatPair(tok, p.system, p.user, p.target);
  const where = `the ${shape}.${canonicalRole(shape, role)}.${kind} prompt`;
  const cutPrompt = splitAtSlots(prompt, ALL_SLOTS, p.slots, where);
  const cutFull = splitAtSlots(full, ALL_SLOTS, p.slots, `${where} (full render)`);
  const k = p.slots.length;
  for (let i = 0; i < k; i++) {
    if (cutPrompt.pieces[i] !== cutFull.pieces[i]) {
      throw new TokenizerError(
        `the chat template renders the text before slot ${i + 1} of ${where} differently with and without the assistant turn; slots cannot be placed, use another template`,
      );
    }
  }
  const lastPrompt = cutPrompt.pieces[k]!;
  const lastFull = cutFull.pieces[k]!;
  let tail: string;
  let promptIsPrefix = true;
  if (lastFull.startsWith(lastPrompt)) {
    tail = lastFull.slice(lastPrompt.length);
  } else {
    promptIsPrefix = false;
    const common = commonPrefixLength(lastPrompt, lastFull);
    const at = lastFull.indexOf(p.target, common);
    tail = lastFull.slice(at >= 0 ? at : common);
  }
  const target = encode(tok, tail);
  if (target.length === 0) return { skip: 'empty_target' };
  return { pieces: cutPrompt.pieces.map((s) => encode(tok, s)), target, slots: cutPrompt.slots, promptIsPrefix };
}

/**
 * Drops tokens from the start of pieces[0] so that Σ pieces + Σ slotLens + target ≤ maxLength (upstream
 * left-truncates); 'sequence_too_long' when even an empty first piece does not fit.
 */
export function leftTruncate(
  ex: StageExample,
  slotLens: readonly number[],
  maxLength: number,
): StageExample | { skip: 'sequence_too_long' } {
  if (slotLens.length !== ex.slots.length) {
    throw new InvalidArgument(`leftTruncate got ${slotLens.length} slot lengths for ${ex.slots.length} slots; give one length per slot`);
  }
  if (slotLens.some((n) => !Number.isInteger(n) || n < 0))
    throw new InvalidArgument(`slot lengths must be integers ≥ 0, got ${slotLens.join(', ')}`);
  const total = ex.pieces.reduce((s, p) => s + p.length, 0) + slotLens.reduce((s, n) => s + n, 0) + ex.target.length;
  const excess = total - maxLength;
  if (excess <= 0) return ex;
  if (excess > ex.pieces[0]!.length) return { skip: 'sequence_too_long' };
  return { ...ex, pieces: [ex.pieces[0]!.slice(excess), ...ex.pieces.slice(1)] };
}
