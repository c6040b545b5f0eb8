import { describe, expect, it } from 'vitest';
import { InvalidArgument } from '../../errors.ts';
import { PROMPT_SLOTS } from '../../mas/prompts.ts';
import { canonicalRole, roleExample, rowTask, TRAIN_ROLES } from './roles.ts';

const full = {
  question: 'Q',
  plan: 'P',
  refined_plan: 'RP',
  answer: 'A',
  distill_expert: 'DE',
  distill_learner: 'DL',
  expert_plan: 'EP',
  learner_answer: 'LA',
  hie_math_expert: 'HM',
  hie_code_expert: 'HC',
  hie_science_expert: 'HS',
  hie_summarizer: 'HSUM',
  summary: 'SUM',
  deliberation_reflector: 'DR',
  deliberation_toolcaller: 'DT',
};

describe('roleExample', () => {
  it('takes the target and slot texts of every role from a full row', () => {
    const got = Object.fromEntries(
      Object.entries(TRAIN_ROLES).flatMap(([shape, roles]) => roles.map((r) => [`${shape}.${r}`, roleExample(shape as never, r, full)])),
    );
    expect(got).toEqual({
      'chain.planner': { target: 'P', slotTexts: [], question: 'Q' },
      'chain.critic': { target: 'RP', slotTexts: ['P'], question: 'Q' },
      'chain.solver': { target: 'A', slotTexts: ['RP'], question: 'Q' },
      'hie.math': { target: 'HM', slotTexts: [], question: 'Q' },
      'hie.code': { target: 'HC', slotTexts: [], question: 'Q' },
      'hie.science': { target: 'HS', slotTexts: [], question: 'Q' },
      'hie.summarizer': { target: 'A', slotTexts: ['HM', 'HC', 'HS'], question: 'Q' },
      'distill.expert': { target: 'DE', slotTexts: [], question: 'Q' },
      'distill.learner': { target: 'DL', slotTexts: ['DE'], question: 'Q' },
      'deliberation.reflector': { target: 'DR', slotTexts: [], question: 'Q' },
      'deliberation.toolcaller': { target: 'DT', slotTexts: ['DR'], question: 'Q' },
    });
  });

  it('gives as many slot texts as the first-round prompt has slots', () => {
    for (const [shape, roles] of Object.entries(TRAIN_ROLES)) {
      for (const r of roles) {
        const ex = roleExample(shape as never, r, full);
        expect('skip' in ex ? -1 : ex.slotTexts.length).toBe(PROMPT_SLOTS[`${shape}.${r}.first`]!.length);
      }
    }
  });

  it('falls back as upstream does', () => {
    const { distill_expert: _de, distill_learner: _dl, ...noDistill } = full;
    expect(roleExample('distill', 'expert', noDistill)).toEqual({ target: 'RP', slotTexts: [], question: 'Q' });
    expect(roleExample('distill', 'learner', noDistill)).toEqual({ target: 'A', slotTexts: ['RP'], question: 'Q' });
    const onlyLast = { question: 'Q', expert_plan: 'EP', learner_answer: 'LA' };
    expect(roleExample('distill', 'expert', onlyLast)).toEqual({ target: 'EP', slotTexts: [], question: 'Q' });
    expect(roleExample('distill', 'learner', onlyLast)).toEqual({ target: 'LA', slotTexts: ['EP'], question: 'Q' });
    const hie = { question: 'Q', hie_math_expert: 'HM', hie_code_expert: 'HC', hie_science_expert: 'HS' };
    expect(roleExample('hie', 'summarizer', { ...hie, hie_summarizer: 'HSUM', summary: 'SUM' })).toMatchObject({ target: 'HSUM' });
    expect(roleExample('hie', 'summarizer', { ...hie, summary: 'SUM', answer: '  ' })).toMatchObject({ target: 'SUM' });
    expect(roleExample('deliberation', 'toolcaller', { question: 'Q', deliberation_reflector: 'DR', answer: 'A' })).toEqual({
      target: 'A',
      slotTexts: ['DR'],
      question: 'Q',
    });
    // the chain alias and numeric cells
    expect(roleExample('chain', 'refiner', full)).toEqual({ target: 'RP', slotTexts: ['P'], question: 'Q' });
    expect(roleExample('chain', 'solver', { question: 'Q', refined_plan: 'RP', answer: 42 })).toEqual({
      target: '42',
      slotTexts: ['RP'],
      question: 'Q',
    });
  });

  it('names the missing field (with its fallbacks) as the skip reason', () => {
    expect(roleExample('chain', 'planner', { plan: 'P' })).toEqual({ skip: 'missing:question' });
    expect(roleExample('chain', 'planner', { question: '   ', plan: 'P' })).toEqual({ skip: 'missing:question' });
    expect(roleExample('chain', 'critic', { question: 'Q', refined_plan: 'RP' })).toEqual({ skip: 'missing:plan' });
    expect(roleExample('chain', 'critic', { question: 'Q', plan: 'P', refined_plan: '' })).toEqual({ skip: 'missing:refined_plan' });
    expect(roleExample('chain', 'solver', { question: 'Q', refined_plan: 'RP', answer: null })).toEqual({ skip: 'missing:answer' });
    expect(roleExample('distill', 'learner', { question: 'Q', answer: 'A' })).toEqual({
      skip: 'missing:distill_expert|refined_plan|expert_plan',
    });
    expect(roleExample('distill', 'learner', { question: 'Q' })).toEqual({ skip: 'missing:distill_learner|answer|learner_answer' });
    expect(roleExample('hie', 'summarizer', { question: 'Q', answer: 'A', hie_math_expert: 'HM', hie_science_expert: 'HS' })).toEqual({
      skip: 'missing:hie_code_expert',
    });
    expect(roleExample('hie', 'science', { question: 'Q', answer: 'A' })).toEqual({ skip: 'missing:hie_science_expert' });
    expect(roleExample('deliberation', 'reflector', { question: 'Q', answer: 'A' })).toEqual({ skip: 'missing:deliberation_reflector' });
    expect(roleExample('deliberation', 'toolcaller', { question: 'Q', answer: 'A' })).toEqual({ skip: 'missing:deliberation_reflector' });
    expect(roleExample('deliberation', 'toolcaller', { question: 'Q', deliberation_reflector: 'DR' })).toEqual({
      skip: 'missing:deliberation_toolcaller|answer',
    });
  });

  it('rejects a role the shape does not train', () => {
    expect(() => roleExample('chain', 'summarizer', full)).toThrow(InvalidArgument);
    expect(() => roleExample('hie', 'refiner', full)).toThrow(
      "shape 'hie' has no trainable role 'refiner'; its roles: math, code, science, summarizer",
    );
    expect(canonicalRole('chain', 'refiner')).toBe('critic');
    expect(canonicalRole('distill', 'learner')).toBe('learner');
  });
});

