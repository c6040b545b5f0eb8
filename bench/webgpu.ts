/**
 * `npm run test:webgpu` (bench/webgpu.ts): the WebGPU backend on the adapter Dawn finds, for a machine with a real
 * GPU (the test suite runs the same checks on the CPU adapters, lavapipe and SwiftShader):
 *   (a) every parity case of src/kernels/cases.ts against the CPU reference, each case's own tolerance;
 *   (b) the tiny models (models/tiny) against their torch golden files: hidden, logits, d L / d inputsEmbeds, bound 1e-4.
 * Dawn uses the system's Vulkan driver; VK_ICD_FILENAMES (or VK_DRIVER_FILES) picks another. Exit 1 when a check fails.
 * RMAS_WEBGPU_CASES=<regex> runs the parity cases whose "group/name" matches.
 */
import { allCases } from '../src/kernels/cases';
import { CpuBackend } from '../src/tensor/cpu';
import { WebGpuBackend } from '../src/tensor/webgpu';
import { newRng, type ParityEnv } from '../src/kernels/workbench/parity';
import { TINY_GOLDEN_MODELS, formatGoldenErrors, tinyGoldenErrors } from '../src/testing/tiny-golden';

const log = (s: string) => process.stdout.write(`${s}\n`);
const failures: string[] = [];
const gpu = await WebGpuBackend.create();
const r = gpu.ctx.report;
const f16 = gpu.ctx.hasFeature('shader-f16');
log(
  `adapter: ${[r.vendor, r.architecture, r.device, r.description].filter(Boolean).join(' | ')}${r.isFallback ? ' (fallback adapter)' : ''}`,
);
log(`features: ${Object.entries(r.features).map(([f, on]) => `${f} ${on ? 'yes' : 'no'}`).join(', ')}`);

const t0 = performance.now();
const pick = process.env.RMAS_WEBGPU_CASES ? new RegExp(process.env.RMAS_WEBGPU_CASES) : null;
let passed = 0;
let total = 0;
for (const { group, cases } of allCases) {
  for (const [i, c] of cases.entries()) {
    if (pick && !pick.test(`${group}/${c.name}`)) continue;
    total++;
    const env: ParityEnv = { gpu, cpu: CpuBackend.reference(), rng: newRng(1000 + i), f16 };
    try {
      await c.run(env);
      await gpu.sync();
      passed++;
    } catch (e) {
      failures.push(`parity ${group}/${c.name}: ${(e as Error).name}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
}
log(`(a) parity (shader-f16 ${f16 ? 'yes' : 'no'}): ${passed}/${total} cases passed`);

for (const name of TINY_GOLDEN_MODELS) {
  try {
    const err = await tinyGoldenErrors(gpu, name);
    log(`(b) ${name}: ${formatGoldenErrors(err)}`);
    for (const [k, v] of Object.entries(err))
      if (!(v < 1e-4)) failures.push(`golden ${name}: ${k} off by ${v.toExponential(2)} (bound 1e-4)`);
  } catch (x) {
    failures.push(`golden ${name}: ${(x as Error).name}: ${(x as Error).message.split('\n')[0]}`);
  }
}
log(`${((performance.now() - t0) / 1000).toFixed(1)} s`);
for (const f of failures) log(`FAIL ${f}`);
log(failures.length ? `${failures.length} failure(s)` : 'all webgpu checks passed');
process.exit(failures.length ? 1 : 0);
