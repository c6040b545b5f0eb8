// Settings ⇄ query string: defaults stay out of the URL, bad values fall back, other parameters survive.
import { describe, expect, it } from 'vitest';
import { TINY } from './offline';
import {
  DEFAULTS, UPSTREAM_RANGE, WIDE_RANGE, fitRange, parseSettings, settingsQuery, styleLatentSteps, upstreamRanges, withinUpstream,
} from './url';

describe('settings in the URL', () => {
  it('writes only what differs from the defaults, and reads it back', () => {
    expect(settingsQuery({ ...DEFAULTS })).toBe('');
    const s = {
      ...DEFAULTS,
      tab: 'train' as const,
      style: 'mixture',
      rounds: 2,
      latentSteps: 32,
      temperature: 0.3,
      greedy: true,
      mode: 'both' as const,
    };
    const q = settingsQuery(s);
    expect(q).toBe('?tab=train&style=mixture&rounds=2&temp=0.3&greedy=1&mode=both');
    expect(parseSettings(q)).toEqual(s);
  });

  it('falls back to defaults for values out of range or unknown', () => {
    const s = parseSettings('?tab=nope&rounds=0&latent=abc&temp=9&top_p=-1&seed=1.6&mode=x');
    expect(s).toEqual({ ...DEFAULTS, seed: 2 });
  });

  it("defaults the latent steps to the style's own", () => {
    // the offline system (tiny_distillation) had its outer links trained on 4 latents; released styles use upstream's 32
    expect(styleLatentSteps('tiny')).toBe(4);
    expect(styleLatentSteps('tiny')).toBe(styleLatentSteps('tiny_distillation'));
    expect(styleLatentSteps('tiny_sequential')).toBe(40);
    expect(styleLatentSteps('mixture')).toBe(32);
    expect(styleLatentSteps('no-such-style')).toBe(32);
    expect(DEFAULTS.latentSteps).toBe(4);
    expect(parseSettings('?style=sequential_light').latentSteps).toBe(32);
    expect(parseSettings('').latentSteps).toBe(4);
    // a value away from its style's default is written, even when it is another style's default
    expect(settingsQuery({ ...DEFAULTS, style: 'mixture', latentSteps: 40 })).toBe('?style=mixture&latent=40');
    expect(parseSettings('?style=mixture&latent=40').latentSteps).toBe(40);
  });

  it("samples as upstream's demo by default (temperature 0.6, top-p 0.95), greedy only when asked", () => {
    expect([DEFAULTS.greedy, DEFAULTS.temperature, DEFAULTS.topP]).toEqual([false, 0.6, 0.95]);
    expect(settingsQuery({ ...DEFAULTS, greedy: true })).toBe('?greedy=1');
    expect(parseSettings('?greedy=1').greedy).toBe(true);
  });

  it("knows upstream's demo ranges (rounds 1–5, latent steps 8–64 by 8) and fits values into them", () => {
    // the offline system's 4 latent steps lie below upstream's slider (8–64): its range reaches down to them, by 4
    expect(withinUpstream(DEFAULTS)).toBe(true);
    expect(upstreamRanges(TINY)).toEqual({ rounds: { min: 1, max: 5, step: 1 }, latentSteps: { min: 4, max: 64, step: 4 } });
    expect(upstreamRanges('sequential_light')).toEqual(UPSTREAM_RANGE);
    expect([4, 12, 64, 2, 6, 68].map((latentSteps) => withinUpstream({ rounds: 3, latentSteps, style: TINY }))).toEqual([
      true, true, true, false, false, false,
    ]);
    expect(withinUpstream({ rounds: 3, latentSteps: 4, style: 'sequential_light' })).toBe(false);
    expect(withinUpstream({ ...DEFAULTS, latentSteps: 32 })).toBe(true);
    expect(withinUpstream({ rounds: 5, latentSteps: 64 })).toBe(true);
    expect(
      [
        { rounds: 6, latentSteps: 32 },
        { rounds: 3, latentSteps: 36 },
        { rounds: 3, latentSteps: 0 },
      ].map(withinUpstream),
    ).toEqual([false, false, false]);
    const r = UPSTREAM_RANGE.latentSteps;
    expect([0, 8, 11, 12, 36, 63, 200].map((v) => fitRange(v, r, 32))).toEqual([8, 8, 8, 16, 40, 64, 64]);
    expect([0, 7, 2.4].map((v) => fitRange(v, UPSTREAM_RANGE.rounds, 3))).toEqual([1, 5, 2]);
    expect([null, undefined, Number.NaN].map((v) => fitRange(v, r, 32))).toEqual([32, 32, 32]);
    // past them, as far as the URL takes
    expect(parseSettings('?rounds=10&latent=256')).toMatchObject({
      rounds: WIDE_RANGE.rounds.max,
      latentSteps: WIDE_RANGE.latentSteps.max,
    });
  });

  it('keeps unrelated parameters such as groups', () => {
    expect(settingsQuery({ ...DEFAULTS, tab: 'env' }, '?groups=elementwise&tab=ask')).toBe('?groups=elementwise&tab=env');
  });
});
