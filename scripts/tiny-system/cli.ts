/**
 * What the build entry points (scripts/tiny-system/build.ts, scripts/tiny-distillation/build.ts) share: their flag
 * helpers, the backend flag and the command dispatch of a table in rmas's shape (src/runner/args.ts).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from '../../src/errors.ts';
import { numberFlag, parseCommand, type Command, type Options } from '../../src/runner/args.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend, type CpuKernels } from '../../src/tensor/cpu.ts';

export const s = { type: 'string' } as const;
export const b = { type: 'boolean' } as const;

/** A flag whose value is one of `choices`. */
export function oneOf<T extends string>(flag: string, v: string | undefined, choices: readonly T[]): T | undefined {
  if (v !== undefined && !(choices as readonly string[]).includes(v))
    throw new UsageError(`--${flag} ${v}: expected one of ${choices.join(', ')}`);
  return v as T | undefined;
}

/** An integer flag, at least `min` when given. */
export const int = (flag: string, v: string | undefined, min?: number) =>
  numberFlag(flag, v, { integer: true, ...(min !== undefined ? { min } : {}) });

/** --backend cpu (default) or webgpu. */
export async function openBackend(name: string | undefined): Promise<Backend> {
  if (oneOf('backend', name, ['cpu', 'webgpu']) !== 'webgpu') return new CpuBackend('f32');
  return (await import('../../src/tensor/webgpu.ts')).WebGpuBackend.create();
}

export const json = (x: unknown) => `${JSON.stringify(x, null, 2)}\n`;

/** The usage text of a command table. */
export const usageOf = (program: string, commands: Readonly<Record<string, Command<Options, void>>>) =>
  `usage: npx tsx ${program} [COMMAND] [flags]\n${Object.values(commands)
    .map((c) => c.usage)
    .join('\n')}`;

/** Runs one command of the table (`all` without one); returns the exit code. Errors other than usage propagate. */
export async function runCommand(
  program: string,
  commands: Readonly<Record<string, Command<Options, void>>>,
  argv: readonly string[],
): Promise<number> {
  const usage = usageOf(program, commands);
  try {
    const parsed = parseCommand(commands, argv, 'build.ts', 'all');
    if (!parsed) {
      process.stdout.write(`${usage}\n`);
      return 0;
    }
    await parsed.command.run(parsed.values);
    return 0;
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`build.ts: ${e.message}\n${usage}\n`);
    return 2;
  }
}

/**
 * The CPU kernels a tiny system is built on, the ones its committed weights and recorded loss curves were made on
 * (the SIMD kernels sum in another order than the TypeScript reference, and AdamW's first steps turn that rounding
 * into other weights), so that a rebuild from the seed gives them again: the reference for the systems built
 * before the SIMD kernels existed, 'wasm' for the recursion system. Set for this process and the `rmas` children
 * it starts, unless RMAS_CPU_KERNELS already says otherwise.
 */
export function useBuildKernels(kernels: CpuKernels = 'ts'): void {
  process.env.RMAS_CPU_KERNELS ||= kernels;
}

/**
 * When `moduleUrl` is the program node was started with, runs `main` on the command line (on the build's CPU
 * kernels) and exits with its code once stdout has drained (a WebGPU backend, Dawn, keeps the event loop alive
 * otherwise).
 */
export async function runIfMain(
  moduleUrl: string,
  main: (argv: readonly string[]) => Promise<number>,
  kernels: CpuKernels = 'ts',
): Promise<void> {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(resolve(process.argv[1])).href) return;
  useBuildKernels(kernels);
  const code = await main(process.argv.slice(2));
  process.stdout.write('', () => process.exit(code));
}
