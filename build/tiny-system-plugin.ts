/**
 * A Vite plugin that puts the offline tiny systems into the build: each page manifest (models/tiny-*.json, an
 * embedded style's EmbeddedSpec.manifest in src/mas/styles.ts: models/tiny-system.json, models/tiny-recursion.json)
 * and every file it references (each role's model folder, whole: weights, tokenizer, chat_template.jinja, adapter.pt;
 * the link files; the prompt file; an outer folder, whole), with the system's recorded eval.json beside its prompt
 * file, at the same paths relative to the app root, where the engine worker's offlineSystem() and the Evaluate panel
 * fetch them. The first view's system (TINY_SYSTEM_MANIFEST) must be whole; another whose folder is not there yet (not
 * built) is left out, and the page says how to build it. `npm start` serves the repository as is and needs nothing.
 * (It reads no module of src/: vitest.config.ts loads it through vite.config.ts.)
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Plugin } from 'vite';

export const TINY_SYSTEM_MANIFEST = 'models/tiny-system.json';

interface Manifest {
  style: string;
  roles: Record<string, { model: string; innerLink?: string }>;
  outer?: Record<string, string>;
  outerRepo?: string;
  prompts?: string;
}

/** The files of the page's offline systems relative to `root`: each manifest, its model folders' files, link files, eval.json. */
export function tinySystemFiles(root: string): string[] {
  const files = new Set<string>();
  const manifests = existsSync(join(root, 'models'))
    ? readdirSync(join(root, 'models')).filter((f) => /^tiny-.*\.json$/.test(f)).map((f) => `models/${f}`)
    : [];
  for (const path of manifests) {
    const spec = JSON.parse(readFileSync(join(root, path), 'utf8')) as Manifest;
    const folder = typeof spec.prompts === 'string' ? posix.dirname(posix.normalize(spec.prompts)) : null;
    if (path !== TINY_SYSTEM_MANIFEST && (!folder || !existsSync(join(root, folder)))) continue; // not built yet
    for (const f of manifestFiles(root, path, spec)) files.add(f);
    if (folder && existsSync(join(root, folder, 'eval.json'))) files.add(posix.join(folder, 'eval.json'));
  }
  return [...files];
}

function manifestFiles(root: string, manifestPath: string, spec: Manifest): string[] {
  const rebuild = spec.style === 'tiny_distillation' ? 'npm run tiny:build' : `the build of ${spec.style} (models/tiny/README.md)`;
  const files = new Set<string>([manifestPath]);
  const add = (rel: string) => {
    const clean = posix.normalize(rel).replace(/^\/+/, '');
    if (clean.startsWith('..') || /^[a-z]+:/i.test(rel)) return; // only files of this repository
    const abs = join(root, clean);
    if (!existsSync(abs))
      throw new Error(`${manifestPath} references ${rel}, which does not exist; run ${rebuild} or fix the manifest`);
    if (statSync(abs).isDirectory()) {
      for (const f of readdirSync(abs)) if (statSync(join(abs, f)).isFile()) files.add(posix.join(clean, f));
    } else files.add(clean);
  };
  for (const r of Object.values(spec.roles)) {
    add(r.model);
    if (typeof r.innerLink === 'string') add(r.innerLink);
  }
  for (const l of Object.values(spec.outer ?? {})) if (typeof l === 'string') add(l);
  if (typeof spec.outerRepo === 'string') add(spec.outerRepo);
  if (typeof spec.prompts === 'string') add(spec.prompts);
  return [...files];
}

export function tinySystemAssets(): Plugin {
  let root = process.cwd();
  return {
    name: 'rmas-tiny-system-assets',
    apply: 'build',
    configResolved(c) {
      root = c.root;
    },
    generateBundle() {
      for (const f of tinySystemFiles(root)) this.emitFile({ type: 'asset', fileName: f, source: readFileSync(join(root, f)) });
    },
  };
}
