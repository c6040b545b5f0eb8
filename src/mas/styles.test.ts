import { describe, expect, it } from 'vitest';
import { UnknownStyle } from '../errors';
import { STYLES, STYLE_NAMES, checkBackbones, getStyle, receiverOf, schedule, unrunnableRoles } from './styles';

describe('styles registry', () => {
  it('holds the five styles with upstream\'s roles and default repos (docs/method.md §3.3)', () => {
    expect(STYLE_NAMES).toEqual(['sequential_light', 'sequential_scaled', 'mixture', 'distillation', 'deliberation']);
    const repos = (s: string) => Object.fromEntries(getStyle(s).roles.map((r) => [r.key, r.repo.replace('RecursiveMAS/', '')]));
    expect(repos('sequential_light')).toEqual({
      planner: 'Sequential-Light-Planner-Qwen3-1.7B',
      critic: 'Sequential-Light-Critic-Llama3.2-1B',
      solver: 'Sequential-Light-Solver-Qwen2.5-Math-1.5B',
    });
    expect(repos('sequential_scaled')).toEqual({
      planner: 'Sequential-Scaled-Planner-Gemma3-4B',
      critic: 'Sequential-Scaled-Critic-Llama3.2-3B',
      solver: 'Sequential-Scaled-Solver-Qwen3.5-4B',
    });
    expect(repos('mixture')).toEqual({
      math: 'Mixture-Math-DeepSeek-R1-Distill-Qwen-1.5B',
      code: 'Mixture-Code-Qwen2.5-Coder-3B',
      science: 'Mixture-Science-BioMistral-7B',
      summarizer: 'Mixture-Summarizer-Qwen3.5-2B',
    });
    expect(repos('distillation')).toEqual({ expert: 'Distillation-Expert-Qwen3.5-9B', learner: 'Distillation-Learner-Qwen3.5-4B' });
    expect(repos('deliberation')).toEqual({
      reflector: 'Deliberation-Reflector-Qwen3.5-4B',
      toolcaller: 'Deliberation-Toolcaller-Qwen3.5-4B',
    });
    expect(STYLE_NAMES.map((n) => getStyle(n).outerRepo.replace('RecursiveMAS/', ''))).toEqual([
      'Sequential-Light-Outerlinks',
      'Sequential-Scaled-Outerlinks',
      'Mixture-Outerlinks',
      'Distillation-Outerlinks',
      'Deliberation-Outerlinks',
    ]);
    expect(STYLE_NAMES.map((n) => [getStyle(n).decoder, getStyle(n).taskScoped, getStyle(n).tools])).toEqual([
      ['solver', true, false],
      ['solver', true, false],
      ['summarizer', false, false],
      ['learner', false, false],
      ['toolcaller', false, true],
    ]);
  });

  it('links connect the roles upstream connects', () => {
    const links = (s: string) => getStyle(s).links.map((l) => `${l.key}:${l.from}>${l.to}`);
    expect(links('sequential_light')).toEqual(['outer_12:planner>critic', 'outer_23:critic>solver', 'outer_31:solver>planner']);
    expect(links('mixture')).toEqual(['outer_1s:math>summarizer', 'outer_2s:code>summarizer', 'outer_3s:science>summarizer',
      'outer_s1:summarizer>math', 'outer_s2:summarizer>code', 'outer_s3:summarizer>science']);
    expect(links('distillation')).toEqual(['outer_el:expert>learner', 'outer_le:learner>expert']);
    expect(links('deliberation')).toEqual(['outer_rt:reflector>toolcaller', 'outer_tr:toolcaller>reflector']);
  });

  it('one round decodes at once; R rounds run the feedback link R − 1 times; only the final agent decodes', () => {
    const one = schedule(getStyle('sequential_light'), 1);
    expect(one.map((s) => `${s.role}:${s.kind}:${s.linksOut.join('+')}:${s.decode}`)).toEqual([
      'planner:first:outer_12:false',
      'critic:first:outer_23:false',
      'solver:first::true',
    ]);
    for (const name of STYLE_NAMES) {
      const style = getStyle(name);
      const feedback = style.links.filter((l) => l.from === style.decoder).map((l) => l.key);
      const three = schedule(style, 3);
      expect(three.filter((s) => s.decode).map((s) => [s.role, s.round])).toEqual([[style.decoder, 2]]);
      expect(three.filter((s) => s.linksOut.some((k) => feedback.includes(k))).map((s) => s.round)).toEqual([0, 1]);
      // every slot is filled by a link some earlier stage produced
      const made = new Set<string>();
      for (const s of three) {
        for (const [, key] of s.fill) expect(made.has(key), `${name} ${s.role} round ${s.round} needs ${key}`).toBe(true);
        s.linksOut.forEach((k) => made.add(k));
      }
    }
  });

  it('an unknown style is UnknownStyle naming the known ones', () => {
    expect(() => getStyle('sequential')).toThrow(UnknownStyle);
    expect(() => getStyle('toString')).toThrow(/choose one of sequential_light, sequential_scaled, mixture, distillation, deliberation/);
  });
});

describe('receiverOf', () => {
  it('names the role that reads a link, and refuses a link the style lacks', () => {
    const s = getStyle('sequential_light');
    expect(['outer_12', 'outer_23', 'outer_31'].map((k) => receiverOf(s, k))).toEqual(['critic', 'solver', 'planner']);
    expect(receiverOf(getStyle('distillation'), 'outer_el')).toBe('learner');
    expect(() => receiverOf(s, 'outer_el')).toThrow(
      'style sequential_light has no outer link outer_el; its links are outer_12, outer_23, outer_31',
    );
  });
});

describe('checkBackbones', () => {
  it('passes every released style (their backbones are all families the engine runs) and names the roles of another', () => {
    for (const name of STYLE_NAMES) expect(() => checkBackbones(STYLES[name]), name).not.toThrow();
    expect(() => checkBackbones(getStyle('tiny_sequential'))).not.toThrow();
    // a style whose solver needs a decoder the engine does not run is refused before anything is read
    const base = STYLES.sequential_scaled;
    const future = {
      ...base,
      roles: base.roles.map((r) => (r.key === 'solver' ? { ...r, base: 'Org/Future-4B', modelType: 'future_lm' } : r)),
    };
    expect(unrunnableRoles(future).map((r) => r.key)).toEqual(['solver']);
    expect(() => checkBackbones(future)).toThrow(
      'style sequential_scaled needs backbones this engine cannot run yet: solver (Org/Future-4B, model_type future_lm); ' +
        'it runs llama, qwen2, qwen3, mistral, gemma3, qwen3_5 decoders (Llama 3.x, Qwen2/2.5, Qwen3, Mistral, Gemma 3, Qwen3.5). Use sequential_light or the tiny system, or give that role a model it runs ' +
        "(--ckpt_override ROLE=DIR with a model folder; in the playground, the role's backbone URL)",
    );
    // a role given its own model is not asked about
    expect(() => checkBackbones(future, ['solver'])).not.toThrow();
  });
});
