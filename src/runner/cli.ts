/**
 * `rmas`: the engine's commands from the command line (Node). Started by bin/rmas.js, which points Dawn at the
 * bundled lavapipe and runs this file through tsx. One table holds every command (its flags, aliases, usage and
 * what it runs); src/runner/args.ts parses them.
 * Exit codes: 0 done, 1 an engine error (its name and message on stderr), 2 bad arguments (usage).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isEchoed, type ProcessGroup } from '../dist/group';
import { RmasError, UsageError, WebGpuUnavailable } from '../errors';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { CudaBackend } from '../tensor/cuda';
import { WebGpuBackend } from '../tensor/webgpu';
import { command, parseCommand, type Command, type Options, type Values } from './args';
import { ASK_OPTIONS, ASK_USAGE, askCmd } from './ask-cmd';
import { CONVERT_OPTIONS, CONVERT_USAGE, convertCmd } from './convert-cmd';
import { openPlacement, parseDevices } from './devices';
import { closeProcessGroup, processGroup, rankDevices, withResumeNote } from './dist';
import { FORWARD_OPTIONS, FORWARD_USAGE, GENERATE_OPTIONS, GENERATE_USAGE, forwardCmd, generateCmd } from './generate-cmd';
import { DOWNLOAD_OPTIONS, DOWNLOAD_USAGE, downloadCmd } from './download-cmd';
import { HEALTHCHECK_OPTIONS, HEALTHCHECK_USAGE, formatReport, healthcheck, healthLevel } from './healthcheck';
import { PLAN_MEMORY_OPTIONS, PLAN_MEMORY_USAGE, planMemoryCmd } from './plan-memory-cmd';
import { RUN_OPTIONS, RUN_USAGE, runCmd } from './run-cmd';
import { trainCmd } from './train-cmd';
import { TRAIN_ALIASES, TRAIN_OPTIONS, TRAIN_USAGE } from './train-args';

/**
 * Upstream's --device (run.py, run_custom.py): `cuda`, `cpu` or `cuda:N`, spelled here as --backend and
 * --devices. The values of --backend and --devices to use; a --backend or --devices that says otherwise is
 * a usage error naming both.
 */
export function deviceFlag(
  v: { device?: string; backend?: string; devices?: string },
  usage: (m: string) => Error,
): { backend?: string; devices?: string } {
  const { device, backend, devices } = v;
  if (device === undefined) return { backend, devices };
  const m = /^(cuda|cpu)(?::(\d+))?$/.exec(device.trim());
  if (!m || (m[1] === 'cpu' && m[2] !== undefined))
    throw usage(`--device ${device}: expected cuda, cpu or cuda:N (upstream's spelling; --backend webgpu for WebGPU)`);
  const be = m[1]!;
  if (backend !== undefined && backend !== be)
    throw usage(`--device ${device} asks for the ${be} backend but --backend is ${backend}; give one of them`);
  if (m[2] !== undefined) {
    if (
      devices !== undefined &&
      devices
        .split(',')
        .map((x) => x.trim())
        .join(',') !== String(Number(m[2]))
    ) {
      throw usage(`--device ${device} picks CUDA device ${Number(m[2])} but --devices is ${devices}; give one of them`);
    }
    return { backend: be, devices: String(Number(m[2])) };
  }
  return { backend: be, devices };
}

async function pickBackend(choice: string | undefined, device = 0, say: (s: string) => void): Promise<Backend> {
  if (choice !== undefined && choice !== 'webgpu' && choice !== 'cpu' && choice !== 'cuda')
    throw new UsageError(`--backend ${choice}: expected webgpu, cpu or cuda`);
  let be: Backend;
  if (choice === 'cpu') be = new CpuBackend('f32');
  else if (choice === 'cuda') be = await CudaBackend.create({ device });
  else if (choice === 'webgpu') be = await WebGpuBackend.create();
  else {
    try {
      be = await WebGpuBackend.create();
    } catch (e) {
      if (!(e instanceof WebGpuUnavailable)) throw e;
      say(`no WebGPU adapter (${e.message}); `);
      be = new CpuBackend('f32');
    }
  }
  say(`backend: ${be.name}\n`);
  return be;
}


type Placement = (roles: readonly string[]) => Promise<Record<string, Backend>>;

/** What a command gets from the program: the output streams, and the backends its flags ask for. */
interface Runner {
  out(s: string): void;
  err(s: string): void;
  /** Progress redraws one line (a terminal) rather than printing a line at a time. */
  tty: boolean;
  /**
   * The backend of --backend (or upstream's --device), opened when the command asks for it, and with
   * --devices over several GPUs the placement of a system's roles; `one` for a command that runs one model.
   */
  devices(
    v: { backend?: string; devices?: string; device?: string },
    one?: boolean,
  ): { backend: () => Promise<Backend>; place?: Placement };
  /**
   * The job's process group (world size 1 without mpirun), for the commands that split their work across
   * ranks; call it before devices() so that each rank of a machine takes its share of --devices. Ranks
   * other than 0 then print nothing but errors.
   */
  group(): ProcessGroup;
}

