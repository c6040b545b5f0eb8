import { describe, expect, it } from 'vitest';
import { paperAccuracy } from './paper';

describe("the paper's accuracies", () => {
  it('Table 2: sequential styles by rounds and mode; the code column is MBPP+ for Light, LiveCodeBench for Scaled', () => {
    expect(paperAccuracy('sequential_light', 'math500', 3, 'latent')).toEqual({
      accuracy: 77.8,
      source: 'Table 2, Light, r = 3, RecursiveMAS',
    });
    expect(paperAccuracy('sequential_scaled', 'livecodebench', 1, 'text')).toEqual({
      accuracy: 38.5,
      source: 'Table 2, Scaled, r = 1, Recursive-TextMAS',
    });
    expect(paperAccuracy('sequential_light', 'mbppplus', 2, 'latent')?.accuracy).toBe(36.9);
    expect(paperAccuracy('sequential_scaled', 'aime25', 2, 'latent')?.accuracy).toBe(86.0);
    expect(paperAccuracy('sequential_light', 'medqa', 1, 'text')?.accuracy).toBe(29.0);
    expect(paperAccuracy('sequential_scaled', 'gpqa', 3, 'text')?.accuracy).toBe(58.6);
    expect(paperAccuracy('sequential_scaled', 'mbppplus', 3, 'latent')).toBeNull();
    expect(paperAccuracy('sequential_light', 'math500', 4, 'latent')).toBeNull();
  });
  it('Tables 6-8: the other styles, RecursiveMAS at r = 3 only', () => {
    expect(paperAccuracy('distillation', 'mbppplus', 3, 'latent')).toEqual({
      accuracy: 71.9,
      source: 'Table 6, distillation, r = 3, RecursiveMAS',
    });
    expect(paperAccuracy('mixture', 'medqa', 3, 'latent')?.accuracy).toBe(61.7);
    expect(paperAccuracy('deliberation', 'bamboogle', 3, 'latent')?.accuracy).toBe(53.7);
    expect(paperAccuracy('distillation', 'mbppplus', 2, 'latent')).toBeNull();
    expect(paperAccuracy('mixture', 'math500', 3, 'latent')).toBeNull();
    expect(paperAccuracy('tiny_sequential', 'math500', 3, 'latent')).toBeNull();
    expect(paperAccuracy('sequential_light', null, 3, 'latent')).toBeNull();
  });
});
