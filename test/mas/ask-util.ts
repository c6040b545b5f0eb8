/** Helpers of the `rmas ask` end-to-end tests: tiny upstream-layout systems, in-process runs, dump reading. */
import { readFileSync } from 'node:fs';
import { SafetensorsFile } from '../../src/formats/safetensors';
import { fileSource } from '../../src/formats/sources';
import { askCmd, type AskArgs } from '../../src/runner/ask-cmd';
import type { Backend } from '../../src/tensor/backend';
import { buildTinySystem, type TinyStyle } from '../../scripts/tiny-system/tiny-mas';

export async function overridesFor(style: TinyStyle, dir: string): Promise<string[]> {
  const sys = await buildTinySystem(style, dir);
  return [...Object.entries(sys.roles).map(([r, d]) => `${r}=${d}`), `outer=${sys.outer}`];
}

/** askCmd in-process: stdout, stderr, and the error it threw (if any). */
export async function runAsk(args: AskArgs, backend: Backend): Promise<{ out: string; err: string; error: Error | null }> {
  let out = '';
  let err = '';
  try {
    await askCmd(args, async () => backend, (s) => (out += s), (s) => (err += s));
    return { out, err, error: null };
  } catch (e) {
    return { out, err, error: e as Error };
  }
}

export interface DumpStage {
  file: string; round: number; role: string; model: string; slots: string[]; links_out: string[];
  tensors: Map<string, { dtype: string; shape: number[]; values: Float32Array | Int32Array }>;
}

export async function readDump(dir: string): Promise<DumpStage[]> {
  const manifest = JSON.parse(readFileSync(`${dir}/manifest.json`, 'utf8')) as { stages: Omit<DumpStage, 'tensors'>[] };
  const out: DumpStage[] = [];
  for (const s of manifest.stages) {
    const f = await SafetensorsFile.open(fileSource(`${dir}/${s.file}`));
    const tensors: DumpStage['tensors'] = new Map();
    for (const name of f.names()) {
      const t = await f.read(name);
      const b = t.bytes.slice();
      tensors.set(name, {
        dtype: t.dtype,
        shape: [...t.shape],
        values: t.dtype === 'I32' ? new Int32Array(b.buffer) : new Float32Array(b.buffer),
      });
    }
    await f.close();
    out.push({ ...s, tensors });
  }
  return out;
}

/**
 * A sequential_light system whose links are the ones PyTorch saved for the golden file
 * (test/golden/tiny-mas/*.pt): role folders hold a tiny model and `adapter.pt`, the outer folder
 * `outer_12.pt` … with no manifest (upstream's training-output names).
 */
export async function goldenLinkSystem(dir: string): Promise<string[]> {
  const { cpSync, mkdirSync } = await import('node:fs');
  const roles = {
    planner: ['qwen3-tiny', 'planner-inner'],
    critic: ['llama-tiny', 'critic-inner'],
    solver: ['qwen2-tiny', 'solver-inner'],
  };
  const out: string[] = [];
  for (const [role, [model, inner]] of Object.entries(roles)) {
    const d = `${dir}/${role}`;
    cpSync(`models/tiny/${model}`, d, { recursive: true });
    cpSync(`test/golden/tiny-mas/${inner}.pt`, `${d}/adapter.pt`);
    out.push(`${role}=${d}`);
  }
  mkdirSync(`${dir}/outer`, { recursive: true });
  for (const k of ['outer_12', 'outer_23', 'outer_31']) cpSync(`test/golden/tiny-mas/${k}.pt`, `${dir}/outer/${k}.pt`);
  out.push(`outer=${dir}/outer`);
  return out;
}

/** The golden counterpart of each dumped stage of a 2-round run (round, role) and of the 1-round decode. */
export const GOLDEN_OF_STAGE: Record<string, string> = {
  '1 planner': 'planner', '1 critic': 'critic', '1 solver': 'solver_feedback', '2 planner': 'planner_round2',
};
export const GOLDEN_QUESTION = '2+3?';
export const GOLDEN_PROMPTS = 'test/golden/tiny-mas/prompts.json';