async function healthcheckCmd(a: Values<typeof HEALTHCHECK_OPTIONS>, r: Runner): Promise<number> {
  const level = healthLevel(a.level);
  if (level === null) throw new UsageError(`--level ${a.level}: expected 1, 2 or 3`);
  const report = await healthcheck(level, {
    webgpu: async () => {
      const backend = await WebGpuBackend.create();
      return { backend, close: () => backend.ctx.destroy() };
    },
    cuda: () => CudaBackend.create(),
  });
  r.out(a.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
  return report.ok ? 0 : 1;
}

/** Every command of `rmas`, in the order the usage lists them. Upstream's spellings are the flags' names; the aliases are other spellings taken too. */
const COMMANDS: Readonly<Record<string, Command<Options, Runner>>> = {
  forward: command({
    options: FORWARD_OPTIONS,
    usage: FORWARD_USAGE,
    summary: "one model's hidden states and logits for token ids or embeddings",
    run: (v, r: Runner) => forwardCmd(v, r.devices(v, true).backend),
  }),
  generate: command({
    options: GENERATE_OPTIONS,
    summary: "one model's text, with tokens/s and the GPU work per token",
    aliases: { 'max-new-tokens': 'max_new_tokens', 'top-p': 'top_p', 'top-k': 'top_k' },
    usage: GENERATE_USAGE,
    run: (v, r: Runner) => generateCmd(v, r.devices(v, true).backend),
  }),
  ask: command({
    options: ASK_OPTIONS,
    aliases: { q: 'question' },
    usage: ASK_USAGE,
    summary: "asks one or more questions through a system (upstream's run_custom.py)",
    run: (v, r: Runner) => {
      const d = r.devices(v);
      return askCmd(v, d.backend, r.out, r.err, d.place);
    },
  }),
  run: command({
    options: RUN_OPTIONS,
    usage: RUN_USAGE,
    summary: "scores a benchmark with pass@k (upstream's inference/run.py)",
    run: (v, r: Runner) => {
      const g = r.group();
      const d = r.devices(v);
      return runCmd(v, d.backend, r.out, r.err, d.place, g);
    },
  }),
  'train-inner': command({
    options: TRAIN_OPTIONS,
    aliases: TRAIN_ALIASES,
    usage: TRAIN_USAGE,
    summary: "trains one role's inner link on its frozen agent (upstream's train/train_inner.py)",
    run: (v, r: Runner) => {
      const g = r.group();
      return trainCmd('inner', v, r.devices(v, true).backend, r, undefined, g);
    },
  }),
  'train-outer': command({
    options: TRAIN_OPTIONS,
    aliases: TRAIN_ALIASES,
    usage: TRAIN_USAGE,
    summary: "trains a style's outer links through all its agents (upstream's train/train_outer.py)",
    run: (v, r: Runner) => {
      const g = r.group();
      const d = r.devices(v);
      return trainCmd('outer', v, d.backend, r, d.place, g);
    },
  }),
  'plan-memory': command({
    options: PLAN_MEMORY_OPTIONS,
    usage: PLAN_MEMORY_USAGE,
    summary: 'the device memory of a training step, before any weight is read',
    run: (v, r: Runner) => planMemoryCmd(v, r.out),
  }),
  convert: command({
    options: CONVERT_OPTIONS,
    usage: CONVERT_USAGE,
    summary: "links between .pt, .safetensors and the page's bundles (.zip)",
    run: async (v, r: Runner) => {
      r.out(await convertCmd(v));
    },
  }),
  download: command({
    options: DOWNLOAD_OPTIONS,
    positional: 'repo',
    usage: DOWNLOAD_USAGE,
    summary: "fetches a style's repos, or any repo, into the Hugging Face cache (huggingface-cli download)",
    run: (v, r: Runner) => downloadCmd(v, r.out, r.err, r.tty),
  }),
  healthcheck: command({
    options: HEALTHCHECK_OPTIONS,
    usage: HEALTHCHECK_USAGE,
    summary: "dependencies, styles, devices and the hub's files (upstream's healthcheck.py)",
    run: healthcheckCmd,
  }),
};

/** What --device and --backend mean, after the usage of a command that takes them. */
export const DEVICE_NOTES =
  `  --device cuda|cpu|cuda:N (forward, generate, ask, run) is upstream's spelling of --backend cuda|cpu [--devices N]
  --backend defaults to webgpu when an adapter is found, else cpu; cuda needs an NVIDIA GPU and the addon
      (npm run build:cuda). With --backend cuda, --devices 0,1,… picks the GPUs: forward, generate and
      train-inner use one; ask, run and train-outer place the roles over them in role order (role i on the
      i-th device, wrapping), one role per GPU for a system that does not fit on one`;

/** `rmas --help`: the commands, one line each. */
export const USAGE = `usage: rmas COMMAND [flags]   (rmas COMMAND --help: its flags; rmas --version: the version)
commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`)
  .join('\n')}`;

/** `rmas COMMAND --help`: its usage, and what --device and --backend mean where it takes them. */
export function commandUsage(name: string): string {
  const c = COMMANDS[name]!;
  return `usage:\n${c.usage}${'backend' in c.options ? `\n${DEVICE_NOTES}` : ''}`;
}

/** `rmas --version`: the package's version. */
export const VERSION = (JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string })
  .version;

/** Runs one command; returns the exit code (never calls process.exit, so tests can call it in-process). */
export async function main(argv: string[]): Promise<number> {
  let made: Backend | null = null;
  let group: ProcessGroup | null = null;
  const usage = (m: string) => new UsageError(m);
  const runner: Runner = {
    out: (s) => void process.stdout.write(s),
    err: (s) => void process.stderr.write(s),
    tty: !!process.stderr.isTTY,
    devices: (v, one = false) => {
      const { backend, devices } = deviceFlag(v, usage);
      const given = parseDevices(devices, backend, usage);
      const ids = group ? rankDevices(given, backend, group) : given;
      if (one && ids && ids.length > 1) throw usage(`--devices ${ids.join(',')}: this command runs one model; give one device`);
      return {
        backend: async () => (made = await pickBackend(backend, ids?.[0], runner.err)),
        ...(ids && ids.length > 1
          ? { place: (roles: readonly string[]) => openPlacement(roles, ids, runner.err) }
          : {}),
      };
    },
    group: () => {
      group ??= processGroup(runner.err);
      if (group.rank > 0) {
        runner.err = () => {};
        runner.tty = false;
      }
      return group;
    },
  };
  let ok = false;
  // the command named first, once known: a usage error shows its usage alone
  const named = argv[0] !== undefined && Object.hasOwn(COMMANDS, argv[0]) ? argv[0] : null;
  const usageOf = () => (named ? commandUsage(named) : USAGE);
  try {
    if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-v')) {
      process.stdout.write(`rmas ${VERSION}\n`);
      return 0;
    }
    const parsed = parseCommand(COMMANDS, argv, 'rmas');
    if (!parsed) {
      process.stdout.write(`${usageOf()}\n`);
      return 0;
    }
    const code = (await parsed.command.run(parsed.values, runner)) ?? 0;
    ok = code === 0;
    return code;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`rmas: ${e.message}\n${usageOf()}\n`);
      return 2;
    }
    // a rank repeating another's error leaves the printing to that rank
    if (isEchoed(e)) return 1;
    const err = withResumeNote(e) as Error;
    const g = group as ProcessGroup | null;
    const who = g && g.size > 1 ? `[rank ${g.rank}] ` : '';
    process.stderr.write(`rmas: ${who}${err instanceof RmasError ? err.name : err?.name ?? 'Error'}: ${err?.message ?? String(e)}\n`);
    if (process.env.RMAS_DEBUG && err?.stack) process.stderr.write(`${err.stack}\n`);
    return 1;
  } finally {
    const m = made as Backend | null;
    if (m instanceof WebGpuBackend) m.ctx.destroy();
    // MPI_Finalize waits for every rank: a failed rank leaves without it, and mpirun stops the others
    if (ok) closeProcessGroup();
  }
}

// Dawn keeps the event loop alive after the device is gone: exit explicitly once stdout has drained.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // started by bin/rmas.js: its IPC channel closes when it dies (even by SIGKILL), and this process stops with it
  // rather than train or evaluate on unseen (a SIGTERM handler, such as a bundle's cleanup, still runs)
  // bin/rmas.js passes this process's stderr through bin/dawn-noise.js, saying whether it ends at a terminal
  if (process.env.RMAS_STDERR_TTY === '1') (process.stderr as { isTTY?: boolean }).isTTY = true;
  delete process.env.RMAS_STDERR_TTY;
  if (process.channel) {
    process.channel.unref();
    process.on('disconnect', () => {
      process.stderr.write('rmas: the launching process (bin/rmas.js) is gone; stopping\n');
      process.kill(process.pid, 'SIGTERM');
    });
  }
  const code = await main(process.argv.slice(2));
  process.stdout.write('', () => process.exit(code));
}
