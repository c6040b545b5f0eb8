/**
 * `npx tsx bench/gemv-cut.ts [--models qwen3-tiny,llama-tiny] [--tokens 32] [--reps 5]`: the decode GEMVs' two cuts
 * (ContextOptions.gemv: wide, narrow) side by side on this process's adapter, interleaved: greedy ids (must match),
 * decode tokens/s (medians) and the work per token (dispatches, workgroups, invocations). Node runs Dawn on whatever
 * VK_ICD_FILENAMES names (lavapipe by default, through scripts/lavapipe-env.js; SwiftShader with Chromium's ICD).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { openCheckpoint } from '../src/formats/safetensors-sharded';
import { parseDecoderConfig } from '../src/model/config';
import { Decoder } from '../src/model/decoder';
import { generate } from '../src/model/generate';
import { loadDecoderWeights } from '../src/model/weights';
import { WebGpuBackend } from '../src/tensor/webgpu';
import type { GemvSizing } from '../src/gpu/context';

const { values: args } = parseArgs({
  options: {
    models: { type: 'string', default: 'qwen3-tiny,llama-tiny' },
    tokens: { type: 'string', default: '32' },
    reps: { type: 'string', default: '5' },
  },
});
const PROMPT = [72, 101, 108, 108, 111, 44, 32, 119];
const cuts: GemvSizing[] = ['wide', 'narrow'];
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

for (const name of args.models!.split(',')) {
  const dir = `models/tiny/${name}`;
  const config = parseDecoderConfig(readFileSync(`${dir}/config.json`, 'utf8'));
  const runs = [];
  for (const gemv of cuts) {
    const backend = await WebGpuBackend.create({ gemv });
    const model = new Decoder(config, await loadDecoderWeights(config, await openCheckpoint(dir), backend));
    runs.push({ gemv, backend, model, tps: [] as number[], ids: [] as number[], per: '' });
  }
  for (let rep = -1; rep < Number(args.reps); rep++) {
    for (const r of runs) {
      const g = await generate(r.model, {
        inputIds: PROMPT, maxNewTokens: Number(args.tokens), sampling: { greedy: true }, eosTokenIds: [],
      });
      if (rep < 0) {
        r.ids = g.tokens;
        const c = g.decodeCounters!;
        const f = (v: number) => (v / c.steps).toFixed(0);
        r.per = `dispatches ${f(c.dispatches)}, workgroups ${f(c.workgroups)}, invocations ${f(c.invocations)}`;
      } else r.tps.push(g.decodeTokensPerSec);
    }
  }
  const rep = runs[0].backend.ctx.report;
  console.log(`${name} on ${rep.description || rep.architecture}: ids ${runs[0].ids.join() === runs[1].ids.join() ? 'equal' : 'DIFFER'}`);
  for (const r of runs) {
    const spread = r.tps.map((t) => t.toFixed(0)).join(' ');
    console.log(`  ${r.gemv.padEnd(6)} decode ${median(r.tps).toFixed(1)} tok/s (${spread}); per token: ${r.per}`);
  }
  console.log(`  narrow/wide ${(median(runs[1].tps) / median(runs[0].tps)).toFixed(2)}×`);
  for (const r of runs) { r.model.weights.dispose(); r.backend.ctx.device.destroy(); }
}
