/**
 * `npm run bench [-- --size tiny|full] [--filter <substring>] [--backend webgpu|cpu|all] [--min-ms N]`
 * Times every case of bench/all.ts on the WebGPU adapter Dawn finds (and/or the CPU backend) and
 * prints ms/iter, GFLOP/s, GB/s (and tokens/s for model cases, peak device MB for cases that track it).
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';

// Dawn on lavapipe needs LD_LIBRARY_PATH set at process start: run this script again with it.
const env = lavapipeEnv();
if (env !== process.env) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}

const { formatTable, runBenches } = await import('./harness');
const { allBenches } = await import('./all');
const { CpuBackend } = await import('../src/tensor/cpu');
const { WebGpuBackend } = await import('../src/tensor/webgpu');
type Backend = import('../src/tensor/backend').Backend;
type AdapterReport = import('../src/gpu/device').AdapterReport;

const { values: args } = parseArgs({
  options: {
    size: { type: 'string', default: 'full' },
    filter: { type: 'string' },
    backend: { type: 'string', default: 'webgpu' },
    'min-ms': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (args.help) {
  console.log('usage: npm run bench -- [--size tiny|full] [--filter <substring>] [--backend webgpu|cpu|all] [--min-ms N]');
  process.exit(0);
}
if (args.size !== 'tiny' && args.size !== 'full') throw new Error(`--size ${args.size}: expected tiny or full`);
if (!['webgpu', 'cpu', 'all'].includes(args.backend!)) throw new Error(`--backend ${args.backend}: expected webgpu, cpu or all`);
const size = args.size;
const minMs = args['min-ms'] !== undefined ? Number(args['min-ms']) : undefined;

/** CPU adapters (lavapipe, SwiftShader) run WGSL correctly but say nothing about GPU speed. */
function isCpuAdapter(r: AdapterReport): boolean {
  return (
    r.isFallback || /llvmpipe|lavapipe|swiftshader|softpipe|\bcpu\b/i.test(`${r.vendor} ${r.architecture} ${r.device} ${r.description}`)
  );
}

function describeAdapter(r: AdapterReport): string {
  const feats = Object.entries(r.features).map(([f, on]) => `${f} ${on ? 'yes' : 'no'}`).join(', ');
  const L = r.limits;
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  const lines = [
    `adapter: ${[r.vendor, r.architecture, r.device, r.description].filter(Boolean).join(' | ') || 'unknown'}${r.isFallback ? ' (fallback adapter)' : ''}`,
    `features: ${feats}`,
    `limits: storage binding ${mib(L.maxStorageBufferBindingSize)}, buffer ${mib(L.maxBufferSize)}, workgroup storage ${L.maxComputeWorkgroupStorageSize} B, ` +
      `invocations/workgroup ${L.maxComputeInvocationsPerWorkgroup}, workgroups/dim ${L.maxComputeWorkgroupsPerDimension}`,
  ];
  if (isCpuAdapter(r)) {
    lines.push(
      'note: this is a CPU adapter (Mesa lavapipe or SwiftShader). The figures measure WGSL run on the CPU; they say nothing about GPU performance.',
    );
  }
  return lines.join('\n');
}

async function benchOn(backend: Backend) {
  console.log(`\n${backend.name}, size ${size}${args.filter ? `, filter "${args.filter}"` : ''}`);
  const results = await runBenches(backend, allBenches, { size, filter: args.filter, minMs }, (r) => {
    if (process.stderr.isTTY) process.stderr.write(`  ${r.name}\n`);
  });
  if (!results.length) console.log(`no bench case matches "${args.filter}"`);
  else console.log(formatTable(results));
  return results.filter((r) => r.error).length;
}

let failed = 0;
if (args.backend !== 'cpu') {
  const gpu = await WebGpuBackend.create();
  console.log(describeAdapter(gpu.ctx.report));
  failed += await benchOn(gpu);
  gpu.ctx.destroy();
}
if (args.backend !== 'webgpu') failed += await benchOn(new CpuBackend());
process.exitCode = failed ? 1 : 0;
