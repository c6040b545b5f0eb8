/**
 * The peer benchmark page (peer.html): our engine and transformers.js (ONNX Runtime Web, WebGPU execution
 * provider) on the same tiny models, prompt ids and adapter, in this page's main thread (src/ui/peer-run.ts
 * runs the comparison). `npm run bench:peer` drives this page headlessly through window.rmasPeer.run, so the
 * command and the page cannot disagree.
 *
 * transformers.js reads each model's ONNX export from /.cache/peer/<model>/ (scripts/peer/export_onnx.py;
 * `npm run bench:peer` builds it when missing). Query: ?models=qwen3-tiny,llama-tiny&tokens=64&reps=3&prompt=..&run=1
 *
 * window.rmasPeer.realsize is `npm run bench:realsize`'s page engine (bench/realsize/page.ts): one cold run of one
 * engine on a real-size model, ours in a worker of its own (src/ui/realsize-worker.ts), transformers.js in this page.
 */
import { AutoModelForCausalLM, env as tjsEnv } from '@huggingface/transformers';
// transformers.js pins its own onnxruntime-web (a dev build, installed under it; the project declares none); the wasm
// must come from that same build, served with the page (transformers.js' default is a CDN)
import ortWasmUrl from
  '../../node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.wasm?url';
import { RmasError } from '../errors';
import { loadDecoderFromUrl, modelFetch } from '../model';
import { WebGpuBackend } from '../tensor/webgpu';
import { loadTokenizerFromUrl } from '../tokenizer';
import { wrap } from 'comlink';
import type { RealsizeRun } from './realsize-run';
import { runTheirsOnce, trackGpuBuffers } from './realsize-run';
import type { RealsizeWorkerApi } from './realsize-worker';
import {
  PEER_DEFAULTS,
  type PeerHost,
  type PeerOptions,
  type PeerReport,
  type PeerRow,
  adapterLabel,
  checkLine,
  loadTheirs,
  openRunners,
  oursRunner,
  peerCells,
  runPeer,
} from './peer-run';

/** The ONNX export of a model is not where the page looks for it. */
export class PeerExportMissing extends RmasError {
  constructor(message: string) { super('PeerExportMissing', message); }
}

const OURS_DIR = (m: string) => `/models/tiny/${m}/`;
const EXPORT_DIR = (m: string) => `/.cache/peer/${m}/`;
const exportHint = (m: string) =>
  `build it with \`/usr/bin/python3 scripts/peer/export_onnx.py ${m}\` (or \`npm run bench:peer -- --models ${m}\`, which exports on demand), then run again`;

/** "Chrome 156" (headless too), "Firefox 140", from the user agent. */
function browserLabel(): string {
  const m = /(Firefox|Edg|Chrome|Version)\/(\d+)/.exec(navigator.userAgent.replace('HeadlessChrome', 'Chrome'));
  return m ? `${m[1] === 'Version' ? 'Safari' : m[1] === 'Edg' ? 'Edge' : m[1]} ${m[2]}` : 'browser';
}

/** This page's engines: ours on a WebGPU device of its own, transformers.js on ONNX Runtime Web's WebGPU EP. */
async function browserHost(): Promise<PeerHost & { close(): void }> {
  tjsEnv.allowLocalModels = true;
  tjsEnv.allowRemoteModels = false;
  tjsEnv.localModelPath = '/.cache/peer/';
  tjsEnv.useBrowserCache = false;
  tjsEnv.backends.onnx.wasm!.wasmPaths = { wasm: ortWasmUrl };
  const backend = await WebGpuBackend.create();
  const r = backend.ctx.report;
  return {
    adapter: adapterLabel(browserLabel(), r),
    isFallbackAdapter: r.isFallback,
    runtime: navigator.userAgent,
    async promptIds(model, prompt) {
      return (await loadTokenizerFromUrl(OURS_DIR(model))).encode(prompt);
    },
    async open(model) {
      const probe = await modelFetch()(`${EXPORT_DIR(model)}onnx/model.onnx`, { method: 'HEAD' });
      if (!probe.ok)
        throw new PeerExportMissing(`${EXPORT_DIR(model)}onnx/model.onnx is missing (HTTP ${probe.status}); ${exportHint(model)}`);
      return openRunners([
        async () => oursRunner(await loadDecoderFromUrl(OURS_DIR(model), backend), 'committed'),
        async () => oursRunner(await loadDecoderFromUrl(EXPORT_DIR(model), backend), 'export'),
        () =>
          loadTheirs(
            () => AutoModelForCausalLM.from_pretrained(model, { device: 'webgpu', dtype: 'fp32' }),
            `${EXPORT_DIR(model)} on WebGPU`,
          ),
      ]);
    },
    close: () => backend.ctx.device.destroy(),
  };
}

