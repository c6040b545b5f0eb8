/** Helpers of the `rmas ask` end-to-end tests: tiny upstream-layout systems, in-process runs, dump reading. */
import { readFileSync } from 'node:fs';
import { SafetensorsFile } from '../../src/formats/safetensors';
import { fileSource } from '../../src/formats/sources';
import { askCmd, type AskArgs } from '../../src/runner/ask';
import type { Backend } from '../../src/tensor/backend';
import { buildTinySystem, type TinyStyle } from '../../models/tiny-mas';

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
      tensors.set(name, { dtype: t.dtype, shape: [...t.shape], values: t.dtype === 'I32' ? new Int32Array(b.buffer) : new Float32Array(b.buffer) });
    }
    await f.close();
    out.push({ ...s, tensors });
  }
  return out;
}
