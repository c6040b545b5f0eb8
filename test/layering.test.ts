// The layering of src/ (the README's map and its layering rule), read from every file's import
// specifiers: the library (src/ but the apps src/ui and src/runner) never imports the apps, workers/, bench/,
// models/, scripts/ or test/; each library layer imports only itself and the layers below it; the kernel workbench
// (src/kernels/workbench and the parity cases) may import any layer and serves tests, benchmarks and the apps (the
// page's self-test and bench page); src/testing serves tests, benchmarks and scripts only. Tests (*.test.ts) are exempt.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');

/**
 * Library layers, lowest first; a file may import its own layer and those before it. `errors` is src/errors.ts,
 * which the doc leaves out: the named errors every layer throws, below util (whose Rng throws one).
 */
const LAYERS = [
  'errors', 'util', 'formats', 'gpu', 'kernels', 'tensor', 'autograd', 'model', 'tokenizer', 'mas', 'train', 'eval', 'store', 'dist',
];
const APPS = ['ui', 'runner'];
/** Folders outside src/ that no library file imports (workers/ only src/ui may). */
const OUTSIDE = ['workers', 'bench', 'models', 'scripts', 'test'];

interface Import {
  /** Importing file, relative to the repository root (posix). */
  from: string;
  /** The specifier resolved against it (relative specifiers only: packages and node: modules are not layers). */
  to: string;
}

const top = (path: string) => path.split('/')[0]!;
/** The src layer of a path: the folder under src/, or 'errors' for src/errors.ts. */
const layerOf = (path: string) => (/^src\/errors(\.ts)?$/.test(path) ? 'errors' : path.split('/')[1]!);
/** Test support that is not a test: fixtures and references that only tests, benchmarks and scripts use. */
const isTesting = (path: string) => /^src\/testing(\/|$)/.test(path);
/**
 * The kernel workbench: closeness, the parity and bench harness, and the parity cases. It runs kernels through the
 * backends above them, so it may import any library layer; the tests, the benchmarks and the page's self-test use it.
 */
const isWorkbench = (path: string) =>
  /^src\/kernels\/(workbench|cases)(\/|$)/.test(path) || /(^|[/.])cases(\.ts)?$/.test(path);
const isBench = (path: string) => path.endsWith('.bench.ts');

/** What breaks the layering among `imports` (none of them from a test file), one line each. */
function violations(imports: readonly Import[]): string[] {
  const out: string[] = [];
  for (const { from, to } of imports) {
    const bad = (why: string) => out.push(`${from} imports ${to}: ${why}`);
    const app = APPS.includes(layerOf(from));
    const where = top(to);
    if (where === 'node_modules') continue; // an asset URL of a package (src/ui/peer.ts)
    if (where === 'docs' && app) continue; // a doc the page links to, served with it as an asset URL (AskView's method.md)
    if (where !== 'src') {
      if (!OUTSIDE.includes(where)) bad(`${where}/ is neither src/ nor a known folder outside it`);
      else if (!(where === 'workers' && layerOf(from) === 'ui'))
        bad(`src/ never imports ${where}/${where === 'workers' ? ' (only src/ui may)' : ''}`);
      continue;
    }
    const layer = layerOf(to);
    if (APPS.includes(layer)) {
      if (!app) bad(`the library never imports the apps (src/${layer})`);
      continue;
    }
    if (!LAYERS.includes(layer) && layer !== 'testing') { bad(`src/${layer} is in no layer; add it to LAYERS`); continue; }
    if (isTesting(to) && !isTesting(from) && !isBench(from)) { bad('src/testing serves tests, benchmarks and scripts only'); continue; }
    const harness = isTesting(from) || isBench(from) || isWorkbench(from);
    if (isWorkbench(to) && !harness && !app) { bad('the library never imports the kernel workbench'); continue; }
    if (app || harness || isTesting(to) || isWorkbench(to)) continue;
    const own = layerOf(from);
    if (!LAYERS.includes(own)) { bad(`src/${own} is in no layer; add it to LAYERS`); continue; }
    if (LAYERS.indexOf(layer) > LAYERS.indexOf(own)) bad(`${own} is below ${layer} (${LAYERS.join(' < ')})`);
  }
  return out;
}

