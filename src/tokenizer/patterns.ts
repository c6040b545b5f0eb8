/**
 * The regular expressions of a tokenizer.json (pre-tokenizer and normalizer splits, decoder replaces) run in the
 * browser's and Node's backtracking engine, which cannot be interrupted: `(a+)+$` takes seconds for 24 characters and
 * does not finish for 35. A pattern that repeats a group which itself repeats, or which chooses between alternatives,
 * is the shape of catastrophic backtracking; no released tokenizer has one (theirs are alternations of single
 * quantified classes), so such a pattern is refused when the tokenizer loads.
 */
import { UnsafeTokenizerPattern } from '../errors.ts';
import { showValue } from '../util/show.ts';

/** What a group holds, as far as backtracking goes. */
interface Group {
  /** A quantifier that can match more than once (`*`, `+`, `{2,}`, `{1,3}`), at any depth. */
  repeats: boolean;
  /** An alternation, at any depth. */
  alternates: boolean;
  start: number;
}

/** The quantifier at `p[i]`: its length and its largest count, or null when there is none. */
function quantifier(p: string, i: number): { len: number; max: number } | null {
  const c = p[i];
  let len: number;
  let max: number;
  if (c === '*' || c === '+') [len, max] = [1, Infinity];
  else if (c === '?') [len, max] = [1, 1];
  else if (c === '{') {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(i, i + 24));
    if (!m) return null;
    len = m[0].length;
    max = m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3]);
  } else return null;
  if (p[i + len] === '?' || p[i + len] === '+') len++; // lazy or possessive: the same shape
  return { len, max };
}

/** The length of the escape at `p[i]` (a backslash): `\p{L}`, `\x{41}`, `\u{1F600}` or a backslash and one character. */
function escapeLength(p: string, i: number): number {
  if ('pPxuN'.includes(p[i + 1] ?? '') && p[i + 2] === '{') {
    const end = p.indexOf('}', i + 3);
    return end < 0 ? p.length - i : end - i + 1;
  }
  return 2;
}

/** The length of the character class at `p[i]` (`[`), nested classes (`[a-z&&[^x]]`) included. */
function classLength(p: string, i: number): number {
  let depth = 0;
  for (let j = i; j < p.length; j++) {
    if (p[j] === '\\') j += escapeLength(p, j) - 1;
    else if (p[j] === '[') depth++;
    else if (p[j] === ']' && j > i + 1 + (p[i + 1] === '^' ? 1 : 0) && --depth === 0) return j - i + 1;
  }
  return p.length - i;
}

/** The part of `p` a repeated group spans, if `p` repeats a group that repeats or alternates; null when it does not. */
export function catastrophicGroup(p: string): string | null {
  const stack: Group[] = [{ repeats: false, alternates: false, start: 0 }];
  let last: { group?: Group; start: number } | null = null;
  for (let i = 0; i < p.length; ) {
    const top = stack[stack.length - 1]!;
    const q = last ? quantifier(p, i) : null;
    if (q) {
      if (q.max > 1) {
        if (last!.group && (last!.group.repeats || last!.group.alternates)) return p.slice(last!.start, i + q.len);
        top.repeats = true;
      }
      last = null;
      i += q.len;
      continue;
    }
    const c = p[i]!;
    if (c === '\\') {
      last = { start: i };
      i += escapeLength(p, i);
    } else if (c === '[') {
      last = { start: i };
      i += classLength(p, i);
    } else if (c === '(') {
      // (?:  (?i:  (?=  (?!  (?<=  (?<!  (?<name>  (?P<name>: the prefix is not an atom; a flag group (?i) holds nothing
      let j = i + 1;
      if (p[j] === '?') {
        const m = /^\?(?:[=!:]|<[=!]|P?<[^>]*>|[a-zA-Z-]*[:)])/.exec(p.slice(j, j + 64));
        j += m ? m[0].length : 1;
        if (p[j - 1] === ')') {
          last = null;
          i = j;
          continue;
        }
      }
      stack.push({ repeats: false, alternates: false, start: i });
      last = null;
      i = j;
    } else if (c === ')' && stack.length > 1) {
      const g = stack.pop()!;
      const parent = stack[stack.length - 1]!;
      parent.repeats ||= g.repeats;
      parent.alternates ||= g.alternates;
      last = { group: g, start: g.start };
      i++;
    } else if (c === '|') {
      top.alternates = true;
      last = null;
      i++;
    } else {
      last = { start: i };
      i++;
    }
  }
  return null;
}

/** Where a tokenizer.json keeps patterns: the sections that split, normalise and decode text (not the vocabulary). */
const SECTIONS = ['normalizer', 'pre_tokenizer', 'decoder', 'post_processor'];

/** Refuses a tokenizer.json (`json`, named `what`) with a pattern that can backtrack catastrophically. */
export function checkPatterns(json: Record<string, unknown>, what: string): void {
  // a walk with a stack of its own: a damaged file may nest deeper than the call stack goes
  const todo: [unknown, string][] = SECTIONS.map((s) => [json[s], s]);
  while (todo.length) {
    const [v, path] = todo.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    for (const [k, x] of Object.entries(v)) {
      if (k === 'Regex' && typeof x === 'string') {
        const bad = catastrophicGroup(x);
        if (bad !== null) {
          throw new UnsafeTokenizerPattern(`${what}: the pattern ${showValue(x)} at ${path.slice(0, 200)} repeats ${showValue(bad)}, a group ` +
            'that itself repeats or alternates, which can backtrack for hours on a short text; it was refused before any text ' +
            'met it. Use the tokenizer.json that ships with the model');
        }
      } else if (typeof x === 'object' && x !== null) todo.push([x, `${path}.${k}`]);
    }
  }
}
