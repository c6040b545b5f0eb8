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

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html: ({ text }: Tokens.HTML | Tokens.Tag) => escapeHtml(text),
    link({ href, title, tokens }: Tokens.Link) {
      const inner = this.parser.parseInline(tokens);
      if (!SAFE_URL.test(href.trim())) return inner;
      const t = title ? ` title="${escapeHtml(title)}"` : '';
      return `<a href="${escapeHtml(href)}"${t} rel="noopener noreferrer nofollow" target="_blank">${inner}</a>`;
    },
    image({ href, text }: Tokens.Image) {
      const label = escapeHtml(text || 'image');
      return SAFE_URL.test(href.trim())
        ? `<a href="${escapeHtml(href)}" rel="noopener noreferrer nofollow" target="_blank">[${label}]</a>`
        : `[${label}]`;
    },
  },
});

// Code (kept as is) or math (rendered): fenced blocks, inline code, $$…$$, \[…\], \(…\), $…$, and a bare \boxed{…}
// (answers box theirs outside any delimiter) whose braces balance, three levels deep at most.
const SPANS =
  /(```[\s\S]*?(?:```|$)|`[^`\n]*`)|(\$\$[\s\S]+?\$\$|\\\[[\s\S]+?\\\]|\\\([\s\S]+?\\\)|\$[^$\n]+?\$|\\boxed\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\})/g;

function renderMath(src: string): string {
  const display = src.startsWith('$$') || src.startsWith('\\[');
  const cut = src.startsWith('\\boxed') ? 0 : src.startsWith('$') && !src.startsWith('$$') ? 1 : 2;
  const body = src.slice(cut, src.length - cut);
  return katex.renderToString(body, { displayMode: display, throwOnError: false, trust: false, output: 'htmlAndMathml' });
}

/** Safe HTML for `text` (Markdown with $…$, $$…$$, \(…\), \[…\] math, and \boxed{…} as inline math). */
export function renderMarkdown(text: string): string {
  const math: string[] = [];
  const marked_ = text.replace(SPANS, (whole, code: string | undefined, tex: string | undefined) => {
    if (code !== undefined || tex === undefined) return whole;
    math.push(renderMath(tex));
    return `MATHSLOT${math.length - 1}X`;
  });
  const html = marked.parse(marked_, { async: false }) as string;
  return html.replace(/MATHSLOT(\d+)X/g, (_, i: string) => math[Number(i)] ?? '');
}
