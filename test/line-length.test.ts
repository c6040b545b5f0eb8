/**
 * The line-length rule: no line of the repository's own source runs past 140 columns, except one that holds
 * nothing but a single string, template or regex literal (with its key, `return`, an opening bracket or
 * a closing `,` `;` `)` `+`), which no formatter can break without changing the text. Comments wrap.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

export const MAX_COLUMNS = 140;

/** git's list of the project's source files (no build outputs, vendored data or local leftovers). */
const SOURCES = execFileSync('git', ['ls-files', 'src', 'workers', 'test', 'bench', 'scripts', 'build', 'native', 'bin', 'models'], {
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => /\.(ts|svelte|mjs|cjs|js|py|cc|cu|h|cpp|sh)$/.test(f) && existsSync(f));

/** The index just past the literal that opens at `s[i]` (a quote, backtick or slash), or -1 if it does not close on this line. */
function literalEnd(s: string, i: number): number {
  const open = s[i]!;
  if (open === '`') {
    let depth = 0;
    for (let j = i + 1; j < s.length; j++) {
      const c = s[j]!;
      if (c === '\\') j++;
      else if (depth === 0 && c === '`') return j + 1;
      else if (c === '$' && s[j + 1] === '{') (depth++, j++);
      else if (depth > 0 && c === '}') depth--;
      else if (depth > 0 && (c === "'" || c === '"' || c === '`')) {
        const e = literalEnd(s, j);
        if (e < 0) return -1;
        j = e - 1;
      }
    }
    return -1;
  }
  let inClass = false;
  for (let j = i + 1; j < s.length; j++) {
    const c = s[j]!;
    if (c === '\\') j++;
    else if (open === '/' && c === '[') inClass = true;
    else if (open === '/' && c === ']') inClass = false;
    else if (c === open && !inClass) {
      let k = j + 1;
      if (open === '/') while (k < s.length && /[dgimsuvy]/.test(s[k]!)) k++;
      return k;
    }
  }
  return -1;
}

/** What may come before the literal: a key or assignment, return/throw/+/?/:, new, calls and opening brackets. */
const LEAD = new RegExp(
  String.raw`^\s*(?:(?:[\w$.]+|'[^']*'|"[^"]*")\s*[:=]\s*)?` +
    String.raw`(?:return\s+|throw\s+|\+\s*|[?:]\s*)?(?:new\s+)?(?:[\w$.]+\s*\(\s*|[([{]\s*)*`,
);

/** Whether a line is a single unbreakable literal: optional lead (key, `return`, bracket), the literal, optional closers. */
export function isLoneLiteral(line: string): boolean {
  const lead = LEAD.exec(line)!;
  const start = lead[0].length;
  if (!`'"\`/`.includes(line[start] ?? '')) return false;
  const end = literalEnd(line, start);
  // the rest of the line is short: the literal is what makes it long
  return end > 0 && /^[\s,;)+\]}]*(?:\/\/.*)?$/.test(line.slice(end)) && line.length - (end - start) <= 60;
}

/** A comment line whose only long word is a URL (it cannot be wrapped). */
const isLoneUrl = (line: string) => /^\s*(?:\/\/|\*|#)\s*\S*https?:\/\/\S+\s*$/.test(line);

export function longLines(text: string, file: string): string[] {
  return text
    .split('\n')
    .map((line, i) => ({ line, n: i + 1 }))
    .filter(({ line }) => line.length > MAX_COLUMNS && !isLoneLiteral(line) && !isLoneUrl(line))
    .map(({ line, n }) => `${file}:${n} (${line.length} columns): ${line.trim().slice(0, 60)}…`);
}

describe(`lines of at most ${MAX_COLUMNS} columns`, () => {
  it('the rule tells a lone literal from code, and code from a comment', () => {
    const long = 'x'.repeat(150);
    expect(isLoneLiteral(`      \`${long} \${a.b('c')} ok\`,`)).toBe(true);
    expect(isLoneLiteral(`  throw new UsageError(\`${long}\`);`)).toBe(true);
    expect(isLoneLiteral(`    message: '${long}',`)).toBe(true);
    expect(isLoneLiteral(`        /${long} [/] \\/ x/i,`)).toBe(true);
    expect(isLoneLiteral(`  '${long}' + foo(bar) + 'x',`)).toBe(false);
    expect(isLoneLiteral(`  const a = f(x, y); // '${long}'`)).toBe(false);
    expect(isLoneLiteral(`  \`a \${b} \` + \`${long}\``)).toBe(false);
    expect(isLoneLiteral(`  // ${long}`)).toBe(false);
    expect(longLines(`ok\n  // ${long}\n  '${long}',\n`, 'f.ts')).toEqual([`f.ts:2 (155 columns): // ${'x'.repeat(57)}…`]);
  });

  it('every tracked source file keeps to the rule', () => {
    expect(SOURCES.length).toBeGreaterThan(300);
    const bad = SOURCES.flatMap((f) => longLines(readFileSync(f, 'utf8'), f));
    expect(bad).toEqual([]);
  });
});
