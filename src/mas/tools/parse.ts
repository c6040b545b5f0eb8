/**
 * Tool-call tags of the deliberation tool-caller (docs/method.md §7.6): `<python> code </python>` and
 * `<search> query </search>`, answered by ` <result> … </result>`.
 */

export interface ToolCall {
  tool: 'python' | 'search';
  body: string;
  start: number;
  /** Index just after the closing tag. */
  end: number;
}

// Same shape as upstream's `<(python|search)>\s*(.*?)\s*</\1>` with DOTALL and IGNORECASE; a fresh
// RegExp per call because a global regex carries lastIndex.
const CALL_SOURCE = String.raw`<(python|search)>\s*([\s\S]*?)\s*</\1>`;

/** First complete call at or after `from`: case-insensitive `<(python|search)>\s*(.*?)\s*</\1>` (dot matches newlines). */
export function findToolCall(text: string, from: number): ToolCall | null {
  const re = new RegExp(CALL_SOURCE, 'gi');
  re.lastIndex = Math.max(0, from);
  const m = re.exec(text);
  if (!m) return null;
  return {
    tool: m[1]!.toLowerCase() as ToolCall['tool'],
    body: m[2]!,
    start: m.index,
    end: m.index + m[0].length,
  };
}

const CLOSING = /<\/(python|search)>/i;

/** True when text (the tail of a generation) holds a closing </python> or </search> tag: the decode should stop there. */
export function endsToolCall(text: string): boolean {
  return CLOSING.test(text);
}

export const DEFAULT_RESULT_MAX_CHARS = 6000;

/**
 * Format a tool result as it is inserted: ` <result> {text} </result>`, truncated to `maxChars`
 * with `\n... [truncated N chars]`, and a literal `</result>` inside escaped to `< /result>` so that
 * the model cannot be made to see the result end early.
 */
export function formatResult(text: string, maxChars = DEFAULT_RESULT_MAX_CHARS): string {
  let body = text;
  if (body.length > maxChars) {
    body = `${body.slice(0, maxChars)}\n... [truncated ${body.length - maxChars} chars]`;
  }
  body = body.replace(/<\/(result>)/gi, '< /$1');
  return ` <result> ${body} </result>`;
}
