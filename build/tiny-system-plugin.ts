/**
 * A Vite plugin that puts the offline tiny system into the build: models/tiny-system.json and every file
 * it references (each role's model folder, whole: weights, tokenizer, chat_template.jinja, adapter.pt; the
 * link files; the prompt file; an outer folder, whole), at the same paths relative to the app root, where
 * the engine worker's offlineSystem() fetches them. `npm start` serves the repository as is and needs nothing.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Plugin } from 'vite';

export const TINY_SYSTEM_MANIFEST = 'models/tiny-system.json';

/** The manifest's files relative to `root`: the manifest, each model folder's files, each link file. */
export function tinySystemFiles(root: string): string[] {
  const manifest = join(root, TINY_SYSTEM_MANIFEST);
  if (!existsSync(manifest)) return [];
  const spec = JSON.parse(readFileSync(manifest, 'utf8')) as {
    roles: Record<string, { model: string; innerLink?: string }>;
    outer?: Record<string, string>;
    outerRepo?: string;
    prompts?: string;
  };
  const files = new Set<string>([TINY_SYSTEM_MANIFEST]);
  const add = (rel: string) => {
    const clean = posix.normalize(rel).replace(/^\/+/, '');
    if (clean.startsWith('..') || /^[a-z]+:/i.test(rel)) return; // only files of this repository
    const abs = join(root, clean);
    if (!existsSync(abs))
      throw new Error(
        `${TINY_SYSTEM_MANIFEST} references ${rel}, which does not exist; run npm run tiny:build (the tiny system) or fix the manifest`,
      );
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
