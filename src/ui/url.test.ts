// Settings ⇄ query string: defaults stay out of the URL, bad values fall back, other parameters survive.
import { describe, expect, it } from 'vitest';
import { DEFAULTS, parseSettings, settingsQuery } from './url';

describe('settings in the URL', () => {
  it('writes only what differs from the defaults, and reads it back', () => {
    expect(settingsQuery({ ...DEFAULTS })).toBe('');
    const s = { ...DEFAULTS, tab: 'train' as const, style: 'mixture', rounds: 2, temperature: 0.3, greedy: false, mode: 'both' as const };
    const q = settingsQuery(s);
    expect(q).toBe('?tab=train&style=mixture&rounds=2&temp=0.3&greedy=0&mode=both');
    expect(parseSettings(q)).toEqual(s);
  });

  it('falls back to defaults for values out of range or unknown', () => {
    const s = parseSettings('?tab=nope&rounds=0&latent=abc&temp=9&top_p=-1&seed=1.6&mode=x');
    expect(s).toEqual({ ...DEFAULTS, seed: 2 });
  });

  it('keeps unrelated parameters such as groups', () => {
    expect(settingsQuery({ ...DEFAULTS, tab: 'env' }, '?groups=elementwise&tab=ask')).toBe('?groups=elementwise&tab=env');
  });
});