/** One engine's run for bench:realsize: `modelUrl` is ours' model folder, `onnxRoot` + `model` transformers.js' export. */
export interface PageRealsizeRequest {
  engine: 'ours' | 'transformers.js';
  /** transformers.js' execution provider in the page. */
  device?: 'webgpu' | 'wasm';
  model: string;
  modelUrl: string;
  onnxRoot: string;
  ids: number[];
  newTokens: number;
  latent: number;
}

const pageGpuBytes = trackGpuBuffers();

async function realsize(req: PageRealsizeRequest): Promise<RealsizeRun & { adapter: string }> {
  if (req.engine === 'ours') {
    const worker = new Worker(new URL('./realsize-worker.ts', import.meta.url), { type: 'module', name: 'realsize' });
    try {
      const { modelUrl, ids, newTokens, latent } = req;
      return await wrap<RealsizeWorkerApi>(worker).run({ modelUrl, ids, newTokens, latent });
    } finally {
      worker.terminate();
    }
  }
  tjsEnv.allowLocalModels = true;
  tjsEnv.allowRemoteModels = false;
  tjsEnv.localModelPath = req.onnxRoot;
  tjsEnv.useBrowserCache = false;
  tjsEnv.backends.onnx.wasm!.wasmPaths = { wasm: ortWasmUrl };
  pageGpuBytes?.reset();
  const device = req.device ?? 'webgpu';
  const r = await runTheirsOnce(
    () => AutoModelForCausalLM.from_pretrained(req.model, { device, dtype: 'fp32' }).catch((e: Error) => {
      throw new RmasError('PeerEngineFailed', `transformers.js could not load ${req.onnxRoot}${req.model} (${device}): ${e.message}`);
    }),
    req.ids, req.newTokens,
  );
  return { ...r, gpuPeakBytes: device === 'webgpu' ? pageGpuBytes?.peak() ?? null : null, adapter: device };
}

// ---------------------------------------------------------------- the page
declare global {
  interface Window {
    rmasPeer?: {
      run(opts?: Partial<PeerOptions>): Promise<PeerReport>;
      realsize(req: PageRealsizeRequest): Promise<RealsizeRun & { adapter: string }>;
    };
  }
}

const q = new URLSearchParams(location.search);
const app = document.getElementById('app')!;
app.innerHTML = `
<style>
  body { font: 14px/1.45 system-ui, sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; }
  h1 { font-size: 1.3rem; } form { display: flex; gap: 0.8rem; align-items: center; margin: 0.8rem 0; flex-wrap: wrap; }
  table { border-collapse: collapse; width: 100%; } th, td { padding: 0.15rem 0.5rem; border-bottom: 1px solid #eee; text-align: right; }
  th:nth-child(-n+4), td:nth-child(-n+4) { text-align: left; } td { font-variant-numeric: tabular-nums; } ` +
  `.muted { color: #777; } .bad { color: #a11; }
</style>
<h1>Peer benchmark: our engine and transformers.js on WebGPU</h1>
<p class="muted">The same tiny models, prompt ids and adapter; greedy decoding; medians of interleaved runs. ` +
  `transformers.js runs ONNX Runtime
Web's WebGPU execution provider on an ONNX export of each model (scripts/peer/export_onnx.py); "ours export" loads that export's f32
weights, "ours committed" the model as committed. On a CPU adapter the figures say nothing about GPU speed.</p>
<form>
  <label>models <input name="models" size="24" /></label>
  <label>decode tokens <input name="tokens" size="4" /></label>
  <label>repetitions <input name="reps" size="3" /></label>
  <label>prompt <input name="prompt" size="24" /></label>
  <button>run</button>
</form>
<p id="status" class="muted"></p>
<table><thead></thead><tbody></tbody></table>
<ul id="checks"></ul>
<p class="muted"><a href="/bench.html">kernel benchmarks</a> · <a href="/">start page</a></p>`;

