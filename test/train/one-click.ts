/**
 * The Train view's one-click request for the offline system, as TrainView builds it from src/ui/train.ts's
 * TINY_OUTER_* and the page's manifest (models/tiny-system.json), for the tests that run it in Node; and the
 * repository on disk served as the page's origin.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TRAIN_DEFAULTS } from '../../src/train/defaults';
import { TINY_HELD_OUT, TINY_OUTER_HP, TINY_OUTER_LOSS, tinyTrainRows, tinyValidationRows } from '../../src/ui/train';
import type { TrainRequest } from '../../workers/protocol';

export const ROOT = 'http://app.test/';
export const diskFetch: typeof fetch = async (input) => {
  const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
  try {
    return new Response(readFileSync(join(process.cwd(), decodeURIComponent(url.pathname))), { status: 200 });
  } catch {
    return new Response(null, { status: 404 });
  }
};

/** The offline system as the page's manifest names it. */
export const spec = JSON.parse(readFileSync('models/tiny-system.json', 'utf8')) as {
  prompts: string; roles: Record<string, { model: string; innerLink: string }>; outer: Record<string, string>;
};
const bytes = (path: string) => new Uint8Array(readFileSync(path));

/** What TrainView's Start sends for the offline system with its defaults (outer loop, the system's own outer links). */
export const oneClick = (): TrainRequest => ({
  kind: 'outer', backend: 'cpu', rows: tinyTrainRows(), style: 'tiny_distillation', prompts: ROOT + spec.prompts,
  agents: Object.fromEntries(Object.entries(spec.roles).map(([r, f]) => [r, { model: ROOT + f.model, innerLink: bytes(f.innerLink) }])),
  initLinks: Object.fromEntries(Object.entries(spec.outer).map(([k, f]) => [k, bytes(f)])),
  heldOut: { rows: tinyValidationRows(TINY_HELD_OUT.questions), every: TINY_HELD_OUT.every, latentSteps: TINY_HELD_OUT.latentSteps },
  options: { ...TINY_OUTER_HP, seed: TRAIN_DEFAULTS.seed, ...TINY_OUTER_LOSS },
});

