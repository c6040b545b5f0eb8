/**
 * The bench page (bench.html): runs bench/all.ts in the engine worker, the same harness as
 * `npm run bench`, and fills a table as results arrive. Query: ?size=tiny|full&filter=..&backend=webgpu|cpu&run=1
 */
import { proxy } from 'comlink';
import type { BenchResult } from '../../workers/protocol';
import { startEngine } from './engine';

const q = new URLSearchParams(location.search);
const engine = startEngine();
const app = document.getElementById('app')!;
app.innerHTML = `
<style>
  body { font: 14px/1.45 system-ui, sans-serif; max-width: 60rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; }
  h1 { font-size: 1.3rem; } form { display: flex; gap: 0.8rem; align-items: center; margin: 0.8rem 0; }
  table { border-collapse: collapse; width: 100%; } th, td { padding: 0.15rem 0.5rem; border-bottom: 1px solid #eee; text-align: right; }
  th:first-child, td:first-child { text-align: left; } td { font-variant-numeric: tabular-nums; } ` +
  `.muted { color: #777; } .bad { color: #a11; }
</style>
<h1>Kernel benchmarks</h1>
<p id="adapter" class="muted">asking the engine worker…</p>
<form>
  <label>size <select name="size"><option>tiny</option><option>full</option></select></label>
  <label>backend <select name="backend"><option>webgpu</option><option>cpu</option></select></label>
  <label>filter <input name="filter" size="16" /></label>
  <button>run</button>
  <span id="status" class="muted"></span>
</form>
<table><thead><tr><th>case</th><th>ms/iter</th><th>GFLOP/s</th><th>GB/s</th><th>tokens/s</th></tr></thead><tbody></tbody></table>
<p class="muted"><a href="/peer.html">peer benchmark: ours against transformers.js</a> · <a href="/">start page</a></p>`;

const form = app.querySelector('form')!;
const tbody = app.querySelector('tbody')!;
const status = app.querySelector<HTMLSpanElement>('#status')!;
const field = (n: string) => form.elements.namedItem(n) as HTMLInputElement | HTMLSelectElement;
field('size').value = q.get('size') === 'tiny' ? 'tiny' : 'full';
field('backend').value = q.get('backend') === 'cpu' ? 'cpu' : 'webgpu';
field('filter').value = q.get('filter') ?? '';

const fmt = (v: number | null) => (v === null || !Number.isFinite(v) ? '–' : v >= 100 ? v.toFixed(0) : v.toPrecision(3));

function addRow(r: BenchResult) {
  const tr = tbody.insertRow();
  const cell = (text: string, cls = '') => Object.assign(tr.insertCell(), { textContent: text, className: cls });
  cell(r.name);
  if (r.error) {
    const td = cell(`error: ${r.error}`, 'bad');
    td.colSpan = 4;
    td.style.textAlign = 'left';
  } else {
    cell(fmt(r.msPerIter));
    cell(fmt(r.gflops));
    cell(fmt(r.gbps));
    cell(r.tokensPerSec == null ? '' : fmt(r.tokensPerSec));
  }
}

engine.api.adapterReport().then(
  (r) => {
    const name = [r.vendor, r.architecture, r.description].filter(Boolean).join(' · ') || 'unknown adapter';
    document.getElementById('adapter')!.textContent =
      `${name}${r.isFallback ? ' (fallback adapter: a CPU implementation, so the figures say nothing about GPU speed)' : ''}`;
  },
  (e: Error) => {
    document.getElementById('adapter')!.textContent = `WebGPU is not available (${e.message}); only the cpu backend can run.`;
    field('backend').value = 'cpu';
  },
);

let running = false;
async function run() {
  if (running) return;
  running = true;
  tbody.replaceChildren();
  const size = field('size').value as 'tiny' | 'full';
  const backend = field('backend').value as 'webgpu' | 'cpu';
  status.textContent = 'running…';
  try {
    const results = await engine.api.bench({ size, backend, filter: field('filter').value || undefined }, proxy(addRow));
    status.textContent = `${results.length} cases`;
  } catch (e) {
    status.textContent = `${(e as Error).name}: ${(e as Error).message}`;
  } finally {
    running = false;
  }
}

form.addEventListener('submit', (e) => {
  e.preventDefault();
  void run();
});
if (q.get('run') === '1') void run();
