/**
 * The ONNX exports the peer benchmark needs (.cache/peer/<model>/, scripts/peer/export_onnx.py), built on demand:
 * an export is current when its peer-export.json records the sha256 that its inputs (the model's config.json and
 * model.safetensors, the two exporter scripts) have now. Building takes about a second per model.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RmasError } from '../src/errors';

/** The repository; the exports live in PEER_ROOT, the models they come from in TINY_ROOT. */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const PEER_ROOT = join(ROOT, '.cache/peer');
export const TINY_ROOT = join(ROOT, 'models/tiny');
export const PYTHON = '/usr/bin/python3';
const EXPORTER = join(ROOT, 'scripts/peer/export_onnx.py');

/** The ONNX export could not be built; the message says what to install or fix. */
export class PeerExportFailed extends RmasError {
  constructor(message: string) { super('PeerExportFailed', message); }
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** The files an export of `model` depends on, relative to the repository, as export_onnx.py lists them. */
function exportInputs(model: string): string[] {
  const src = join(TINY_ROOT, model);
  return [join(src, 'config.json'), join(src, 'model.safetensors'), EXPORTER, join(ROOT, 'scripts/peer/onnx_decoder.py')];
}

/** Whether .cache/peer/<model> holds an export of the model's current files by the current exporter. */
export function exportIsCurrent(model: string): boolean {
  const manifest = join(PEER_ROOT, model, 'peer-export.json');
  if (!existsSync(manifest) || !existsSync(join(PEER_ROOT, model, 'onnx', 'model.onnx'))) return false;
  let recorded: Record<string, string>;
  try {
    recorded = (JSON.parse(readFileSync(manifest, 'utf8')) as { inputs: Record<string, string> }).inputs;
  } catch {
    return false;
  }
  return exportInputs(model).every((f) => existsSync(f) && recorded[relative(ROOT, f)] === sha256(f));
}

/** Exports every model of `models` whose export is missing or stale; returns the ones it built. */
export function ensurePeerExports(models: readonly string[], log: (line: string) => void = () => {}): string[] {
  for (const m of models) {
    if (!existsSync(join(TINY_ROOT, m, 'config.json'))) {
      throw new PeerExportFailed(
        `models/tiny/${m}/config.json does not exist; name a model folder under models/tiny (e.g. qwen3-tiny, llama-tiny, system/planner)`,
      );
    }
  }
  const stale = models.filter((m) => !exportIsCurrent(m));
  if (stale.length === 0) return [];
  const torch = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  if (torch.error || torch.status !== 0) {
    const why = torch.error ? torch.error.message : torch.stderr.trim().split('\n').pop();
    throw new PeerExportFailed(
      `the ONNX export needs PyTorch for ${PYTHON} (${why}); install it with \`sudo bash scripts/setup-system.sh\` (Debian's python3-torch)`,
    );
  }
  log(`exporting ${stale.join(', ')} to ONNX (${relative(ROOT, PEER_ROOT)}/)`);
  const r = spawnSync(PYTHON, [EXPORTER, '--out', PEER_ROOT, ...stale], { encoding: 'utf8' });
  if (r.status !== 0) {
    const tail = `${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-8).join('\n');
    throw new PeerExportFailed(`${PYTHON} scripts/peer/export_onnx.py ${stale.join(' ')} failed (exit ${r.status}):\n${tail}`);
  }
  for (const line of r.stdout.trim().split('\n')) if (line) log(line);
  return stale;
}
