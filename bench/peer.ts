/**
 * `npm run bench:peer [-- --models qwen3-tiny,llama-tiny] [--tokens 64] [--reps 3] [--prompt TEXT] [--hosts browser,node] [--json]`
 * Our engine against transformers.js (ONNX Runtime's WebGPU EP) on the same tiny models, prompt ids and adapter:
 * greedy ids compared, then prefill and decode tokens/s, interleaved runs, medians, the ratio ours/theirs.
 * - browser: peer.html in headless Chromium (SwiftShader), driven through the Vite dev server (bench/peer-page.ts);
 * - node: Dawn in Node for ours, onnxruntime-node's WebGPU EP for theirs, on Mesa lavapipe (bench/peer-node.ts).
 * Builds the ONNX exports first when missing or stale (bench/peer-export.ts). Exits 1 when greedy ids differ.
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';

// Dawn and onnxruntime-node on lavapipe need LD_LIBRARY_PATH set at process start: run this script again with it.
const env = lavapipeEnv();
if (env !== process.env) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}

const { PEER_DEFAULTS, checkLine, peerCells, runPeer } = await import('../src/ui/peer-run');
type PeerReport = import('../src/ui/peer-run').PeerReport;
const { ensurePeerExports } = await import('./peer-export');
const { RmasError } = await import('../src/errors');

const { values: args } = parseArgs({
  options: {
    models: { type: 'string', default: PEER_DEFAULTS.models.join(',') },
    tokens: { type: 'string', default: String(PEER_DEFAULTS.tokens) },
    reps: { type: 'string', default: String(PEER_DEFAULTS.reps) },
    prompt: { type: 'string', default: PEER_DEFAULTS.prompt },
    hosts: { type: 'string', default: 'browser,node' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  },
});
if (args.help) {
  console.log('usage: npm run bench:peer -- [--models a,b] [--tokens 64] [--reps 3] [--prompt TEXT] [--hosts browser,node] [--json]');
  process.exit(0);
}
const int = (name: string, v: string, min: number) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} ${v}: expected an integer >= ${min}`);
  return n;
};
const opts = {
  models: args.models!.split(',').map((s) => s.trim()).filter(Boolean),
  tokens: int('tokens', args.tokens!, 2),
  reps: int('reps', args.reps!, 0),
  prompt: args.prompt!,
};
const hosts = args.hosts!.split(',').map((s) => s.trim());
for (const h of hosts) if (h !== 'browser' && h !== 'node') throw new Error(`--hosts ${args.hosts}: expected browser, node or both`);
const say = (line: string) => (args.json ? process.stderr : process.stdout).write(`${line}\n`);

/** Both hosts' reports; a named error (a missing export, a failing engine) ends the command with its message. */
async function measure(): Promise<PeerReport[]> {
  ensurePeerExports(opts.models, say);
  const reports: PeerReport[] = [];
  if (hosts.includes('browser')) {
    const { openPeerPage } = await import('./peer-page');
    say('browser: peer.html in headless Chromium');
    const page = await openPeerPage({ log: say });
    try {
      reports.push(await page.run(opts));
    } finally {
      await page.close();
    }
  }
  if (hosts.includes('node')) {
    const { nodeHost } = await import('./peer-node');
    say('node: Dawn (ours) and onnxruntime-node WebGPU (transformers.js)');
    const host = await nodeHost();
    try {
      reports.push(await runPeer(host, opts));
    } finally {
      host.close();
    }
  }
  return reports;
}

let reports: PeerReport[];
try {
  reports = await measure();
} catch (e) {
  const err = e as Error;
  // a page's error arrives as 'page.evaluate: <its name>: <its message>', with the page's stack after it
  if (err instanceof RmasError) console.error(`${err.name}: ${err.message}`);
  else console.error(err.message.startsWith('page.evaluate: ') ? err.message.slice('page.evaluate: '.length) : err.stack ?? String(err));
  process.exit(1);
}
const rows = reports.flatMap((r) => r.rows);
const checks = reports.flatMap((r) => r.checks);
if (args.json) {
  console.log(JSON.stringify({ options: opts, reports }, null, 1));
} else {
  const cells = peerCells(rows);
  const width = cells[0].map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i < 4 ? c.padEnd(width[i]) : c.padStart(width[i]))).join('  ');
  console.log(
    `\nprompt ${JSON.stringify(opts.prompt)}; 1 + ${opts.tokens} greedy tokens; medians of ${opts.reps} interleaved runs per engine`,
  );
  console.log(line(cells[0]));
  for (const r of cells.slice(1)) console.log(line(r));
  for (const c of checks) console.log(checkLine(c));
  for (const r of reports) {
    if (r.isFallbackAdapter || /swiftshader|llvmpipe|lavapipe/i.test(r.adapter)) {
      console.log(`note: ${r.adapter} is a CPU adapter; its figures say nothing about GPU speed.`);
    }
  }
}
if (checks.some((c) => !c.equal)) process.exit(1);
