/**
 * The ONNX exports the peer benchmarks need (scripts/peer/export_onnx.py), built on demand: the tiny models' for
 * bench:peer (.cache/peer/<model>/, about a second each) and any model folder's for bench:realsize
 * (.cache/realsize-onnx/<model>/: Qwen3-0.6B takes about a minute and 6 GB of memory, and writes 3.0 GB). An export
 * is current when its peer-export.json records the sha256 that its inputs (the model's config.json and
 * model.safetensors, the exporter's scripts) have now.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, readSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
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

/** A file's sha256, read in blocks (a real-size checkpoint is gigabytes). */
function sha256(path: string): string {
  const h = createHash('sha256');
  const buf = Buffer.alloc(1 << 24);
  const fd = openSync(path, 'r');
  try {
    for (let n; (n = readSync(fd, buf, 0, buf.length, null)) > 0; ) h.update(buf.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return h.digest('hex');
}

/** The files an export of the model folder `src` depends on, as export_onnx.py lists them. */
function exportInputs(src: string): string[] {
  const scripts = ['export_onnx.py', 'onnx_decoder.py', 'onnx_external.py'].map((f) => join(ROOT, 'scripts/peer', f));
  return [join(src, 'config.json'), join(src, 'model.safetensors'), ...scripts];
}

/** Whether .cache/peer/<model> holds an export of the model's current files by the current exporter. */
export function exportIsCurrent(model: string): boolean {
  return exportIsCurrentAt(join(TINY_ROOT, model), join(PEER_ROOT, model));
}

/** Whether `dst` holds an export of the model folder `src` as it is now, by the current exporter. */
export function exportIsCurrentAt(src: string, dst: string): boolean {
  const manifest = join(dst, 'peer-export.json');
  if (!existsSync(manifest) || !existsSync(join(dst, 'onnx', 'model.onnx'))) return false;
  let recorded: Record<string, string>;
  try {
    recorded = (JSON.parse(readFileSync(manifest, 'utf8')) as { inputs: Record<string, string> }).inputs;
  } catch {
    return false;
  }
  return exportInputs(src).every((f) => existsSync(f) && recorded[relative(ROOT, f)] === sha256(f));
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
  log(`exporting ${stale.join(', ')} to ONNX (${relative(ROOT, PEER_ROOT)}/)`);
  runExporter(stale, PEER_ROOT, log);
  return stale;
}

/**
 * The export of the model folder `src` under `outRoot` (its folder's name), built when missing or stale, without
 * the f32 safetensors copy (our engine reads `src` itself). `externalDataMib` puts the weights in external data files
 * of that size at any model size, as a real-size export has them (tests). Returns the export's folder.
 */
export function ensureOnnxExport(
  src: string, outRoot: string, log: (line: string) => void = () => {}, opts: { externalDataMib?: number } = {},
): string {
  const dst = join(outRoot, basename(src));
  if (exportIsCurrentAt(resolve(src), dst)) return dst;
  log(`exporting ${src} to ONNX (${relative(ROOT, dst)}/)`);
  const ext = opts.externalDataMib === undefined ? [] : ['--external-data-mib', String(opts.externalDataMib)];
  runExporter(['--no-f32-copy', ...ext, resolve(src)], outRoot, log);
  return dst;
}

/** Runs the exporter on `args` (names under models/tiny or folders) into `outRoot`; a failure is PeerExportFailed. */
function runExporter(args: string[], outRoot: string, log: (line: string) => void): void {
  const torch = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  if (torch.error || torch.status !== 0) {
    const why = torch.error ? torch.error.message : torch.stderr.trim().split('\n').pop();
    throw new PeerExportFailed(
      `the ONNX export needs PyTorch for ${PYTHON} (${why}); install it with \`sudo bash scripts/setup-system.sh\` (Debian's python3-torch)`,
    );
  }
  const r = spawnSync(PYTHON, [EXPORTER, '--out', outRoot, ...args], { encoding: 'utf8' });
  if (r.status !== 0) {
    const tail = `${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-8).join('\n');
    throw new PeerExportFailed(`${PYTHON} scripts/peer/export_onnx.py ${args.join(' ')} failed (exit ${r.status}):\n${tail}`);
  }
  for (const line of r.stdout.trim().split('\n')) if (line) log(line);
}
