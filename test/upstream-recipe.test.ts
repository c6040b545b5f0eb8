/**
 * Upstream's recipe, for every style, as its documentation writes the command lines (issue 22): train_inner.py for
 * each role, train_outer.py on the trained roles (role-named flags for distillation and deliberation, as upstream's
 * training guide spells them), then run.py evaluating the trained system with --ckpt_override ROLE=<inner save_dir>
 * and outer=<outer save_dir>; only `python …py` is replaced by `rmas …`, and the model paths point at the tiny
 * upstream-layout systems (scripts/tiny-system/tiny-mas.ts). Each command exits 0 and leaves what upstream's leaves: a whole role
 * repository per inner save_dir (weights identical to the source), the outer links with their manifests, and a
 * result file with a record per question. In-process (main), CPU, one step each.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { getStyle, STYLE_NAMES } from '../src/mas/styles';
import { buildTinySystem, type TinyStyle } from '../scripts/tiny-system/tiny-mas';
import { rmasInProcess as rmas } from './util/rmas';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-recipe-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A row holding every style's columns (upstream's data files each hold one style's). */
const ROW = {
  question: 'What is 3 + 4?', plan: 'Step 1: add.', refined_plan: 'Step 1: add 3 and 4.', answer: '7. \\boxed{7}',
  distill_expert: 'Step 1: add the numbers.', distill_learner: 'It is 7. \\boxed{7}',
  hie_math_expert: '3 + 4 = 7.', hie_code_expert: 'print(3 + 4)', hie_science_expert: 'Counting gives 7.',
  deliberation_reflector: 'Check by counting.', deliberation_toolcaller: '7 \\boxed{7}',
};
const data = join(tmp, 'train.jsonl');
writeFileSync(data, `${JSON.stringify(ROW)}\n${JSON.stringify({ ...ROW, question: 'What is 5 + 4?', answer: '9. \\boxed{9}' })}\n`);
const keys = join(tmp, 'tavily_keys.txt');
writeFileSync(keys, '# one Tavily key per line\ntvly-recipe-test-key\n');
const evalFile = join(tmp, 'eval.jsonl');
writeFileSync(evalFile, `${JSON.stringify({ question: 'What is 2 + 3?', answer: '5' })}\n`);

/** train_outer.py's spelling of agent i's flag: role-named where upstream's guide names them. */
const agentFlag = (style: string, role: string, i: number, what: 'model_name_or_path' | 'inner_aligner_path') =>
  style === 'distillation' || style === 'deliberation' ? `--${role}_${what}` : `--agent${i + 1}_${what}`;

describe('upstream\'s recipe, command line by command line', () => {
  it.each(STYLE_NAMES as TinyStyle[])('%s: train_inner per role, train_outer, run with the trained links', async (style) => {
    const sys = await buildTinySystem(style, join(tmp, style), { taskScoped: false });
    const spec = getStyle(style);
    const inner: Record<string, string> = {};
    for (const r of spec.roles) {
      const save = join(tmp, `${style}-inner-${r.key}`);
      const res = await rmas('train-inner', '--model_name_or_path', sys.roles[r.key]!, '--mas_design', style, '--mas_role', r.key,
        '--dataset_name', data, '--save_dir', save, '--max_steps', '1', '--batch_size', '2', '--adapter_lr', '5e-4',
        '--warmup_steps', '0', '--enable_thinking', '0', '--dtype', 'bfloat16', '--backend', 'cpu');
      expect(res.code, `${style} ${r.key}: ${res.err}`).toBe(0);
      // a whole role repository: the model beside the link, the weights those of the source
      const files = readdirSync(save);
      for (const f of ['config.json', 'tokenizer.json', 'model.safetensors', 'adapter.pt', 'adapter_config.json', 'train_args.json'])
        expect(files, `${style} ${r.key}`).toContain(f);
      expect(readFileSync(join(save, 'model.safetensors')).equals(readFileSync(join(sys.roles[r.key]!, 'model.safetensors')))).toBe(true);
      inner[r.key] = save;
    }
    const outer = join(tmp, `${style}-outer`);
    const agents = spec.roles.flatMap((r, i) => [agentFlag(style, r.key, i, 'model_name_or_path'), inner[r.key]!,
      agentFlag(style, r.key, i, 'inner_aligner_path'), join(inner[r.key]!, 'adapter.pt')]);
    const trained = await rmas('train-outer', '--style', style, ...agents, '--dataset_name', data, '--save_dir', outer,
      '--max_steps', '1', '--batch_size', '2', '--outer_lr', '5e-4', '--num_recursive_rounds', '2', '--max_latent_tokens', '4',
      '--warmup_steps', '0', '--enable_thinking', '0', '--backend', 'cpu');
    expect(trained.code, `${style} outer: ${trained.err}`).toBe(0);
    const outerFiles = readdirSync(outer);
    for (const l of spec.links) expect(outerFiles, style).toContain(`${l.key}.pt`);
    expect(outerFiles).toContain('outerlink_config.json');
    // run.py's documented line (Release 1 flags), the trained roles and links given as upstream's recipe gives them
    const results = join(tmp, `${style}-results.jsonl`);
    const run = await rmas('run', '--style', style, '--dataset', evalFile, '--batch_size', '32', '--temperature', '0.6', '--top_p', '0.95',
      '--seed', '42', '--trust_remote_code', '1', '--device', 'cpu', '--num_recursive_rounds', '1', '--latent_length', '2',
      '--max_new_tokens', '4', '--result_jsonl', results, '--tavily_keys_file', keys,
      ...spec.roles.flatMap((r) => ['--ckpt_override', `${r.key}=${inner[r.key]}`]), '--ckpt_override', `outer=${outer}`);
    expect(run.code, `${style} run: ${run.err}`).toBe(0);
    expect(run.out).toMatch(/^accuracy=\d+\.\d\d%\n$/);
    const recs = readFileSync(results, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; batch_size?: number });
    expect(recs.map((r) => r.type)).toEqual(['config', 'sample', 'summary']);
    expect(recs[0]!.batch_size).toBe(32);
    for (const text of [run.out, run.err, readFileSync(results, 'utf8')]) expect(text).not.toContain('tvly-recipe-test-key');
  }, 300_000);
});
