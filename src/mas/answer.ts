/**
 * Answer-retry stage helpers (docs/method.md §7.3). When the final agent's text lacks what scoring reads, the text is
 * fed back as a raw prompt (no chat template) plus a short suffix, and the same agent continues for a few
 * tokens; the continuation is appended to the original output.
 */
import type { TaskKind } from './prompts';

/** The text with reasoning removed: whole `<think>…</think>` blocks, text before an orphan `</think>`, text after an orphan `<think>`. */
export function stripThink(text: string): string {
  let t = text.replace(/<think>[\s\S]*?<\/think>/g, '');
  const close = t.lastIndexOf('</think>');
  if (close >= 0) t = t.slice(close + '</think>'.length);
  const open = t.indexOf('<think>');
  if (open >= 0) t = t.slice(0, open);
  return t;
}

/**
 * Content of `\boxed{…}` starting at `open` (the index of its `{`), braces balanced, `\{` and `\}` treated
 * as literal characters; null when the braces never close.
 */
function boxedAt(text: string, open: number): string | null {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') {
      i++; // an escaped character never opens or closes a group
    } else if (c === '{') {
      depth++;
    } else if (c === '}') {
      depth--;
      if (depth === 0) return text.slice(open + 1, i);
    }
  }
  return null;
}

/** Last \boxed{...} content with balanced braces (handles nesting, unlike upstream's regex), or null. */
export function lastBoxed(text: string): string | null {
  const starts = [...text.matchAll(/\\boxed\s*\{/g)].map((m) => m.index! + m[0].length - 1);
  // a truncated last box (braces never closed) falls back to the one before it
  for (let k = starts.length - 1; k >= 0; k--) {
    const body = boxedAt(text, starts[k]!);
    if (body !== null) return body;
  }
  return null;
}

/** The option letter a boxed content names: `B`, `(B)`, `B. text`, `\text{B}`, `\textbf{(B)}`; null otherwise. */
function boxedLetter(content: string): string | null {
  const m = content.match(/^\s*(?:\\text(?:bf|rm)?\s*\{\s*)?\(?\s*([A-D])\s*\)?(?![A-Za-z])/);
  return m ? m[1]! : null;
}

const STATED_CHOICE = /(?:final\s+(?:choice|answer)\s*:|answer\s+is\s*:?)\s*(?:\*\*)?\s*\(?\s*([A-Za-z])(?![A-Za-z])/gi;

/**
 * True when the final output already holds what scoring needs: a \boxed{…} (math), a choice letter (choice: boxed letter, or a
 * "Final Choice/Answer: X" / "answer is X" pattern), or a ```python fenced block (code). <think>…</think> is ignored.
 */
export function hasFinalAnswer(text: string, task: TaskKind): boolean {
  const t = stripThink(text);
  if (task === 'code') return /```python/i.test(t);
  const boxed = lastBoxed(t);
  if (task === 'math') return boxed !== null && boxed.trim() !== '';
  if (boxed !== null && boxedLetter(boxed) !== null) return true;
  for (const m of t.matchAll(STATED_CHOICE)) if ('ABCD'.includes(m[1]!)) return true;
  return false;
}

/** The raw-prompt suffix of the retry: math `\nFinal Answer: \boxed{`, choice `\nFinal Choice: \boxed{`, code an instruction in our own words ending `Final Code:\n```python\n`. */
export function retrySuffix(task: TaskKind): string {
  if (task === 'math') return '\nFinal Answer: \\boxed{';
  if (task === 'choice') return '\nFinal Choice: \\boxed{';
  return '\n\nNow give the whole solution again as one runnable Python program, with no explanation.\nFinal Code:\n```python\n';
}

/** Tokens the retry may generate: 16, or 256 for code. */
export function retryMaxTokens(task: TaskKind): number {
  return task === 'code' ? 256 : 16;
}
