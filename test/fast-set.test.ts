// The rule of `npm run test:fast` (test/util/fast-set.ts), read from the files themselves so that it cannot rot: no
// file in the fast set, nor the test-side code it imports (test/, bench/, scripts/, src/testing), starts a process or
// WebGPU; every test whose own code uses WebGPU in Node is named *.gpu.test.ts (so the suffix alone keeps it out); the
// lists name files that exist. What a test reaches through the library (the runner's default backend, a tool that
// runs python3) is caught at run time by test/util/fast-guard.ts.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, posix, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { QUICK_TEST, SLOW_SRC, fastBySuffix, fastTestFiles } from './util/fast-set';

const ROOT = resolve(import.meta.dirname, '..');

// value imports and re-exports (`import type` is skipped: it loads nothing), side-effect imports, literal import()
const FROM = /(?:^|[;\n])\s*(?:import|export)\s+(?!type\b)[^'";]*?\bfrom\s*['"]([^'"]+)['"]|(?:^|[;\n])\s*import\s*['"]([^'"]+)['"]/g;
const DYNAMIC = /\bimport\s*\(\s*(?:\/\*.*?\*\/\s*)?['"]([^'"]+)['"]\s*\)/g;

/** The value imports of a file: packages as written, relative ones resolved to a file under ROOT (posix) when one exists. */
function importsOf(file: string, text: string): string[] {
  const specs = [...text.matchAll(FROM)].map((m) => m[1] ?? m[2]!).concat([...text.matchAll(DYNAMIC)].map((m) => m[1]!));
  return specs.map((s) => {
    if (!s.startsWith('.')) return s;
    const base = posix.normalize(posix.join(posix.dirname(file), s.replace(/\?.*$/, '')));
    return [base, `${base}.ts`, `${base}/index.ts`].find((p) => /\.(ts|mjs|js)$/.test(p) && existsSync(join(ROOT, p))) ?? base;
  });
}

/** Code that counts as the test's own: test/ (helpers), bench/ and scripts/ (programs tests import), src/testing. */
const testSide = (path: string) => /^(test|bench|scripts)\//.test(path) || path.startsWith('src/testing/');
const PROCESS = /^(node:)?child_process$/;
const WEBGPU = (spec: string) => spec === 'test/util/gpu.ts' || spec === 'src/tensor/webgpu.ts' || spec === 'webgpu';

/** What in `file` and the code it reaches through `follow` starts a process or WebGPU, one line each. */
function usesOf(file: string, follow: (path: string) => boolean): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const visit = (path: string) => {
    if (seen.has(path)) return;
    seen.add(path);
    const text = readFileSync(join(ROOT, path), 'utf8');
    if (/['"]--backend['"],\s*['"]webgpu['"]/.test(text)) out.push(`${path} runs the runner with --backend webgpu`);
    for (const spec of importsOf(path, text)) {
      if (PROCESS.test(spec)) out.push(`${path} imports ${spec}`);
      else if (WEBGPU(spec)) out.push(`${path} imports ${spec} (WebGPU)`);
      else if (/\.(ts|mjs|js)$/.test(spec) && follow(spec)) visit(spec);
    }
  };
  visit(file);
  return out;
}

function nodeTestFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return path === 'test/e2e' ? [] : nodeTestFiles(path);
    return path.endsWith('.test.ts') && !path.endsWith('.browser.test.ts') ? [path] : [];
  });
}

describe('npm run test:fast', () => {
  const fast = fastTestFiles(ROOT);

  it('the checker sees processes, Dawn and the runner on WebGPU, and follows test-side imports only', () => {
    expect(importsOf('test/a.test.ts', "import type { X } from '../src/tensor/webgpu';\nimport { y } from './util/gpu';\n"))
      .toEqual(['test/util/gpu.ts']);
    expect(usesOf('test/util/rmas.ts', testSide)).toEqual([]); // the runner in process: its backend is the caller's
    expect(usesOf('test/cli.gpu.test.ts', testSide)).toEqual([
      'test/cli.gpu.test.ts runs the runner with --backend webgpu',
      'test/cli.gpu.test.ts imports node:child_process',
      'test/cli.gpu.test.ts imports test/util/gpu.ts (WebGPU)',
    ]);
  });

  it('is about a hundred unit and CPU-parity files, and its lists name files that exist', () => {
    expect(fast.length).toBeGreaterThan(80);
    expect(fast.filter((f) => !existsSync(join(ROOT, f)))).toEqual([]);
    expect(Object.keys(SLOW_SRC).filter((f) => !existsSync(join(ROOT, f)) || !f.startsWith('src/') || !fastBySuffix(f))).toEqual([]);
    expect(QUICK_TEST.filter((f) => !f.startsWith('test/') || !fastBySuffix(f))).toEqual([]);
    expect(fast).toContain('test/fast-set.test.ts');
  });

  it('starts no process and no WebGPU in any of its files or the test-side code they import', () => {
    expect(fast.flatMap((f) => usesOf(f, testSide))).toEqual([]);
  });

  it('every Node test whose own code uses WebGPU is named *.gpu.test.ts', () => {
    const files = [...nodeTestFiles('src'), ...nodeTestFiles('test')];
    expect(files.length).toBeGreaterThan(150);
    const usesGpu = (f: string) => usesOf(f, (p) => p.startsWith('test/')).some((u) => /WebGPU|webgpu/.test(u));
    expect(files.filter((f) => !f.endsWith('.gpu.test.ts') && usesGpu(f))).toEqual([]);
  });
});