const form = app.querySelector('form')!;
const field = (n: string) => form.elements.namedItem(n) as HTMLInputElement;
const status = app.querySelector<HTMLParagraphElement>('#status')!;
const thead = app.querySelector('thead')!;
const tbody = app.querySelector('tbody')!;
const checksList = app.querySelector<HTMLUListElement>('#checks')!;
field('models').value = q.get('models') ?? PEER_DEFAULTS.models.join(',');
field('tokens').value = q.get('tokens') ?? String(PEER_DEFAULTS.tokens);
field('reps').value = q.get('reps') ?? String(PEER_DEFAULTS.reps);
field('prompt').value = q.get('prompt') ?? PEER_DEFAULTS.prompt;
const tr = thead.insertRow();
for (const h of peerCells([])[0]) tr.append(Object.assign(document.createElement('th'), { textContent: h }));

function formOptions(over: Partial<PeerOptions>): PeerOptions {
  const num = (n: string, min: number, dflt: number) => Math.max(min, Math.floor(Number(field(n).value)) || dflt);
  return {
    models: field('models').value.split(',').map((s) => s.trim()).filter(Boolean),
    tokens: num('tokens', 2, PEER_DEFAULTS.tokens),
    reps: field('reps').value.trim() === '0' ? 0 : num('reps', 1, PEER_DEFAULTS.reps),
    prompt: field('prompt').value || PEER_DEFAULTS.prompt,
    ...over,
  };
}

let running = false;
/** Runs the comparison with the form's settings (`over` wins) and fills the table; window.rmasPeer.run for bench:peer. */
async function run(over: Partial<PeerOptions> = {}): Promise<PeerReport> {
  if (running) throw new RmasError('PeerBusy', 'a peer run is already in progress on this page; wait for it to finish');
  running = true;
  tbody.replaceChildren();
  checksList.replaceChildren();
  status.className = 'muted';
  let host: Awaited<ReturnType<typeof browserHost>> | undefined;
  try {
    host = await browserHost();
    const addRow = (r: PeerRow) => {
      const row = tbody.insertRow();
      for (const v of peerCells([r])[1]) row.insertCell().textContent = v;
    };
    const rep = await runPeer(host, formOptions(over), (m) => (status.textContent = m), addRow);
    status.textContent = `${rep.adapter}${rep.isFallbackAdapter ? ' (a fallback adapter: a CPU implementation, so the figures say nothing about GPU speed)' : ''} · ${rep.seconds.toFixed(1)} s`;
    for (const c of rep.checks) {
      const li = Object.assign(document.createElement('li'), { textContent: checkLine(c) });
      if (!c.equal) li.className = 'bad';
      checksList.append(li);
    }
    return rep;
  } catch (e) {
    status.textContent = `${(e as Error).name}: ${(e as Error).message}`;
    status.className = 'bad';
    throw e;
  } finally {
    host?.close();
    running = false;
  }
}

window.rmasPeer = { run, realsize };
form.addEventListener('submit', (e) => {
  e.preventDefault();
  run().catch(() => {});
});
if (q.get('run') === '1') run().catch(() => {});
