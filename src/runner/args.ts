/**
 * The command line's one parser, shared by `rmas` (cli.ts) and the tiny-system build
 * (scripts/tiny-system/build.ts). A command is its option table, its usage text and what it runs. Flags are
 * node:util parseArgs options under their canonical names (upstream's spellings, e.g. --max_new_tokens);
 * any other spelling is an alias the command lists, and its value arrives under the canonical name, so a
 * command reads one name per flag. Every command takes --help (-h). A bad command line is a UsageError.
 */
import { parseArgs } from 'node:util';
import { UsageError } from '../errors';
import type { KvDType } from '../model/cache';

export interface Option {
  type: 'string' | 'boolean';
  multiple?: boolean;
}
export type Options = Readonly<Record<string, Option>>;

/** The flags given, by canonical name: a string (every value in order for `multiple`) or true. */
export type Values<O extends Options> = {
  -readonly [K in keyof O]?: O[K] extends { multiple: true } ? string[] : O[K]['type'] extends 'boolean' ? boolean : string;
};

export interface Command<O extends Options = Options, C = void> {
  options: O;
  /** Other spellings → the flag they stand for; a one-letter alias is a short flag (-q). */
  aliases?: Readonly<Record<string, keyof O & string>>;
  usage: string;
  /** One line on what it does, for the program's list of commands. */
  summary?: string;
  /** The `multiple` string option that takes the command's positional arguments (rmas download REPO …); none: refused. */
  positional?: keyof O & string;
  /** Runs the command; returns its exit code, or nothing for 0. */
  run(values: Values<O>, context: C): Promise<number | void> | number | void;
}

/** A command for a table: its values typed by its own options here, whatever the table's other commands take. */
export function command<O extends Options, C>(c: Command<O, C>): Command<Options, C> {
  return c as unknown as Command<Options, C>;
}

type ParseOptions = Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>;

/** parseArgs' options of a command (its flags, their aliases, help) and each long alias's canonical name. */
function parseOptions(c: Pick<Command, 'options' | 'aliases'>): { options: ParseOptions; canonical: Map<string, string> } {
  const options: ParseOptions = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(c.options)) options[name] = { ...o };
  const canonical = new Map<string, string>();
  for (const [alias, name] of Object.entries(c.aliases ?? {})) {
    if (alias.length === 1) options[name] = { ...options[name]!, short: alias };
    else {
      options[alias] = { ...c.options[name]! };
      canonical.set(alias, name);
    }
  }
  return { options, canonical };
}

/** Every spelling a command takes, as written on a command line (--top_p, --top-p, -q). */
function spellings(c: Pick<Command, 'options' | 'aliases'>): string[] {
  return Object.entries(parseOptions(c).options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]);
}

/**
 * The flags of `argv` by canonical name, read as parseArgs reads them (a flag given twice: its last value;
 * with `multiple`, every value in order), an alias the same flag as its canonical name; null for --help.
 * `elsewhere` holds the spellings of the program's other commands: one of them here is named as not
 * applying to `where` (e.g. "rmas forward") rather than as an unknown option.
 */
export function parseFlags<O extends Options>(argv: readonly string[], c: Pick<Command<O, never>, 'options' | 'aliases' | 'positional'>,
  where = 'this command', elsewhere: ReadonlySet<string> = new Set()): Values<O> | null {
  const { options, canonical } = parseOptions(c as Pick<Command, 'options' | 'aliases'>);
  let tokens;
  try {
    ({ tokens } = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true, tokens: true }));
  } catch (e) {
    // the same tokens without the strict checks: the first option the table lacks is the one refused
    const loose = parseArgs({ args: [...argv], options, allowPositionals: true, strict: false, tokens: true }).tokens;
    const unknown = loose.find((t) => t.kind === 'option' && !Object.hasOwn(options, t.name));
    if (unknown?.kind === 'option' && elsewhere.has(unknown.rawName))
      throw new UsageError(`${unknown.rawName} does not apply to "${where}"`);
    throw new UsageError((e as Error).message);
  }
  const values: Record<string, string | string[] | boolean> = {};
  const positionals: string[] = [];
  for (const t of tokens) {
    if (t.kind === 'positional') positionals.push(t.value);
    if (t.kind !== 'option') continue;
    const name = canonical.get(t.name) ?? t.name;
    const o = options[name]!;
    if (o.type === 'boolean') values[name] = true;
    else if (o.multiple) values[name] = [...((values[name] as string[] | undefined) ?? []), t.value!];
    else values[name] = t.value!;
  }
  if (values.help) return null;
  if (c.positional) values[c.positional] = [...((values[c.positional] as string[] | undefined) ?? []), ...positionals];
  else if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  return values as Values<O>;
}

/**
 * The command of `argv` (its first argument, a key of `table`) and its flags; null for --help. An argv that
 * starts with a flag runs `fallback` when there is one; without, it is "no command given".
 */
