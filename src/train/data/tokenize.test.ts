import { beforeAll, describe, expect, it } from 'vitest';
import { buildTinyTokenizer, CHATML_TEMPLATE } from '../../../scripts/tiny-system/tokenizer.ts';
import { InvalidArgument } from '../../errors.ts';
import { DEFAULT_PROMPTS, userPrompt } from '../../mas/prompts.ts';
import { SLOTS } from '../../mas/slots.ts';
import { loadTokenizer, loadTokenizerFromDir, type Tokenizer } from '../../tokenizer/index.ts';
import { innerExample, leftTruncate, renderChatPair, stageExample, type StageExample } from './tokenize.ts';

let qwen: Tokenizer;
let llama: Tokenizer;
beforeAll(async () => {
  qwen = await loadTokenizerFromDir('models/tiny/qwen3-tiny');
  llama = await loadTokenizerFromDir('models/tiny/llama-tiny');
});
const tiny = buildTinyTokenizer({ merges: 200 });
/** ChatML without the empty think block, so that the prompt render is a prefix of the full one. */
const plain = loadTokenizer({ ...tiny, chatTemplateJinja: CHATML_TEMPLATE.replace(/\{%- if enable_thinking[\s\S]*?\{%- endif %\}/, '') });

const SYS = 'You are a helpful assistant.';
const chat = (sys: string, user: string) => `<|im_start|>system\n${sys}<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n`;
const GEN = '<|im_start|>assistant\n';
const THINK = '<think>\n\n</think>\n\n';
const enc = (tok: Tokenizer, s: string) => tok.encode(s, { addSpecialTokens: false });

const row = { question: 'What is 2+3?', plan: 'Step 1: add.', refined_plan: 'Step 1: add 2 and 3.', answer: 'It is \\boxed{5}.' };
const criticUser = userPrompt('chain', 'critic', 'first', { question: row.question, task: 'math', round: 1 });

describe('innerExample', () => {
  it('masks the first len(prompt_ids) positions and puts the slot text inline (Qwen3 tiny, think block)', () => {
    const user = criticUser.replace(SLOTS.planner, row.plan);
    expect(user).toContain(`Initial Plan:\n${row.plan}\n\n`);
    const promptIds = enc(qwen, chat(SYS, user) + GEN + THINK);
    const fullIds = enc(qwen, chat(SYS, user) + GEN + `${row.refined_plan}<|im_end|>\n`);
    const ex = innerExample(qwen, 'chain', 'critic', 'first', row, { task: 'math', maxLength: 4096 });
    if ('skip' in ex) throw new Error(ex.skip);
    expect(ex.ids).toEqual(fullIds);
    expect(ex.lossMask.indexOf(1)).toBe(promptIds.length);
    expect(ex.lossMask.slice(promptIds.length).every((m) => m === 1)).toBe(true);
    expect(ex.lossMask.length).toBe(fullIds.length);
    // the think block of the generation prompt is missing from the full render: masked by length anyway
    expect(ex.promptIsPrefix).toBe(false);
    expect(ex.ids.at(-2)).toBe(qwen.idOf('<|im_end|>'));
    expect(ex.lossMask.at(-2)).toBe(1);
  });

  it('masks exactly the assistant span, end-of-turn included, when the prompt is a prefix', () => {
    const ex = innerExample(plain, 'chain', 'solver', 'first', row, { task: 'math', maxLength: 4096 });
    if ('skip' in ex) throw new Error(ex.skip);
    const user = userPrompt('chain', 'solver', 'first', { question: row.question, task: 'math', round: 1 }).replace(
      SLOTS.refined,
      row.refined_plan,
    );
    const promptIds = enc(plain, chat(SYS, user) + GEN);
    expect(ex.promptIsPrefix).toBe(true);
    expect(ex.ids.slice(0, promptIds.length)).toEqual(promptIds);
    expect(ex.lossMask.indexOf(1)).toBe(promptIds.length);
    expect(plain.decode(ex.ids.filter((_, i) => ex.lossMask[i] === 1))).toBe(`${row.answer}<|im_end|>\n`);
  });

  it('right-truncates to maxLength and skips a row whose target is cut off', () => {
    const whole = innerExample(plain, 'chain', 'planner', 'first', row, { task: 'math', maxLength: 4096 });
    if ('skip' in whole) throw new Error(whole.skip);
    const p = whole.lossMask.indexOf(1);
    const cut = innerExample(plain, 'chain', 'planner', 'first', row, { task: 'math', maxLength: p + 3 });
    expect(cut).toEqual({ ids: whole.ids.slice(0, p + 3), lossMask: [...Array(p).fill(0), 1, 1, 1], promptIsPrefix: true });
    expect(innerExample(plain, 'chain', 'planner', 'first', row, { task: 'math', maxLength: p })).toEqual({ skip: 'target_truncated' });
    expect(innerExample(plain, 'chain', 'planner', 'first', row, { task: 'math', maxLength: 5 })).toEqual({ skip: 'target_truncated' });
  });

  it('a target no longer than the think block the prompt render adds is not_past_prompt, not truncated (Qwen3 tiny)', () => {
    const short = { ...row, plan: '5' };
    const full = innerExample(qwen, 'chain', 'planner', 'first', short, { task: 'math', maxLength: 4096 });
    // the whole chat (target and end of turn included) is shorter than the prompt with its think block
    expect(enc(qwen, `5<|im_end|>\n`).length).toBeLessThan(enc(qwen, THINK).length);
    expect(full).toEqual({ skip: 'target_not_past_prompt' });
    // cut short by max_length, the same row is truncated
    expect(innerExample(qwen, 'chain', 'planner', 'first', short, { task: 'math', maxLength: 10 })).toEqual({ skip: 'target_truncated' });
  });

  it('puts the three expert texts into the summarizer prompt, and uses the deliberation system prompt', () => {
    const hie = {
      question: 'Q?',
      hie_math_expert: 'math says 7',
      hie_code_expert: 'code says 7',
      hie_science_expert: 'science says 8',
      answer: '\\boxed{7}',
    };
    const ex = innerExample(llama, 'hie', 'summarizer', 'first', hie, { task: 'math', maxLength: 4096 });
    if ('skip' in ex) throw new Error(ex.skip);
    const text = llama.decode(ex.ids);
    expect(text).toContain(
      'Math expert information:\nmath says 7\n\nCode expert information:\ncode says 7\n\nScience expert information:\nscience says 8\n\n---',
    );
    expect(text.endsWith(`${GEN}\\boxed{7}<|im_end|>\n`)).toBe(true);
    const del = { question: 'Q?', deliberation_reflector: 'check it', deliberation_toolcaller: '<python>print(1)</python>' };
    const d = innerExample(plain, 'deliberation', 'toolcaller', 'first', del, { task: 'math', maxLength: 4096 });
    if ('skip' in d) throw new Error(d.skip);
    const dt = plain.decode(d.ids);
    expect(dt.startsWith(`<|im_start|>system\n${DEFAULT_PROMPTS.system.deliberation}<|im_end|>\n`)).toBe(true);
    expect(dt).toContain('Reflector signal:check it\n\n');
  });

  it('uses the row task and code interface, and skips rows it cannot render', () => {
    const code = { question: 'Add two numbers.', plan: 'Step 1: return a+b.', task_family: 'code', type: 'function', fn_name: 'add' };
    const ex = innerExample(plain, 'chain', 'planner', 'first', code, { task: 'math', maxLength: 4096 });
    if ('skip' in ex) throw new Error(ex.skip);
    expect(plain.decode(ex.ids)).toContain(
      'Implement and return the function `add` only.\nThe programming problem is:\nAdd two numbers.\n',
    );
    expect(innerExample(plain, 'chain', 'planner', 'first', { ...code, fn_name: undefined }, { task: 'math', maxLength: 4096 })).toEqual({
      skip: 'missing:fn_name',
    });
    expect(
      innerExample(plain, 'chain', 'critic', 'first', { question: 'Q', refined_plan: 'R' }, { task: 'math', maxLength: 4096 }),
    ).toEqual({ skip: 'missing:plan' });
    expect(
      innerExample(plain, 'chain', 'critic', 'first', { ...row, plan: `see ${SLOTS.feedback}` }, { task: 'math', maxLength: 4096 }),
    ).toEqual({
      skip: `slot_string_in_text:${SLOTS.feedback}`,
    });
    expect(() => innerExample(plain, 'chain', 'planner', 'feedback', row, { task: 'math', maxLength: 4096 })).toThrow(InvalidArgument);
  });
});

describe('renderChatPair', () => {
  it('merges the system text into the user turn for a template that refuses a system role, in both renders', () => {
    const t = loadTokenizer({
      ...tiny,
      chatTemplateJinja:
        "{%- for m in messages %}{%- if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{%- endif %}" +
        "[{{ m['role'] }}]{{ m['content'] }}{%- endfor %}{%- if add_generation_prompt %}[assistant]{%- endif %}",
    });
    expect(renderChatPair(t, 'S', 'U', 'T')).toEqual({ prompt: '[user]S\n\nU[assistant]', full: '[user]S\n\nU[assistant]T' });
    expect(renderChatPair(qwen, 'S', 'U', 'T')).toEqual({
      prompt: chat('S', 'U') + GEN + THINK,
      full: chat('S', 'U') + GEN + 'T<|im_end|>\n',
    });
  });
});

describe('stageExample', () => {
  it('cuts the prompt render at the slot and takes the gold turn as target (Qwen3 tiny)', () => {
    const ex = stageExample(qwen, 'chain', 'critic', 'first', row, { task: 'math' });
    if ('skip' in ex) throw new Error(ex.skip);
    const [before, after] = criticUser.split(SLOTS.planner) as [string, string];
    expect(before.endsWith('Initial Plan:\n')).toBe(true);
    const texts = [`<|im_start|>system\n${SYS}<|im_end|>\n<|im_start|>user\n${before}`, `${after}<|im_end|>\n${GEN}${THINK}`];
    expect(ex.slots).toEqual([SLOTS.planner]);
    expect(ex.pieces).toEqual(texts.map((t) => enc(qwen, t)));
    expect(ex.pieces.map((p) => qwen.decode(p)).join(SLOTS.planner)).toBe(chat(SYS, criticUser) + GEN + THINK);
    // the target is the gold text as it follows the generation prompt at inference, end of turn included
    expect(ex.target).toEqual(enc(qwen, `${row.refined_plan}<|im_end|>\n`));
    expect(ex.promptIsPrefix).toBe(false);
  });

  it('takes the tail of the full render when the prompt is a prefix', () => {
    const ex = stageExample(plain, 'chain', 'solver', 'first', row, { task: 'math' });
    if ('skip' in ex) throw new Error(ex.skip);
    expect(ex.promptIsPrefix).toBe(true);
    expect(plain.decode(ex.pieces[1]!).endsWith(`\\boxed{1}.<|im_end|>\n${GEN}`)).toBe(true);
    expect(plain.decode(ex.target)).toBe(`${row.answer}<|im_end|>\n`);
    expect(ex.target).toEqual(enc(plain, `${row.answer}<|im_end|>\n`));
  });

  it('handles three slots, feedback prompts and the llama folder', () => {
    const hie = { question: 'Q?', hie_math_expert: 'm', hie_code_expert: 'c', hie_science_expert: 's', answer: 'A.' };
    const ex = stageExample(llama, 'hie', 'summarizer', 'first', hie, { task: 'math' });
    if ('skip' in ex) throw new Error(ex.skip);
    expect(ex.slots).toEqual([SLOTS.hieMath, SLOTS.hieCode, SLOTS.hieScience]);
    expect(ex.pieces.slice(1, 3).map((p) => llama.decode(p))).toEqual([
      '\n\nCode expert information:\n',
      '\n\nScience expert information:\n',
    ]);
    expect(ex.target).toEqual(enc(llama, 'A.<|im_end|>\n'));
    const fb = stageExample(plain, 'chain', 'planner', 'feedback', row, { task: 'math', round: 3 });
    if ('skip' in fb) throw new Error(fb.skip);
    expect(fb.slots).toEqual([SLOTS.feedback]);
    expect(plain.decode(fb.pieces[0]!)).toContain('This is round 3.');
    expect(plain.decode(fb.pieces[0]!).endsWith('Feedback signal from the previous solver round:')).toBe(true);
    expect(plain.decode(fb.target)).toBe(`${row.plan}<|im_end|>\n`);
    const first = stageExample(plain, 'chain', 'planner', 'first', row, { task: 'math' });
    expect('skip' in first ? first.skip : first.pieces.length).toBe(1);
  });

  it('skips rows with missing fields or slot strings in the text', () => {
    expect(stageExample(plain, 'chain', 'solver', 'first', { question: 'Q', refined_plan: 'R' }, { task: 'math' })).toEqual({
      skip: 'missing:answer',
    });
    expect(stageExample(plain, 'chain', 'solver', 'first', { ...row, answer: SLOTS.refined }, { task: 'math' })).toEqual({
      skip: `slot_string_in_text:${SLOTS.refined}`,
    });
  });
});

describe('leftTruncate', () => {
  const ex: StageExample = { pieces: [[1, 2, 3, 4], [5, 6]], target: [7, 8], slots: [SLOTS.planner], promptIsPrefix: true };
  it('drops tokens from the start of the first piece only', () => {
    expect(leftTruncate(ex, [3], 11)).toBe(ex);
    expect(leftTruncate(ex, [3], 100)).toBe(ex);
    expect(leftTruncate(ex, [3], 9)).toEqual({ ...ex, pieces: [[3, 4], [5, 6]] });
    expect(leftTruncate(ex, [3], 7)).toEqual({ ...ex, pieces: [[], [5, 6]] });
    expect(leftTruncate(ex, [3], 6)).toEqual({ skip: 'sequence_too_long' });
    expect(leftTruncate(ex, [80], 87)).toEqual({ ...ex, pieces: [[2, 3, 4], [5, 6]] });
  });
  it('checks the slot lengths', () => {
    expect(() => leftTruncate(ex, [], 10)).toThrow('leftTruncate got 0 slot lengths for 1 slots');
    expect(() => leftTruncate(ex, [-1], 10)).toThrow(InvalidArgument);
  });
});
