// Settings ⇄ query string: defaults stay out of the URL, bad values fall back, other parameters survive.
import { describe, expect, it } from 'vitest';
import { DEFAULTS, parseSettings, settingsQuery, styleLatentSteps } from './url';

describe('settings in the URL', () => {
  it('writes only what differs from the defaults, and reads it back', () => {
    expect(settingsQuery({ ...DEFAULTS })).toBe('');
    const s = { ...DEFAULTS, tab: 'train' as const, style: 'mixture', rounds: 2, latentSteps: 32, temperature: 0.3, greedy: false, mode: 'both' as const };
    const q = settingsQuery(s);
    expect(q).toBe('?tab=train&style=mixture&rounds=2&temp=0.3&greedy=0&mode=both');
    expect(parseSettings(q)).toEqual(s);
  });

  it('falls back to defaults for values out of range or unknown', () => {
    const s = parseSettings('?tab=nope&rounds=0&latent=abc&temp=9&top_p=-1&seed=1.6&mode=x');
    expect(s).toEqual({ ...DEFAULTS, seed: 2 });
  });

  it("defaults the latent steps to the style's own", () => {
    // the tiny system's outer links were trained on 40 latents; released styles use upstream's 32
    expect(styleLatentSteps('tiny')).toBe(40);
    expect(styleLatentSteps('mixture')).toBe(32);
    expect(styleLatentSteps('no-such-style')).toBe(32);
    expect(DEFAULTS.latentSteps).toBe(40);
    expect(parseSettings('?style=sequential_light').latentSteps).toBe(32);
    expect(parseSettings('').latentSteps).toBe(40);
    // a value away from its style's default is written, even when it is another style's default
    expect(settingsQuery({ ...DEFAULTS, style: 'mixture', latentSteps: 40 })).toBe('?style=mixture&latent=40');
    expect(parseSettings('?style=mixture&latent=40').latentSteps).toBe(40);
  });

  it('keeps unrelated parameters such as groups', () => {
    expect(settingsQuery({ ...DEFAULTS, tab: 'env' }, '?groups=elementwise&tab=ask')).toBe('?groups=elementwise&tab=env');
  });
});
