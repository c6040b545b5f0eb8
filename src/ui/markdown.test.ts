// Model text rendering: Markdown and math come out as HTML, anything the model writes as HTML stays text.
import { describe, expect, it } from 'vitest';
import { escapeHtml, renderMarkdown } from './markdown';

describe('renderMarkdown', () => {
  it('renders emphasis, lists and code', () => {
    expect(renderMarkdown('**x** and `a<b`')).toBe('<p><strong>x</strong> and <code>a&lt;b</code></p>\n');
    expect(renderMarkdown('- a\n- b')).toBe('<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n');
  });

  it('escapes raw HTML from the model, block and inline', () => {
    const block = renderMarkdown('<script>alert(1)</script>');
    expect(block).not.toContain('<script');
    expect(block).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    const inline = renderMarkdown('see <img src=x onerror="alert(1)"> here');
    expect(inline).not.toContain('<img');
    expect(inline).toContain('&lt;img src=x onerror=&quot;alert(1)&quot;&gt;');
  });

  it('keeps only http(s) and mailto links and never loads images', () => {
    expect(renderMarkdown('[a](javascript:alert(1))')).toBe('<p>a</p>\n');
    expect(renderMarkdown('[a](https://x.org/p)')).toBe(
      '<p><a href="https://x.org/p" rel="noopener noreferrer nofollow" target="_blank">a</a></p>\n',
    );
    expect(renderMarkdown('![cat](https://x.org/c.png)')).not.toContain('<img');
  });

  it('typesets inline and display math with KaTeX, and leaves math in code alone', () => {
    const html = renderMarkdown('so $x^2$ and \\[\\boxed{42}\\]');
    expect(html.match(/class="katex"/g)?.length).toBe(2);
    expect(html).toContain('katex-display');
    expect(html).toContain('<annotation encoding="application/x-tex">\\boxed{42}</annotation>');
    expect(renderMarkdown('`$x$`')).toBe('<p><code>$x$</code></p>\n');
  });

  it('turns a bad formula into a marked error, not an exception', () => {
    expect(renderMarkdown('$\\frac{1$')).toContain('katex-error');
  });

  it('escapes the five special characters', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });
});
