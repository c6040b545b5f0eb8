import { describe, expect, it } from 'vitest';
import { PromptSlotMissing, TokenizerError } from '../errors.ts';
import { buildTinyTokenizer } from '../../scripts/tiny-system/tokenizer.ts';
import { SLOTS } from '../mas/slots.ts';
import { loadTokenizer, renderChat, renderWithSlots, splitAtSlots } from './index.ts';

const tiny = buildTinyTokenizer({ merges: 200 });
const tok = loadTokenizer(tiny);
const withTemplate = (chatTemplateJinja: string) => loadTokenizer({ ...tiny, chatTemplateJinja });

describe('renderChat', () => {
  it('renders system + user with the generation prompt and thinking off (Qwen3 empty think block)', () => {
    expect(renderChat(tok, 'You are a helpful assistant.', 'Hi')).toBe(
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
  });

  it('merges the system text into the user turn when the template refuses a system role', () => {
    const t = withTemplate(
      "{%- for m in messages %}{%- if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{%- endif %}" +
        "[{{ m['role'] }}]{{ m['content'] }}{%- endfor %}{%- if add_generation_prompt %}[assistant]{%- endif %}",
    );
    expect(renderChat(t, 'Be brief.', 'Hi')).toBe('[user]Be brief.\n\nHi[assistant]');
  });

  it('retries without enable_thinking when the template rejects it', () => {
    const t = withTemplate(
      "{%- if enable_thinking is defined %}{{ raise_exception('unknown kwarg enable_thinking') }}{%- endif %}" +
        "{%- for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{%- endfor %}",
    );
    expect(renderChat(t, 'S', 'U')).toBe('<system>S<user>U');
  });

  it('says how to fix a folder without a chat template', () => {
    const t = loadTokenizer({ tokenizerJson: tiny.tokenizerJson, tokenizerConfig: { ...tiny.tokenizerConfig, chat_template: undefined } });
    expect(() => renderChat(t, 'S', 'U')).toThrow(TokenizerError);
    expect(() => renderChat(t, 'S', 'U')).toThrow(/chat_template.jinja/);
  });
});

describe('splitAtSlots', () => {
  const all = Object.values(SLOTS);
  it('cuts at every slot in order of appearance', () => {
    const text = `a${SLOTS.hieMath}b${SLOTS.hieCode}${SLOTS.hieScience}c`;
    expect(splitAtSlots(text, all, [SLOTS.hieMath, SLOTS.hieCode, SLOTS.hieScience])).toEqual({
      pieces: ['a', 'b', '', 'c'], slots: [SLOTS.hieMath, SLOTS.hieCode, SLOTS.hieScience],
    });
    expect(splitAtSlots('no slot', all, [])).toEqual({ pieces: ['no slot'], slots: [] });
  });

  it('names a missing, unexpected or misordered slot', () => {
    expect(() => splitAtSlots('Plan:\n', all, [SLOTS.planner], 'the critic prompt')).toThrow(PromptSlotMissing);
    expect(() => splitAtSlots('Plan:\n', all, [SLOTS.planner], 'the critic prompt')).toThrow(`the critic prompt lacks ${SLOTS.planner}`);
    expect(() => splitAtSlots(`x${SLOTS.feedback}`, all, [])).toThrow(`holds ${SLOTS.feedback} that nothing fills`);
    expect(() => splitAtSlots(`${SLOTS.hieCode}${SLOTS.hieMath}`, all, [SLOTS.hieMath, SLOTS.hieCode])).toThrow(
      /in the order <<HIE_CODE_EXPERT_SLOT>>, <<HIE_MATH_EXPERT_SLOT>>/,
    );
    expect(() => splitAtSlots(`${SLOTS.planner}${SLOTS.planner}`, all, [SLOTS.planner])).toThrow(PromptSlotMissing);
  });
});

describe('renderWithSlots', () => {
  it('tokenises the pieces separately, special-token strings included, without adding special tokens', () => {
    const r = renderWithSlots(tok, 'S', `Initial Plan:\n${SLOTS.planner}\nQ`, Object.values(SLOTS), [SLOTS.planner]);
    expect(r.pieces).toEqual([
      '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nInitial Plan:\n',
      '\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    ]);
    expect(r.ids).toEqual(r.pieces.map((p) => tok.encode(p, { addSpecialTokens: false })));
    const start = tok.idOf('<|im_start|>')!;
    expect(r.ids[0][0]).toBe(start);
    expect(r.ids[1].filter((id) => id === start)).toHaveLength(1);
    expect(r.ids[1].at(-1)).toBe(tok.encode('\n\n', { addSpecialTokens: false }).at(-1));
  });
});
