/**
 * A Vite plugin that puts the offline tiny systems into the build: each embedded style's page manifest
 * (EmbeddedSpec.manifest: models/tiny-system.json, models/tiny-recursion.json) and every file it references (each
 * role's model folder, whole: weights, tokenizer, chat_template.jinja, adapter.pt; the link files; the prompt file; an
 * outer folder, whole), with the system's recorded eval.json, at the same paths relative to the app root, where the
 * engine worker's offlineSystem() and the Evaluate panel fetch them. The first view's system (OFFLINE_STYLE) must be
 * whole; another whose folder is not there yet (not built) is left out, and the page says how to build it. `npm start`
 * serves the repository as is and needs nothing.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Plugin } from 'vite';
import { OFFLINE_STYLE, STYLES } from '../src/mas/styles.ts';

export const TINY_SYSTEM_MANIFEST = STYLES[OFFLINE_STYLE].embedded!.manifest!;

/** The files of the page's offline systems relative to `root`: each manifest, its model folders' files, link files, eval.json. */
export function tinySystemFiles(root: string): string[] {
  const files = new Set<string>();
  for (const style of Object.values(STYLES)) {
    const e = style.embedded;
    if (!e?.manifest || !existsSync(join(root, e.manifest))) continue;
    if (style.name !== OFFLINE_STYLE && !existsSync(join(root, e.root))) continue; // not built yet
    for (const f of manifestFiles(root, e.manifest, e.rebuild)) files.add(f);
    if (e.eval && existsSync(join(root, e.root, e.eval))) files.add(posix.join(e.root, e.eval));
  }
  return [...files];
}

function manifestFiles(root: string, manifestPath: string, rebuild: string): string[] {
  const spec = JSON.parse(readFileSync(join(root, manifestPath), 'utf8')) as {
    roles: Record<string, { model: string; innerLink?: string }>;
    outer?: Record<string, string>;
    outerRepo?: string;
    prompts?: string;
  };
  const files = new Set<string>([manifestPath]);
  const add = (rel: string) => {
    const clean = posix.normalize(rel).replace(/^\/+/, '');
    if (clean.startsWith('..') || /^[a-z]+:/i.test(rel)) return; // only files of this repository
    const abs = join(root, clean);
    if (!existsSync(abs))
      throw new Error(`${manifestPath} references ${rel}, which does not exist; run ${rebuild} (the tiny system) or fix the manifest`);
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
