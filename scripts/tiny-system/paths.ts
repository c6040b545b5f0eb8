/**
 * Where the tiny data lies: models/tiny (the random tiny checkpoints), the embedded systems (styles.ts's
 * TINY_SYSTEM_ROOT and TINY_DISTILLATION_ROOT, the one names of their folders) and the stage
 * snapshots. Found from this module's folder, two
 * below the root; scripts/gpu-kit.sh bundles its checks into models/tiny for the same depth.
 */
import { resolve } from 'node:path';
import { TINY_DISTILLATION_ROOT, TINY_SYSTEM_ROOT } from '../../src/mas/styles.ts';

export const ROOT = resolve(import.meta.dirname, '../..');
export const TINY_MODELS_DIR = resolve(ROOT, 'models/tiny');
export const TINY_SYSTEM_DIR = resolve(ROOT, TINY_SYSTEM_ROOT);
/** Where a build keeps the inputs of its later stages (text-stage agents, inner-stage links) for the tests. */
export const TINY_STAGES_DIR = resolve(TINY_MODELS_DIR, 'stages');
/** The embedded two-agent system (scripts/tiny-distillation). */
export const TINY_DISTILLATION_DIR = resolve(ROOT, TINY_DISTILLATION_ROOT);
