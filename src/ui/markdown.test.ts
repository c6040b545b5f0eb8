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

  it('typesets a bare \\boxed{…} as inline math, nested braces included, and leaves an unclosed or quoted one as text', () => {
    const html = renderMarkdown('It is \\boxed{32}.');
    expect(html.startsWith('<p>It is <span class="katex">')).toBe(true);
    expect(html).not.toContain('katex-display');
    expect(html).toContain('<menclose notation="box">');
    expect(html).toContain('<mn>32</mn>');
    expect(html.endsWith('</span>.</p>\n')).toBe(true);
    expect(renderMarkdown('\\boxed{\\frac{1}{2}} and \\boxed{3}').match(/<annotation encoding="application\/x-tex">([^<]*)</g)).toEqual([
      '<annotation encoding="application/x-tex">\\boxed{\\frac{1}{2}}<',
      '<annotation encoding="application/x-tex">\\boxed{3}<',
    ]);
    expect(renderMarkdown('\\boxed{3')).toBe('<p>\\boxed{3</p>\n'); // still streaming
    expect(renderMarkdown('`\\boxed{3}`')).toBe('<p><code>\\boxed{3}</code></p>\n');
    // inside delimiters the delimited span wins: one formula, not two
    expect(renderMarkdown('$\\boxed{1}$').match(/class="katex"/g)?.length).toBe(1);
  });

  it('keeps hostile \\boxed{…} contents inert: HTML stays text, KaTeX links and classes are refused', () => {
    const tag = renderMarkdown('\\boxed{<img src=x onerror=alert(1)>}<script>alert(2)</script>');
    expect(tag).not.toMatch(/<img|<script/);
    expect(tag).toContain('<annotation encoding="application/x-tex">\\boxed{&lt;img src=x onerror=alert(1)&gt;}</annotation>');
    expect(tag).toContain('&lt;script&gt;alert(2)&lt;/script&gt;');
    for (const cmd of ['\\href{javascript:alert(1)}{x}', '\\url{javascript:alert(1)}', '\\htmlClass{x}{y}', '\\htmlData{a=b}{y}']) {
      const html = renderMarkdown(`\\boxed{${cmd}}`);
      expect(html).not.toMatch(/<a |href=|class="x"|data-a=/);
      expect(html).toContain('mathcolor="#cc0000"'); // KaTeX's mark of a command refused (trust off)
    }
    // a long unclosed box is text, found in linear time
    const t0 = performance.now();
    const long = renderMarkdown(`\\boxed{${'{a'.repeat(3000)}`);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(long).not.toContain('katex');
  });

  it('turns a bad formula into a marked error, not an exception', () => {
    expect(renderMarkdown('$\\frac{1$')).toContain('katex-error');
  });

  it('escapes the five special characters', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });
});

// issue 39 (12): math stood in the text as MATHSLOT<i>X, so a link whose URL held math got KaTeX markup spliced into its href,
// and that text typed by the model was replaced or removed.
describe('renderMarkdown: math slots', () => {
  it('a link whose URL holds $…$ keeps its href as written; the math in its text is typeset', () => {
    const html = renderMarkdown('[pay $5 or $6](https://x.org/$a$b "cost $y$")');
    expect(html.startsWith('<p><a href="https://x.org/$a$b" title="cost $y$" rel="noopener noreferrer nofollow" target="_blank">pay ' +
      '<span class="katex">')).toBe(true);
    expect(html.match(/href="[^"]*"/g)).toEqual(['href="https://x.org/$a$b"']);
    expect(html).toContain('<annotation encoding="application/x-tex">5 or </annotation>');
    expect(renderMarkdown('see https://x.org/$a$b')).toMatch(/^<p>see <a href="https:\/\/x\.org\/\$a\$b" rel=/);
    expect(renderMarkdown('![c](https://x.org/$q$.png)')).toBe(
      '<p><a href="https://x.org/$q$.png" rel="noopener noreferrer nofollow" target="_blank">[c]</a></p>\n');
  });

  it('placeholder text the model types stays as typed: the old MATHSLOT0X, and the private-use slot characters', () => {
    expect(renderMarkdown('typed MATHSLOT0X and MATHSLOT7X')).toBe('<p>typed MATHSLOT0X and MATHSLOT7X</p>\n');
    expect(renderMarkdown('$x$ then MATHSLOT0X')).toMatch(/<\/span> then MATHSLOT0X<\/p>\n$/);
    expect(renderMarkdown('a \uE0000\uE001 b `\uE000` c')).toBe('<p>a &#xE000;0&#xE001; b <code>&#xE000;</code> c</p>\n');
    expect(renderMarkdown('[x](https://x.org/\uE0000\uE001)')).toBe(
      '<p><a href="https://x.org/&#xE000;0&#xE001;" rel="noopener noreferrer nofollow" target="_blank">x</a></p>\n');
  });
});
