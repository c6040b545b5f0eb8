/**
 * `--dump DIR`: what crossed each hand-off, for debugging and for checks against other implementations.
 *   DIR/manifest.json  {"stages": [{"file", "round", "role", "model", "slots", "links_out"}, ...]} in execution order
 *   DIR/<file>         safetensors per stage: ids.0 … ids.k (I32), latents_in.0 … (F32 [m_i, d]), hidden (F32 [m, d])
 *                      when a rollout ran, latents_out.<link key> (F32 [m, d_target]), generated_ids (I32) when it decoded.
 * Rounds in the manifest are 1-based. Each stage file is written before the manifest names it, and the
 * manifest is replaced atomically, so an interrupted run leaves a consistent (shorter) dump.
 */
import { writeSafetensors, type StTensor } from '../formats/safetensors';
import type { StageRecord } from './ask';
import { nodeImport } from '../util/node-import';

export interface DumpManifestStage {
  file: string;
  round: number;
  role: string;
  model: string;
  slots: string[];
  links_out: string[];
}

const i32 = (ids: readonly number[]): StTensor => {
  const a = Int32Array.from(ids);
  return { dtype: 'I32', shape: [a.length], bytes: new Uint8Array(a.buffer) };
};
const f32 = (a: Float32Array, shape: readonly number[]): StTensor => ({
  dtype: 'F32',
  shape: [...shape],
  bytes: new Uint8Array(a.buffer, a.byteOffset, a.byteLength),
});

/** The tensors of one stage file (reads the latents back from the backend). */
export async function stageTensors(r: StageRecord): Promise<Record<string, StTensor>> {
  const out: Record<string, StTensor> = {};
  r.ids.forEach((ids, i) => (out[`ids.${i}`] = i32(ids)));
  for (const [i, t] of r.latentsIn.entries()) out[`latents_in.${i}`] = f32(await t.read(), t.shape);
  if (r.hidden) out.hidden = f32(await r.hidden.read(), r.hidden.shape);
  for (const [key, t] of r.latentsOut) out[`latents_out.${key}`] = f32(await t.read(), t.shape);
  if (r.generatedIds) out.generated_ids = i32(r.generatedIds);
  return out;
}

export class DumpWriter {
  readonly stages: DumpManifestStage[] = [];
  private constructor(
    readonly dir: string,
    private readonly fs: typeof import('node:fs/promises'),
  ) {}

  static async create(dir: string): Promise<DumpWriter> {
    const fs = await nodeImport('node:fs/promises');
    await fs.mkdir(dir, { recursive: true });
    return new DumpWriter(dir.replace(/\/+$/, ''), fs);
  }

  /** For AskOptions.onStage. */
  readonly stage = async (r: StageRecord) => {
    const file = `${String(r.index).padStart(2, '0')}-round${r.round + 1}-${r.role}.safetensors`;
    await this.fs.writeFile(`${this.dir}/${file}`, writeSafetensors(await stageTensors(r)));
    this.stages.push({ file, round: r.round + 1, role: r.role, model: r.model, slots: [...r.slots], links_out: [...r.linksOut] });
    const tmp = `${this.dir}/manifest.json.tmp`;
    await this.fs.writeFile(tmp, `${JSON.stringify({ stages: this.stages }, null, 2)}\n`);
    await this.fs.rename(tmp, `${this.dir}/manifest.json`);
  };
}
