/** Whether Dawn sees a GPU in this environment (bench:gpu and bench:realsize decide from it whether to use lavapipe). */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

/** Whether Dawn finds a GPU (not a CPU adapter) with the environment as it is: asked in a child, Dawn being per process. */
export function gpuAdapterVisible(): boolean {
  let url: string;
  try {
    url = `file://${createRequire(import.meta.url).resolve('webgpu')}`;
  } catch {
    return false;
  }
  const probe =
    `const m = await import(${JSON.stringify(url)}); const a = await m.create([]).requestAdapter({ powerPreference: 'high-performance' });
    const i = a?.info ?? {}; ` +
    "console.log(JSON.stringify(a ? { name: [i.vendor, i.architecture, i.description].join(' '), fallback: !!i.isFallbackAdapter } : null)); " +
    'process.exit(0);';
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { encoding: 'utf8', timeout: 60_000 });
  const last = r.stdout?.trim().split('\n').pop();
  try {
    const a = JSON.parse(last ?? 'null') as { name: string; fallback: boolean } | null;
    return !!a && !a.fallback && !/llvmpipe|lavapipe|swiftshader|softpipe/i.test(a.name);
  } catch {
    return false;
  }
}