// static `import … from`, `export … from` and `import '…'` at the start of a statement; `import('…')` with a literal
const STATIC = /(?:^|[;\n])\s*(?:import|export)\b[^'";]*?\bfrom\s*['"]([^'"]+)['"]|(?:^|[;\n])\s*import\s*['"]([^'"]+)['"]/g;
const DYNAMIC = /\bimport\s*\(\s*(?:\/\*.*?\*\/\s*)?['"]([^'"]+)['"]\s*\)/g;

/** The relative imports of one file's text, resolved against its path. */
function importsOf(from: string, text: string): Import[] {
  const specs = [...text.matchAll(STATIC)].map((m) => m[1] ?? m[2]!).concat([...text.matchAll(DYNAMIC)].map((m) => m[1]!));
  return specs
    .filter((s) => s.startsWith('.'))
    .map((s) => ({ from, to: posix.normalize(posix.join(posix.dirname(from), s.replace(/\?.*$/, ''))) }));
}

/**
 * An entry point of src/: src/errors, or a folder whose index.ts says what it offers (a layer, or a part with its own
 * entry: mas/tools, kernels/workbench, kernels/cases). The engine worker reaches the library through these only.
 */
const isEntry = (to: string) => /^src\/errors(\.ts)?$/.test(to) || existsSync(join(ROOT, to, 'index.ts'));

/**
 * What breaks the rules for the folders outside src/ that ship or build things: the engine worker imports src/'s entry
 * points (never src/testing), its own folder and bench/ (the bench page's cases); bench/ and scripts/ may import
 * src/testing.
 */
function outsideViolations(imports: readonly Import[]): string[] {
  const out: string[] = [];
  for (const { from, to } of imports) {
    const bad = (why: string) => out.push(`${from} imports ${to}: ${why}`);
    if (isTesting(to) && !['bench', 'scripts'].includes(top(from))) bad('src/testing serves tests, benchmarks and scripts only');
    else if (top(from) === 'workers' && !['src', 'workers', 'bench', 'node_modules'].includes(top(to)))
      bad('workers/ imports only src/, workers/ and bench/');
    else if (top(from) === 'workers' && top(to) === 'src' && !isEntry(to))
      bad('workers/ imports src/ through its entry points (src/errors or a folder\'s index.ts), not a file inside a layer');
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return sourceFiles(path);
    return /\.(ts|svelte|mjs)$/.test(e.name) && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('layering of src/', () => {
  it('the checker finds each kind of leak in a synthetic import list, and passes allowed ones', () => {
    expect(violations([
      { from: 'src/formats/a.ts', to: 'src/model/config' },
      { from: 'src/mas/a.ts', to: 'workers/protocol' },
      { from: 'src/ui/a.svelte', to: 'models/tiny/task' },
      { from: 'src/model/a.ts', to: 'src/testing/close' },
      { from: 'src/kernels/a.ts', to: 'src/runner/cli' },
      { from: 'src/util/a.ts', to: 'src/errors' },
      { from: 'src/sandbox/a.ts', to: 'src/tensor' },
      { from: 'src/kernels/a/a.cases.ts', to: 'src/testing/model' },
      { from: 'src/ui/a.ts', to: 'src/testing' },
      { from: 'src/model/a.ts', to: 'src/kernels/workbench/close' },
    ]).map((v) => v.split(':')[0])).toEqual([
      'src/formats/a.ts imports src/model/config', 'src/mas/a.ts imports workers/protocol', 'src/ui/a.svelte imports models/tiny/task',
      'src/model/a.ts imports src/testing/close', 'src/kernels/a.ts imports src/runner/cli', 'src/sandbox/a.ts imports src/tensor',
      'src/kernels/a/a.cases.ts imports src/testing/model', 'src/ui/a.ts imports src/testing',
      'src/model/a.ts imports src/kernels/workbench/close',
    ]);
    expect(violations([
      { from: 'src/ui/a.svelte', to: 'workers/protocol' }, { from: 'src/runner/a.ts', to: 'src/store' },
      { from: 'src/kernels/a/a.bench.ts', to: 'src/autograd' }, { from: 'src/kernels/a/a.cases.ts', to: 'src/kernels/workbench' },
      { from: 'src/kernels/workbench/parity.ts', to: 'src/tensor/cpu' }, { from: 'src/testing/model.ts', to: 'src/model/config' },
      { from: 'src/model/model.bench.ts', to: 'src/testing/model' }, { from: 'src/ui/a.ts', to: 'src/kernels/workbench/bench' },
      { from: 'src/ui/peer.ts', to: 'node_modules/x/y.wasm' },
    ])).toEqual([]);
    expect(outsideViolations([
      { from: 'workers/a.ts', to: 'src/testing/model' }, { from: 'workers/a.ts', to: 'test/util/gpu' },
      { from: 'bench/a.ts', to: 'src/testing/tiny-golden' }, { from: 'scripts/a.ts', to: 'src/testing/model' },
      { from: 'workers/a.ts', to: 'bench/harness' }, { from: 'workers/a.ts', to: 'src/kernels/cases' },
      { from: 'workers/a.ts', to: 'src/mas/ask' }, { from: 'workers/a.ts', to: 'src/mas' }, { from: 'workers/a.ts', to: 'src/errors' },
      { from: 'workers/a.ts', to: 'src/mas/tools' }, { from: 'workers/a.ts', to: 'src/store/hub-settings' },
      { from: 'bench/a.ts', to: 'src/mas/ask' },
    ]).map((v) => v.split(':')[0])).toEqual([
      'workers/a.ts imports src/testing/model', 'workers/a.ts imports test/util/gpu', 'workers/a.ts imports src/mas/ask',
      'workers/a.ts imports src/store/hub-settings',
    ]);
    expect(
      importsOf(
        'src/mas/a.ts',
        "import {\n  A,\n  type B,\n} from '../model/b';\nexport * from './c';\nimport './d.css';\n" +
          "const x = await import(/* @vite-ignore */ '../util/e');\n// import f from '../../bench/f'\nimport g from 'node:fs';\n",
      ).map((i) => i.to),
    ).toEqual(['src/model/b', 'src/mas/c', 'src/mas/d.css', 'src/util/e']);
  });

  it('holds for every file under src/', () => {
    const imports = sourceFiles('src').flatMap((f) => importsOf(f, readFileSync(join(ROOT, f), 'utf8')));
    expect(imports.length).toBeGreaterThan(1000); // the parser sees the real graph
    expect(violations(imports)).toEqual([]);
  });

  it('holds for workers/, bench/ and scripts/: the worker imports src/ entry points; src/testing serves tests, benchmarks, scripts', () => {
    const files = ['workers', 'bench', 'scripts'].flatMap(sourceFiles);
    const imports = files.flatMap((f) => importsOf(f, readFileSync(join(ROOT, f), 'utf8')));
    expect(imports.filter((i) => i.from.startsWith('workers/')).length).toBeGreaterThan(50);
    expect(outsideViolations(imports)).toEqual([]);
  });
});
