import { describe, expect, it } from 'vitest';
import { extractChoice, extractPredAnswer, freeFormMatch, mathMatch, normalizeEm } from './score';

describe('extractPredAnswer', () => {
  it('takes the last balanced \\boxed{}, then the last Final Answer line, then the whole text', () => {
    expect(extractPredAnswer('first \\boxed{3}, then \\boxed{\\frac{1}{2}} done')).toBe('\\frac{1}{2}');
    expect(extractPredAnswer('work\nFinal Answer: 12 apples\nmore\nFinal Answer: 13')).toBe('13');
    expect(extractPredAnswer('  just 7  ')).toBe('just 7');
    // reasoning inside <think> is not the answer
    expect(extractPredAnswer('<think>\\boxed{1}</think> so \\boxed{2}')).toBe('2');
  });
});

describe('mathMatch', () => {
  it('reproduces upstream leniency: the integer part of the first number decides first', () => {
    // 14/3 = 4.67 and 4.5 both reduce to "4" (docs/method.md §7.4)
    expect(mathMatch('4.5', '\\frac{14}{3}')).toBe('intpart');
    expect(mathMatch('1,000', '1000')).toBe('intpart');
    expect(mathMatch('90^\\circ', '90')).toBe('intpart');
    expect(mathMatch('\\text{(B) } 5', '5')).toBe('intpart');
    expect(mathMatch('-3', '-3.9')).toBe('intpart');
    expect(mathMatch('-0.5', '0')).toBe('intpart');
  });
  it('falls back to the text normalisers for answers without numbers', () => {
    expect(mathMatch('$x^{2}$', 'x^2')).toBe('intpart'); // both have "2" as their first number
    expect(mathMatch('$\\pi r$', '\\pi r')).toBe('latex_text');
    expect(mathMatch('\\pi\\,r', '\\pi r')).toBe('latex_text');
    expect(mathMatch('a b', 'ab')).toBe('latex_text');
    expect(mathMatch('\\sqrt{x}', '\\sqrt{y}')).toBeNull();
  });
  it('never matches empty normal forms', () => {
    expect(mathMatch('', '')).toBeNull();
    expect(mathMatch('   ', '')).toBeNull();
  });
  it('uses the digits before the first dot when the other forms differ', () => {
    // intpart: "1" against "12"; the text forms keep the letters
    expect(mathMatch('a1b2', '12')).toBe('digits');
    expect(mathMatch('x12.5', '12')).toBe('intpart');
    expect(mathMatch('a1b2', '13')).toBeNull();
  });
});

describe('extractChoice', () => {
  it('reads the boxed letter, then a stated choice, then a leading letter, else A', () => {
    expect(extractChoice('so it must be \\boxed{C}')).toBe('C');
    expect(extractChoice('\\boxed{\\text{D}}')).toBe('D');
    expect(extractChoice('\\boxed{(B) 42 kg}')).toBe('B');
    expect(extractChoice('Comparing the options...\nFinal Choice: D')).toBe('D');
    expect(extractChoice('I think the correct option is (B).')).toBe('B');
    expect(extractChoice('Option A is wrong; the answer is C because...')).toBe('C');
    expect(extractChoice('B. because the mass doubles')).toBe('B');
    expect(extractChoice('no letter anywhere here')).toBe('A');
  });
  it('prefers the boxed content over later statements and ignores <think>', () => {
    expect(extractChoice('\\boxed{D} although option B was tempting')).toBe('D');
    expect(extractChoice('<think>answer is B</think>Final Answer: C')).toBe('C');
  });
  it('does not read letters inside words', () => {
    expect(extractChoice('Answer: Definitely the second, so \\boxed{B}')).toBe('B');
    expect(extractChoice('The answer is Carbon')).toBe('A');
    // keywords in any case, the letter a capital: "a prime" is not option A
    expect(extractChoice('FINAL   CHOICE: B')).toBe('B');
    expect(extractChoice('option C is out; the answer is a prime')).toBe('C');
  });
});

describe('free-form matching', () => {
  it('normalises case, punctuation, articles, quotes and dashes', () => {
    expect(normalizeEm('The  Eiffel Tower!')).toBe('eiffel tower');
    expect(normalizeEm('“Rock–n–Roll”')).toBe('rock n roll');
    expect(freeFormMatch('an Apple.', 'apple')).toBe(true);
    expect(freeFormMatch('Paris, France', 'Paris')).toBe(false);
    expect(freeFormMatch('', '')).toBe(false);
  });
});
