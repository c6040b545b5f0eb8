#!/usr/bin/env node
// The long fuzz run (test/fuzz/): every reader with 20 times its default cases (FUZZ_SCALE, or FUZZ_CASES per reader),
// no time box, then a table of cases per reader. Extra arguments go to vitest (e.g. a file: test/fuzz/torch.test.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const report = join(root, '.cache', 'fuzz-report.jsonl');
mkdirSync(dirname(report), { recursive: true });
rmSync(report, { force: true });
const env = { ...process.env, FUZZ_REPORT: report };
if (!env.FUZZ_CASES && !env.FUZZ_SCALE) env.FUZZ_SCALE = '20';
const args = process.argv.slice(2);
const vitest = ['vitest', 'run', '--project', 'node', ...(args.length ? args : ['test/fuzz'])];
const r = spawnSync('npx', vitest, { cwd: root, env, stdio: 'inherit' });

const rows = existsSync(report) ? readFileSync(report, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
const head = ['reader', 'cases', 'ok', 'refused', 'failures', 'known', 'time'];
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const cells = rows.map((x) => [x.reader, x.cases, x.ok, x.refused, x.failures.length, x.known, seconds(x.ms)].map(String));
const total = rows.reduce((a, x) => [a[0] + x.cases, a[1] + x.ok, a[2] + x.refused, a[3] + x.failures.length, a[4] + x.known, a[5] + x.ms],
  [0, 0, 0, 0, 0, 0]);
cells.push(['all', ...total.slice(0, 5).map(String), seconds(total[5])]);
const width = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
const line = (c) => `| ${c.map((x, i) => (i ? x.padStart(width[i]) : x.padEnd(width[i]))).join(' | ')} |`;
console.log(`\nfuzz run (${env.FUZZ_CASES ? `FUZZ_CASES=${env.FUZZ_CASES}` : `FUZZ_SCALE=${env.FUZZ_SCALE}`}, seed ${env.FUZZ_SEED ?? 1})`);
const rule = `|${width.map((w, i) => (i ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
console.log([line(head), rule, ...cells.map(line)].join('\n'));
process.exit(r.status ?? 1);
