/**
 * Model text → safe HTML: Markdown (marked) with LaTeX (KaTeX). Model output is untrusted, so raw HTML
 * is shown as text, links keep only http(s)/mailto targets, images become links (nothing is fetched), and
 * KaTeX runs with trust off (no \href, \htmlClass, ...).
 */
import katex from 'katex';
import { Marked, type Tokens } from 'marked';

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** `s` with the five HTML-special characters escaped. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESC[c]!);

const SAFE_URL = /^(https?:|mailto:)/i;

// Math is typeset before marked runs and stands in its text as a slot, OPEN index CLOSE: two private-use characters that
// the model's own text cannot leave in place, since each one it writes becomes a slot too (shown as itself). A link's
// href and title get each slot's source back, never its HTML.
const OPEN = '\uE000';
const CLOSE = '\uE001';
const SLOT = /\uE000(\d+)\uE001/g;
interface Slot { html: string; source: string }
/** The slots of the text being rendered (renderMarkdown is synchronous). */
let slots: Slot[] = [];
const sourceOf = (s: string) => s.replace(SLOT, (_, i: string) => slots[Number(i)]?.source ?? '');
/** An attribute's value: escaped, and a slot character the model wrote as a reference, so that no slot is left in it. */
const entity = (c: string) => `&#x${c.charCodeAt(0).toString(16).toUpperCase()};`;
const attr = (s: string) => escapeHtml(s).replace(/[\uE000\uE001]/g, entity);

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html: ({ text }: Tokens.HTML | Tokens.Tag) => escapeHtml(text),
    link({ href: slotted, title: slottedTitle, tokens }: Tokens.Link) {
      const inner = this.parser.parseInline(tokens);
      const href = sourceOf(slotted);
      const title = slottedTitle && sourceOf(slottedTitle);
      if (!SAFE_URL.test(href.trim())) return inner;
      const t = title ? ` title="${attr(title)}"` : '';
      return `<a href="${attr(href)}"${t} rel="noopener noreferrer nofollow" target="_blank">${inner}</a>`;
    },
    image({ href: slotted, text }: Tokens.Image) {
      const href = sourceOf(slotted);
      const label = escapeHtml(text || 'image');
      return SAFE_URL.test(href.trim())
        ? `<a href="${attr(href)}" rel="noopener noreferrer nofollow" target="_blank">[${label}]</a>`
        : `[${label}]`;
    },
  },
});

// Code (kept as is) or math (rendered): fenced blocks, inline code, $$…$$, \[…\], \(…\), $…$, and a bare \boxed{…}
// (answers box theirs outside any delimiter) whose braces balance, three levels deep at most.
const SPANS =
  /(```[\s\S]*?(?:```|$)|`[^`\n]*`)|(\$\$[\s\S]+?\$\$|\\\[[\s\S]+?\\\]|\\\([\s\S]+?\\\)|\$[^$\n]+?\$|\\boxed\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\})/g;

/** SPANS, or one of the slot characters in the text around them. */
const SPANS_OR_OWN = new RegExp(`${SPANS.source}|([${OPEN}${CLOSE}])`, 'g');

function renderMath(src: string): string {
  const display = src.startsWith('$$') || src.startsWith('\\[');
  const cut = src.startsWith('\\boxed') ? 0 : src.startsWith('$') && !src.startsWith('$$') ? 1 : 2;
  const body = src.slice(cut, src.length - cut);
  return katex.renderToString(body, { displayMode: display, throwOnError: false, trust: false, output: 'htmlAndMathml' });
}

/** Safe HTML for `text` (Markdown with $…$, $$…$$, \(…\), \[…\] math, and \boxed{…} as inline math). */
export function renderMarkdown(text: string): string {
  const made: Slot[] = [];
  const slot = (html: string, source: string) => `${OPEN}${made.push({ html, source }) - 1}${CLOSE}`;
  // a slot character the model wrote is a slot of its own, shown as the character
  const own = (c: string) => slot(entity(c), c);
  const slotted = text.replace(SPANS_OR_OWN, (whole, code: string | undefined, tex: string | undefined, c: string | undefined) => {
    if (c !== undefined) return own(c);
    if (code !== undefined || tex === undefined) return whole.replace(/[\uE000\uE001]/g, own);
    return slot(renderMath(tex), tex);
  });
  slots = made;
  try {
    const html = marked.parse(slotted, { async: false }) as string;
    return html.replace(SLOT, (_, i: string) => made[Number(i)]?.html ?? '');
  } finally {
    slots = [];
  }
}
