/**
 * Every "docs/method.md §N" that a comment cites names a section of docs/method.md (and every cited file under docs/
 * exists), so a reader who follows a citation lands inside the repository.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/** The repository's own source files (git's list: no build outputs or local leftovers). */
const SOURCES = execFileSync('git', ['ls-files', 'src', 'workers', 'test', 'bench', 'scripts', 'models', 'build'], { encoding: 'utf8' })
  .split('\n').filter((f) => /\.(ts|svelte|mjs|js|py)$/.test(f) && existsSync(f));

/** The section numbers of a Markdown file's numbered headings ("## 6. Training" → 6, "### 6.1 …" → 6.1). */
export function sectionNumbers(markdown: string): Set<string> {
  return new Set([...markdown.matchAll(/^#{2,4} (\d+(?:\.\d+)*)\.? /gm)].map((m) => m[1]!));
}

/** Each "docs/method.md §a, §b–§c" citation's section numbers with the place they appear. */
export function citations(text: string, where: string): { where: string; section: string }[] {
  const out: { where: string; section: string }[] = [];
  for (const m of text.matchAll(/docs\/method\.md ((?:§\d+(?:\.\d+)*(?: table)?(?:, |–)?)+)/g)) {
    for (const s of m[1]!.matchAll(/§(\d+(?:\.\d+)*)/g)) out.push({ where, section: s[1]! });
  }
  return out;
}

describe('citations of docs/', () => {
  const method = sectionNumbers(readFileSync('docs/method.md', 'utf8'));
  const sources = SOURCES;

  it('the checker reads numbered headings and citation lists', () => {
    expect([...sectionNumbers('## 6. Training\n### 6.1 Inner loop\n#### 6.1.2 x\n## Notes\n')]).toEqual(['6', '6.1', '6.1.2']);
    expect(citations('see (docs/method.md §3.3, §4.3–§4.4) and docs/method.md §6.1 table', 'f').map((c) => c.section))
      .toEqual(['3.3', '4.3', '4.4', '6.1']);
  });

  it('every docs/method.md § citation names one of its sections', () => {
    const all = sources.flatMap((f) => citations(readFileSync(f, 'utf8'), f));
    expect(all.length).toBeGreaterThan(40);
    expect(all.filter((c) => !method.has(c.section))).toEqual([]);
  });

  it('every docs/ file a comment names exists', () => {
    const named = sources.flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/(?<![\w/])docs\/[\w./-]+\.md\b/g)].map((m) => ({ f, doc: m[0] })),
    );
    expect(named.filter(({ doc }) => !existsSync(doc))).toEqual([]);
  });

  it("every home docs/words.md gives a concept exists, and every name it gives that home is declared there", () => {
    const rows = readFileSync('docs/words.md', 'utf8').split('\n').filter((l) => /^\| \*\*/.test(l));
    expect(rows.length).toBeGreaterThan(20);
    const homes = rows.flatMap((l) =>
      [...l.split('|').at(-2)!.matchAll(/`([^`]+)`(?: \(`(\w+)`\))?/g)].map((m) => ({ path: m[1]!, name: m[2] })),
    );
    const files = homes.flatMap(({ path, name }) => {
      if (!path.includes('*')) return [{ path, name, exists: existsSync(path) }];
      const re = new RegExp(`^${path.replace(/[.]/g, '\\.').replace(/\*/g, '[^/]*')}$`);
      return [{ path, name, exists: SOURCES.some((f) => re.test(f)) }];
    });
    expect(files.filter((f) => !f.exists).map((f) => f.path)).toEqual([]);
    const declares = (f: { path: string; name?: string }) =>
      new RegExp(`export (const|function|class|type|interface) ${f.name}\\b`).test(readFileSync(f.path, 'utf8'));
    const undeclared = files.filter((f) => f.name && !declares(f));
    expect(undeclared.map((f) => `${f.path} ${f.name}`)).toEqual([]);
    expect(files.filter((f) => f.name).length).toBeGreaterThan(1);
  });
});
