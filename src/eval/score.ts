/**
 * Answer extraction and scoring of benchmark outputs (docs/method.md §7.4), as upstream's answer_utils scores them,
 * so that accuracies compare with the paper's:
 * - math (MATH500, AIME): the prediction is the last \boxed{…}, else the last "Final Answer:" line, else the
 *   whole text; it is right when any of four normalisers makes it equal to the gold and non-empty. The
 *   normalisers are lenient on purpose (upstream's are: gold \frac{14}{3} and 4.5 both reduce to "4").
 * - choice (GPQA, MedQA): a letter A–D read from the boxed content, the last "Final Choice/Answer:" line or
 *   the whole text; "A" when none names one.
 * - free-form: exact match after normalisation (em) or after lower-casing (lower).
 * Code is scored by running it (code.ts).
 */
import { lastBoxed, stripThink } from '../mas/answer';

/** The prediction a math output states: last \boxed{} (braces balanced), else the last "Final Answer:" line, else the whole text. */
export function extractPredAnswer(text: string): string {
  const t = stripThink(text);
  const boxed = lastBoxed(t);
  if (boxed !== null) return boxed.trim();
  const lines = [...t.matchAll(/Final\s+Answer\s*[:：]\s*(.*)$/gim)];
  if (lines.length) return lines[lines.length - 1]![1]!.trim();
  return t.trim();
}

/** `\text{x}` → `x`, repeatedly, for nested ones. */
function stripTextCommand(s: string): string {
  let prev;
  do {
    prev = s;
    s = s.replace(/\\text\s*\{([^{}]*)\}/g, '$1');
  } while (s !== prev);
  return s;
}

/** Integer part of the first number, after \text{} removal and \frac{a}{b} → a/b for integers a, b. */
function intPart(s: string): string {
  let t = stripTextCommand(s);
  t = t.replace(/\\frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(-?\d+)\s*\}/g, (m, a: string, b: string) => {
    const d = Number(b);
    return d === 0 ? m : String(Number(a) / d);
  });
  t = t.replace(/\\left|\\right|,|\\circ/g, '');
  const m = /-?\d+(?:\.\d+)?/.exec(t);
  if (!m) return '';
  const v = Math.trunc(Number(m[0]));
  return Object.is(v, -0) ? '0' : String(v);
}

/** Without $, LaTeX spacing commands, braces, quotes and whitespace. */
const latexText = (s: string) => s.replace(/\$|\\[,;!:]|[{}]|["'`]|\s+/g, '');
const noSpace = (s: string) => s.replace(/\s+/g, '');
/** Digits before the first ".", leading zeros stripped. */
const digits = (s: string) => (s.split('.')[0] ?? '').replace(/\D/g, '').replace(/^0+/, '');

/** The normalisers in the order upstream tries them, by name. */
export const MATH_NORMALISERS: readonly (readonly [string, (s: string) => string])[] = [
  ['intpart', intPart], ['latex_text', latexText], ['nospace', noSpace], ['digits', digits],
];

/** Which normaliser made prediction and gold equal (and non-empty), or null when none did. */
export function mathMatch(pred: string, gold: string): string | null {
  for (const [name, f] of MATH_NORMALISERS) {
    const a = f(pred);
    if (a !== '' && a === f(gold)) return name;
  }
  return null;
}

const LETTER = '([A-D])(?![A-Za-z])';
/** A word matched in either case, while the option letter itself must be a capital ("the answer is a prime" names no option). */
const anyCase = (words: string) => words.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`).replace(/ /g, '\\s+');
/** "final choice: B", "the correct option is (C)", "answer: D", … — the last such statement wins. */
const KEYWORD_CHOICE = new RegExp(
  `(?:${['final choice', 'final answer', 'correct option', 'choice', 'option', 'answer'].map(anyCase).join('|')})` +
  `(?:\\s+${anyCase('is')})?\\s*[:：]?\\s*(?:\\*\\*)?\\s*\\(?\\s*${LETTER}`, 'g');
/** A candidate that starts with the letter: "B", "(B)", "C:", "D. text", "\text{A}". */
const LEADING_CHOICE = new RegExp(`^\\s*(?:\\\\text(?:bf|rm)?\\s*\\{\\s*)?\\(?\\s*${LETTER}\\s*\\)?(?:[.:)}\\s]|$)`);

function choiceIn(candidate: string): string | null {
  const keyed = [...candidate.matchAll(KEYWORD_CHOICE)];
  if (keyed.length) return keyed[keyed.length - 1]![1]!.toUpperCase();
  const m = LEADING_CHOICE.exec(candidate);
  return m ? m[1]! : null;
}

/**
 * The option letter an output chooses: from the boxed content, the last "Final Choice/Answer:" line, the whole text; "A" when
 * none names one.
 */
export function extractChoice(text: string): string {
  const t = stripThink(text);
  const candidates: string[] = [];
  const boxed = lastBoxed(t);
  if (boxed !== null) candidates.push(boxed);
  const stated = [...t.matchAll(/Final\s+(?:Choice|Answer)\s*[:：].*$/gim)];
  if (stated.length) candidates.push(stated[stated.length - 1]![0]);
  candidates.push(t);
  for (const c of candidates) {
    const letter = choiceIn(c);
    if (letter) return letter;
  }
  return 'A';
}

/** Exact-match normalisation: lower case, one kind of quote and dash, no punctuation, no articles, single spaces. */
export function normalizeEm(s: string): string {
  return s.toLowerCase()
    .replace(/[\u2018\u2019\u201a\u201b\u2032]/g, "'")
    .replace(/[\u201c\u201d\u201e\u201f\u2033]/g, '"')
    .replace(/[\u2010-\u2015\u2212]/g, '-')
    .replace(/[\p{P}\p{S}]/gu, ' ')
    .replace(/\b(?:a|an|the)\b/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Free-form answers: equal after normalizeEm, or after lower-casing and collapsing whitespace. */
export function freeFormMatch(pred: string, gold: string): boolean {
  const lower = (s: string) => s.toLowerCase().replace(/\s+/g, ' ').trim();
  const em = normalizeEm(pred);
  return (em !== '' && em === normalizeEm(gold)) || (lower(pred) !== '' && lower(pred) === lower(gold));
}
