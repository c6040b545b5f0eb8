/**
 * Chat templates rendered under bounds. A template comes with a model folder, so it is outside input: @huggingface/jinja
 * (the renderer transformers.js uses) has no sandbox, and `range(1000000000)` or a loop that doubles a string takes the
 * process down. Here the same parser and interpreter run with Hugging Face's sandbox cap on range() (100,000 items, as
 * jinja2.sandbox's MAX_RANGE), a cap on every string and list a step makes and on the output, a step count and a
 * deadline; past any of them the render stops with TemplateLimitExceeded.
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { TemplateLimitExceeded } from '../errors.ts';

/** The bounds of one render. */
export const TEMPLATE_LIMITS = {
  /** Items of one range(), as jinja2.sandbox.MAX_RANGE. */
  range: 100_000,
  /** Characters of any string a step makes, the output included (a prompt past a million tokens fits no model's context). */
  chars: 8 * 1024 * 1024,
  /** Items of any list a step makes. */
  items: 1_000_000,
  /** Characters made by all steps together: what a loop that emits a large string many times costs. */
  work: 256 * 1024 * 1024,
  /** Evaluation steps, loop iterations and range() items (Qwen3's template takes 30,000 for 200 messages). */
  steps: 1_000_000,
  /** Wall time of one render, in milliseconds. */
  ms: 5_000,
};

type Statement = Parameters<Interpreter['evaluate']>[0];
type Value = ReturnType<Interpreter['evaluate']>;

/** The library's strftime_now, reached through a template of its own (its globals are not exported). */
const STRFTIME = new Template('{{ strftime_now(format) }}');

class BoundedInterpreter extends Interpreter {
  private steps = 0;
  private work = 0;
  private readonly deadline: number;

  constructor(env: Environment, private readonly limits: typeof TEMPLATE_LIMITS, private readonly what: string) {
    super(env);
    this.deadline = performance.now() + limits.ms;
  }

  private stop(bound: string): never {
    throw new TemplateLimitExceeded(`the chat template of ${this.what} ${bound}, so it was stopped; a chat template only formats ` +
      'the messages: use the template that ships with the model, or fix chat_template.jinja / tokenizer_config.json');
  }

  /** Counts `n` steps of work (an evaluation, a loop iteration, an item made) and checks the step and time bounds. */
  charge(n = 1): void {
    const l = this.limits;
    const before = this.steps;
    if ((this.steps += n) > l.steps) this.stop(`took more than ${l.steps.toLocaleString('en-US')} steps`);
    if (before >> 8 !== this.steps >> 8 && performance.now() > this.deadline) this.stop(`took more than ${l.ms / 1000} s`);
  }

  override evaluate(statement: Statement, environment: Environment): Value {
    const l = this.limits;
    this.charge();
    const v = super.evaluate(statement, environment);
    if (v.type === 'StringValue') {
      const n = (v.value as string).length;
      if (n > l.chars) this.stop(`made a string of more than ${l.chars.toLocaleString('en-US')} characters`);
      if ((this.work += n) > l.work) this.stop(`made more than ${l.work.toLocaleString('en-US')} characters in all`);
    } else if ((v.type === 'ArrayValue' || v.type === 'TupleValue') && (v.value as unknown[]).length > l.items) {
      this.stop(`made a list of more than ${l.items.toLocaleString('en-US')} items`);
    }
    return v;
  }
}

// A loop's iterations run its body through evaluateBlock (private in the library's types) without an evaluation when the
// body is empty: each one is charged a step here.
type Blocks = { evaluateBlock(statements: Statement[], environment: Environment): Value };
const evaluateBlock = (Interpreter.prototype as unknown as Blocks).evaluateBlock;
Object.defineProperty(BoundedInterpreter.prototype, 'evaluateBlock', {
  value(this: BoundedInterpreter, statements: Statement[], environment: Environment): Value {
    this.charge();
    return evaluateBlock.call(this, statements, environment);
  },
});

/** A parsed chat template whose render() is bounded by `limits`; `what` names the model folder in messages. */
export class BoundedTemplate {
  private readonly parsed: Template['parsed'];

  constructor(text: string, private readonly what: string, private readonly limits = TEMPLATE_LIMITS) {
    this.parsed = new Template(text).parsed;
  }

  /** The rendered text; TemplateLimitExceeded past a bound, the library's error for a template that fails. */
  render(items: Record<string, unknown> = {}): string {
    const env = new Environment();
    let interpreter: BoundedInterpreter | undefined;
    const range = (start: number, stop?: number, step = 1): number[] => {
      if (stop === undefined) [start, stop] = [0, start];
      if (step === 0) throw new Error('range() step must not be zero');
      const n = Math.ceil((stop - start) / step);
      if (Number.isNaN(n)) throw new Error(`range() takes numbers, got range(${start}, ${stop}, ${step})`);
      if (!(n <= this.limits.range)) {
        throw new TemplateLimitExceeded(`the chat template of ${this.what} asked for range(${start}, ${stop}, ${step}), more than ` +
          `${this.limits.range.toLocaleString('en-US')} items (the cap of Hugging Face's Jinja sandbox), so it was stopped; ` +
          'use the template that ships with the model, or fix chat_template.jinja / tokenizer_config.json');
      }
      interpreter?.charge(Math.max(0, n));
      return Array.from({ length: Math.max(0, n) }, (_, i) => start + i * step);
    };
    // the library's globals (setupGlobals is not exported), range() capped
    const globals: Record<string, unknown> = {
      false: false, true: true, none: null, False: false, True: true, None: null,
      raise_exception: (message: string) => {
        throw new Error(message);
      },
      range,
      strftime_now: (format: unknown) => STRFTIME.render({ format: String(format) }),
    };
    // as the library does, a variable given that is also a global is an error ("Variable already declared")
    for (const [k, v] of [...Object.entries(globals), ...Object.entries(items)]) env.set(k, v);
    interpreter = new BoundedInterpreter(env, this.limits, this.what);
    const out = interpreter.run(this.parsed);
    return out.value as string;
  }
}
