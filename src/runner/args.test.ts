/**
 * The command line's parser (args.ts): an alias is the same flag as its canonical name (a repeated flag keeps
 * its last value, a `multiple` one every value in order, whichever spelling gave them), --help on every
 * command, a flag of another command named as not applying, and the one number parser.
 */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../errors';
import { command, flag01, numberFlag, parseCommand, parseFlags } from './args';

const s = { type: 'string' } as const;
const gen = command({
  options: { max_new_tokens: s, top_p: s, greedy: { type: 'boolean' }, question: { type: 'string', multiple: true } },
  aliases: { 'max-new-tokens': 'max_new_tokens', 'top-p': 'top_p', q: 'question' },
  usage: '  gen …',
  run: () => 0,
});
const other = command({ options: { prompt: s }, usage: '  other …', run: () => 0 });
const TABLE = { gen, other };

const thrown = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('no error');
};

describe('parseFlags', () => {
  it('reads aliases under the canonical name, in argv order', () => {
    expect(parseFlags(['--max-new-tokens', '3', '--top_p=0.5', '--greedy'], gen)).toEqual({
      max_new_tokens: '3',
      top_p: '0.5',
      greedy: true,
    });
    expect(parseFlags(['--max-new-tokens', '3', '--max_new_tokens', '5'], gen)).toEqual({ max_new_tokens: '5' });
    expect(parseFlags(['--max_new_tokens', '5', '--max-new-tokens', '3'], gen)).toEqual({ max_new_tokens: '3' });
    expect(parseFlags(['-q', 'a', '--question', 'b', '-q', 'c'], gen)).toEqual({ question: ['a', 'b', 'c'] });
  });

  it('--help and -h give null; unknown flags, missing values and positionals are usage errors', () => {
    expect(parseFlags(['--top_p', '1', '--help'], gen)).toBeNull();
    expect(parseFlags(['-h'], gen)).toBeNull();
    expect(thrown(() => parseFlags(['--bogus'], gen))).toMatch(/^Unknown option '--bogus'/);
    expect(thrown(() => parseFlags(['--top_p'], gen))).toMatch(/argument missing/);
    expect(thrown(() => parseFlags(['--top_p', '1', 'extra'], gen))).toBe('unexpected argument extra');
  });
});

describe('parseCommand', () => {
  it('finds the command, its flags, and names flags of other commands as not applying', () => {
    expect(parseCommand(TABLE, ['gen', '--top-p', '0.9'], 'prog')).toEqual({ name: 'gen', command: gen, values: { top_p: '0.9' } });
    expect(parseCommand(TABLE, ['--help'], 'prog')).toBeNull();
    expect(parseCommand(TABLE, ['other', '-h'], 'prog')).toBeNull();
    expect(thrown(() => parseCommand(TABLE, ['other', '--top-p', '1'], 'prog'))).toBe('--top-p does not apply to "prog other"');
    expect(thrown(() => parseCommand(TABLE, ['other', '-q', 'x'], 'prog'))).toBe('-q does not apply to "prog other"');
    expect(thrown(() => parseCommand(TABLE, ['gen', '--prompt', 'x'], 'prog'))).toBe('--prompt does not apply to "prog gen"');
    expect(thrown(() => parseCommand(TABLE, [], 'prog'))).toBe('no command given');
    expect(thrown(() => parseCommand(TABLE, ['nope'], 'prog'))).toBe('unknown command "nope"');
    expect(thrown(() => parseCommand(TABLE, ['--prompt', 'x', 'other'], 'prog'))).toBe('the command comes first: prog other [flags]');
  });

  it('an argv that starts with a flag runs the fallback', () => {
    expect(parseCommand(TABLE, ['--prompt', 'x'], 'prog', 'other')).toEqual({ name: 'other', command: other, values: { prompt: 'x' } });
    expect(parseCommand(TABLE, [], 'prog', 'other')).toEqual({ name: 'other', command: other, values: {} });
  });
});

describe('numberFlag and flag01', () => {
  it('parse numbers, integers and bounds, absent as undefined', () => {
    expect(numberFlag('x', undefined)).toBeUndefined();
    expect(numberFlag('x', '2.5')).toBe(2.5);
    expect(numberFlag('x', '-3', { integer: true, min: -3 })).toBe(-3);
    expect(numberFlag('x', '1e3', { integer: true })).toBe(1000);
    expect(thrown(() => numberFlag('x', '2.5', { integer: true }))).toBe('--x 2.5: expected an integer');
    expect(thrown(() => numberFlag('x', '0', { integer: true, min: 1 }))).toBe('--x 0: expected an integer >= 1');
    expect(thrown(() => numberFlag('x', ' ', {}))).toBe('--x  : expected a number');
    expect(thrown(() => numberFlag('x', 'Infinity', { min: 0 }))).toBe('--x Infinity: expected a number >= 0');
  });

  it('flag01 takes 0 and 1, and true and false with words', () => {
    expect([flag01('f', undefined, true), flag01('f', '0', true), flag01('f', '1', false)]).toEqual([true, false, true]);
    expect([flag01('f', 'TRUE', false, true), flag01('f', 'false', true, true)]).toEqual([true, false]);
    expect(thrown(() => flag01('f', 'true', false))).toBe('--f true: expected 0 or 1');
  });
});