describe('rowTask', () => {
  it('reads task_family, else falls back', () => {
    expect(rowTask({ task_family: 'math' }, 'code')).toEqual({ task: 'math' });
    expect(rowTask({ task_family: 'Code' }, 'math')).toEqual({ task: 'code' });
    expect(rowTask({ task_family: 'multiple_choice' }, 'math')).toEqual({ task: 'choice' });
    expect(rowTask({ task_family: 'mcq' }, 'math')).toEqual({ task: 'choice' });
    expect(rowTask({ task_family: 'science' }, 'choice')).toEqual({ task: 'choice' });
    expect(rowTask({ task_family: 'science' }, 'math')).toEqual({ task: 'math' });
    expect(rowTask({}, 'choice')).toEqual({ task: 'choice' });
    expect(rowTask({ task_family: 3 }, 'math')).toEqual({ task: 'math' });
  });

  it("takes a round's target from round_targets, the role's column otherwise", () => {
    const row = { question: 'Q', distill_expert: 'E', answer: 'A', round_targets: { learner: ['L1', 'L2', ' '] } };
    expect(roleExample('distill', 'learner', row, 1)).toEqual({ target: 'L1', slotTexts: ['E'], question: 'Q' });
    expect(roleExample('distill', 'learner', row, 2)).toMatchObject({ target: 'L2' });
    // a blank or missing round, another role, no round at all (inner training): the usual columns
    expect(roleExample('distill', 'learner', row, 3)).toMatchObject({ target: 'A' });
    expect(roleExample('distill', 'learner', row, 4)).toMatchObject({ target: 'A' });
    expect(roleExample('distill', 'expert', row, 1)).toMatchObject({ target: 'E' });
    expect(roleExample('distill', 'learner', row)).toMatchObject({ target: 'A' });
    expect(() => roleExample('distill', 'learner', { ...row, round_targets: ['L1'] }, 1)).toThrow(/round_targets must be an object/);
    expect(() => roleExample('distill', 'learner', { ...row, round_targets: { learner: 'L1' } }, 1)).toThrow(
      /round_targets\.learner must be an array of texts/,
    );
    expect(() => roleExample('distill', 'learner', { ...row, round_targets: { learner: [1] } }, 1)).toThrow(InvalidArgument);
  });

  it('reads the code interface columns', () => {
    expect(rowTask({ task_family: 'code', type: 'function', fn_name: ' add ' }, 'math')).toEqual({
      task: 'code',
      codeType: 'function',
      fnName: 'add',
    });
    expect(rowTask({ type: 'complete' }, 'code')).toEqual({ task: 'code', codeType: 'complete' });
    expect(rowTask({ type: 'math', fn_name: '' }, 'math')).toEqual({ task: 'math' });
  });
});
