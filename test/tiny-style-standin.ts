/**
 * A stand-in for the embedded tiny system (models/tiny/system, issue 7) in the same layout, for tests that
 * must not depend on the trained files: role folders planner/ critic/ solver/ (the random tiny models of
 * models/tiny/ with the torch-saved golden inner link as adapter.pt and adapter_config.json), outer/ (the
 * golden outer_12/23/31.pt with the manifests `rmas train-outer` writes) and prompts.json (the tiny prompt
 * file of scripts/tiny-system/prompts.ts). Tests load it through RMAS_TINY_SYSTEM or LoadSystemOptions.embeddedRoot,
 * and the playground tests serve it at models/tiny/system/ (standInFetch).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { outerManifests } from '../src/mas/upstream';
import { TINY_PROMPT_FILE } from '../scripts/tiny-system/prompts';
import { goldenLinkSystem } from './mas/ask-util';

/** Hidden sizes of the stand-in's agents (qwen3-tiny, llama-tiny, qwen2-tiny). */
export const STAND_IN_HIDDEN = { planner: 48, critic: 64, solver: 32 } as const;

/** Writes the stand-in under `dir` (which becomes the system folder) and returns `dir`. */
export async function buildTinyStandIn(dir: string): Promise<string> {
  await goldenLinkSystem(dir);
  for (const role of Object.keys(STAND_IN_HIDDEN))
    writeFileSync(join(dir, role, 'adapter_config.json'), `${JSON.stringify({ adapter_type: 'ln_res_adapter' })}\n`);
  const h = STAND_IN_HIDDEN;
  const links = [['outer_12', h.planner, h.critic], ['outer_23', h.critic, h.solver], ['outer_31', h.solver, h.planner]] as const;
  const m = outerManifests(
    'chain',
    links.map(([key, inDim, outDim]) => ({ key, filename: `${key}.pt`, type: 'outer_ln_res_adapter', inDim, outDim })),
  );
  writeFileSync(join(dir, 'outer', 'outerlink_config.json'), `${JSON.stringify(m.outerlinkConfig, null, 2)}\n`);
  writeFileSync(
    join(dir, 'outer', 'outer_adapter_config.json'),
    `${JSON.stringify({ ...m.outerAdapterConfig, mas_shape: 'chain' }, null, 2)}\n`,
  );
  writeFileSync(join(dir, 'prompts.json'), `${JSON.stringify(TINY_PROMPT_FILE, null, 2)}\n`);
  return dir;
}

const SYSTEM_PREFIX = 'models/tiny/system/';

/**
 * A fetchFile hook for the engine API's system calls that serves the repository at `appBase`, except
 * models/tiny/system/*, which it serves from the stand-in folder `standIn`.
 */
export function standInFetch(appBase: string, standIn: string): (url: string) => Promise<Uint8Array | null> {
  return async (url) => {
    if (!url.startsWith(appBase)) return null;
    const rel = decodeURIComponent(url.slice(appBase.length));
    const path = rel.startsWith(SYSTEM_PREFIX) ? join(standIn, rel.slice(SYSTEM_PREFIX.length)) : join(resolve('.'), rel);
    try {
      return new Uint8Array(readFileSync(path));
    } catch {
      return null;
    }
  };
}
