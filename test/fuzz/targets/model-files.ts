/**
 * Fuzz targets for a model folder's small files: config.json (parseDecoderConfig), generation_config.json
 * (parseGenerationConfig) and the tokenizer files (loadTokenizerFromDir: tokenizer.json, tokenizer_config.json,
 * chat_template.jinja / .json), seeded from the tiny models' own files.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_LIMITS, parseDecoderConfig } from '../../../src/model/config';
import { parseGenerationConfig } from '../../../src/model/generate';
import { loadTokenizerFromDir } from '../../../src/tokenizer/dir';
import { showValue } from '../../../src/util/show';
import type { FuzzTarget } from '../harness';
import { mutateJsonText, pick } from '../mutate';
import {
  type Files, ROOT, enc, expectThat, fileCuts, filesKey, filesSize, jsonBoundaries, jsonFileTarget, mutateOneFile, repoFile,
} from './common';

/** Every config.json / generation_config.json of the committed tiny models. */
function modelFiles(name: string): Uint8Array[] {
  const dirs = readdirSync(join(ROOT, 'models/tiny'), { withFileTypes: true }).filter((d) => d.isDirectory() && /-tiny$/.test(d.name));
  const roles = ['system/planner', 'system/critic', 'system/solver', 'distillation/expert', 'distillation/learner'];
  return [...dirs.map((d) => d.name), ...roles].map((d) => repoFile(`models/tiny/${d}/${name}`));
}

const CONFIG = 'fuzzmodel/config.json';

export const config = jsonFileTarget({
  name: 'config.json',
  label: CONFIG,
  cuts: 30,
  seeds: () => modelFiles('config.json'),
  run: (b) => {
    const c = parseDecoderConfig(new TextDecoder().decode(b), CONFIG);
    // every size within the limits, and the per-layer lists as long as the layers
    expectThat(c.layers <= CONFIG_LIMITS.num_hidden_layers! && c.windowLayers.length === c.layers && c.linearLayers.length === c.layers,
      `${c.layers} layers, lists of ${c.windowLayers.length} and ${c.linearLayers.length}`);
    expectThat(c.hidden <= CONFIG_LIMITS.hidden_size! && c.vocabSize <= CONFIG_LIMITS.vocab_size! && Number.isInteger(c.headDim),
      `sizes hidden ${c.hidden}, vocab ${c.vocabSize}, head_dim ${c.headDim}`);
    expectThat(c.rmsEps > 0 && c.rmsEps < 1 && c.rope.theta > 0, `rms_norm_eps ${c.rmsEps}, rope_theta ${c.rope.theta}`);
    return showValue(c, 100_000); // rope_scaling is kept as the file gives it, however deep
  },
});

const GEN = 'fuzzmodel/generation_config.json';

export const generationConfig = jsonFileTarget({
  name: 'generation_config.json',
  label: GEN,
  cuts: 15,
  seeds: () => [...modelFiles('generation_config.json'), enc('{"do_sample": false}'), enc('{}')],
  run: (b) => {
    const g = parseGenerationConfig(new TextDecoder().decode(b), [1, 2], GEN);
    expectThat(g.eosTokenIds.every((x) => typeof x === 'number'), `eos ids ${String(g.eosTokenIds)}`);
    return showValue(g, 100_000);
  },
});

// ---- tokenizer files

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', 'chat_template.json'];

function tokenizerSeeds(): Files[] {
  const folder = (dir: string): Files => {
    const names = readdirSync(join(ROOT, dir)).filter((n) => TOKENIZER_FILES.includes(n));
    return Object.fromEntries(names.map((n) => [n, repoFile(`${dir}/${n}`)]));
  };
  const critic = folder('models/tiny/system/critic');
  // the template as chat_template.json, as newer transformers save it
  const asJson: Files = { ...folder('models/tiny/qwen3-tiny'),
    'chat_template.json': enc(JSON.stringify({ chat_template: new TextDecoder().decode(critic['chat_template.jinja']) })) };
  return [folder('models/tiny/qwen3-tiny'), critic, folder('models/tiny/llama-tiny'), asJson];
}

/** Template mutations: Jinja syntax cut or swapped, loops and recursion, names of missing variables. */
function mutateTemplate(rng: Parameters<FuzzTarget<Files>['mutate']>[0], b: Uint8Array): Uint8Array {
  const s = new TextDecoder().decode(b);
  const snippets = ['{%', '%}', '{{', '}}', '{% endfor %}', '{% for m in messages %}{{ m.nope.deeper }}', '{{ raise_exception("x") }}',
    '{% for i in range(100000) %}x{% endfor %}', '{{ messages * 1000 }}', '{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}', '\u0000'];
  const at = rng.int(s.length + 1);
  return enc(rng.int(2) ? s.slice(0, at) + pick(rng, snippets) + s.slice(at) : s.slice(0, at));
}

export const tokenizer: FuzzTarget<Files> = {
  name: 'tokenizer',
  seeds: tokenizerSeeds,
  truncations: (f) => fileCuts(f, (b) => jsonBoundaries(b, 8), 16),
  mutate: (rng, f) => mutateOneFile(rng, f, (r, b, n) => (n.endsWith('.jinja') ? mutateTemplate(r, b) : mutateJsonText(r, b))),
  labels: (_f, ctx) => [ctx.dir],
  size: filesSize,
  key: filesKey,
  // transformers.js builds its vocabulary maps from the parsed JSON
  allocFactor: 256,
  run: async (files, ctx) => {
    for (const [n, b] of Object.entries(files)) writeFileSync(join(ctx.dir, n), b);
    const tok = await loadTokenizerFromDir(ctx.dir);
    const ids = tok.encode('What is 12 + 30? Answer: 42.');
    expectThat(ids.every((x) => Number.isInteger(x) && x >= 0 && x < Math.max(tok.vocabSize, 1)), `ids ${ids.slice(0, 20).join(',')}`);
    const text = tok.decode(ids, { skipSpecialTokens: true });
    const chat = tok.chatTemplate === null ? '' : tok.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true });
    return `${tok.vocabSize}|${ids.join(',')}|${text}|${chat}`;
  },
  files: (f) => f,
};