export function parseCommand<C extends Command<Options, never>>(
  table: Readonly<Record<string, C>>,
  argv: readonly string[],
  program: string,
  fallback?: string,
): { name: string; command: C; values: Values<Options> } | null {
  const first = argv[0];
  const named = first !== undefined && !first.startsWith('-');
  if (!named && fallback === undefined) {
    if (first === '--help' || first === '-h') return null;
    const later = argv.find((a) => Object.hasOwn(table, a));
    throw new UsageError(later ? `the command comes first: ${program} ${later} [flags]` : 'no command given');
  }
  const name = named ? first : fallback!;
  if (!Object.hasOwn(table, name)) throw new UsageError(`unknown command "${name}"`);
  const c = table[name]!;
  const elsewhere = new Set(
    Object.values(table)
      .filter((x) => x !== c)
      .flatMap(spellings),
  );
  for (const s of spellings(c)) elsewhere.delete(s);
  const values = parseFlags(named ? argv.slice(1) : argv, c, `${program} ${name}`, elsewhere);
  return values && { name, command: c, values };
}

/** A number flag's range: `min` / `max` inclusive, `above` exclusive (top_p > 0); integers are safe integers. */
export interface FlagRange {
  integer?: boolean;
  min?: number;
  above?: number;
  max?: number;
}

/**
 * The ranges of the number flags several commands share, checked by numberFlag wherever a command reads them, so that a
 * value out of range is one usage error (exit 2) before anything loads, in every command alike: rounds and steps that
 * would exhaust memory, and sampling values the sampler refuses (top_p 0).
 */
export const FLAG_RANGES: Readonly<Record<string, FlagRange>> = {
  num_recursive_rounds: { integer: true, min: 1, max: 100 },
  latent_length: { integer: true, min: 1, max: 1_000_000 },
  max_latent_tokens: { integer: true, min: 1, max: 1_000_000 },
  max_new_tokens: { integer: true, min: 1, max: 1_000_000 },
  temperature: { min: 0, max: 100 },
  top_p: { above: 0, max: 1 },
  num_rollouts: { integer: true, min: 1, max: 10_000 },
  batch_size: { integer: true, min: 1, max: 1_000_000 },
  seed: { integer: true, min: 0 },
};

/**
 * A number flag's value: undefined when absent; a UsageError unless it is a number in range: `o` and the flag's
 * FLAG_RANGES entry both apply (an integer with `integer`, >= `min`, > `above`, <= `max`).
 */
export function numberFlag(flag: string, v: string | undefined, o: FlagRange = {}): number | undefined {
  if (v === undefined) return undefined;
  const t = FLAG_RANGES[flag] ?? {};
  const integer = o.integer || t.integer;
  const tighter = (x: number | undefined, y: number | undefined, pick: (...n: number[]) => number) =>
    x === undefined ? y : y === undefined ? x : pick(x, y);
  const min = tighter(o.min, t.min, Math.max);
  const above = tighter(o.above, t.above, Math.max);
  const max = tighter(o.max, t.max, Math.min);
  const n = Number(v);
  const bad = v.trim() === '' || !Number.isFinite(n) || (integer && !Number.isSafeInteger(n)) ||
    (min !== undefined && n < min) || (above !== undefined && !(n > above)) || (max !== undefined && n > max);
  if (bad) {
    const lower = above !== undefined && (min === undefined || above >= min) ? `> ${above}` : min !== undefined ? `>= ${min}` : null;
    const bounds = [lower, max !== undefined && `<= ${max}`]
      .filter(Boolean).join(' and ');
    throw new UsageError(`--${flag} ${v}: expected ${integer ? 'an integer' : 'a number'}${bounds ? ` ${bounds}` : ''}`);
  }
  return n;
}

/**
 * Upstream's 0|1 flags (argparse type=int, choices [0, 1]); `def` when absent. With `words` also true and
 * false, in any case, as train-inner and train-outer have always taken them.
 */
export function flag01(flag: string, v: string | undefined, def: boolean, words = false): boolean {
  if (v === undefined) return def;
  const s = words ? v.toLowerCase() : v;
  if (s === '1' || (words && s === 'true')) return true;
  if (s === '0' || (words && s === 'false')) return false;
  throw new UsageError(`--${flag} ${v}: expected 0 or 1`);
}

/** --kv_dtype: auto (each decoder keeps defaultKvDtype), f32 or f16; a UsageError otherwise. */
export function kvDtypeFlag(v: string | undefined): KvDType | 'auto' {
  if (v === undefined || v === 'auto') return 'auto';
  if (v === 'f32' || v === 'f16') return v;
  throw new UsageError(`--kv_dtype ${v}: expected auto, f32 or f16`);
}

/** A flag the command cannot run without. */
export function required(flag: string, v: string | undefined): string {
  if (v === undefined || v === '') throw new UsageError(`--${flag} is required`);
  return v;
}
