/**
 * `npm run test:cuda` (bench/cuda.ts): the cuda backend on a GPU machine (a few minutes on one H100).
 *   (a) every parity case of src/kernels/cases.ts on cuda against the CPU reference (each case's own tolerance),
 *       the matmul cases in both HalfGemm modes; an op without a `cuda` hook fails, named;
 *   (b) the tiny models (models/tiny) against their torch golden files: hidden, logits, d L / d inputsEmbeds
 *       (the loss of test/tiny-golden.gpu.test.ts): with HalfGemm 'split', bound 1e-4 as for the other f32
       backends; with 'round' (bf16 activations into every product), bound 2e-2 (the Qwen3.5 models 0.15: roundGoldenBound);
 *   (g) gemm_lt itself against an f64 reference: every transpose pair, f32/bf16/f16 weights (half ones with and
 *       without split), padded leading dimensions and batch strides, bias, accumulate; the padding must stay untouched;
 *   (c) cuBLASLt GEMM TFLOP/s at Qwen3-1.7B shapes (bf16 weights, f32 activations converted on the fly), and
 *       decode tokens/s of a random-weights 4-layer decoder at that width (bf16 weights);
 *   (d) devices: copyPeer on one device; with two or more, a tensor and its gradient moved between GPUs
 *       (F.moveTo) and the outer golden run (test/train/golden.ts) with one role per GPU against one GPU;
 *   (e) train: the inner (3 steps) and outer (2 steps, and the non-last weighting) loops against PyTorch
 *       float64 (test/train/golden.ts): HalfGemm 'split' within the bounds of the other f32 backends (1e-5 inner,
 *       1e-4 outer); 'round', loss and gradient norm within 1e-2;
 *   (f) ask: the shipped tiny system (models/tiny/system) on 16 test questions, greedy, text-MAS and
 *       RecursiveMAS at 2 rounds, on cuda and on the CPU reference: the same number correct (±1).
 * Without a usable CUDA device it prints why and exits 0 ("skipped: needs a CUDA device").
 *   (h) scale: a forward, backward and decode at Qwen3-8B width and 4096 tokens (2 layers; see scale()), the
 *       step's pool peak against its training memory plan (src/train/memory.ts): within [0.95, 1.01] of it;
 *   (i) nccl, with NCCL and two or more GPUs: two processes (this script again, no MPI; the unique id goes through a
 *       temp file), one per GPU, all-reduce and broadcast 1M floats, checked exactly, and the all-reduce's bus bandwidth;
 * Exit 1 when a check fails. RMAS_CUDA_ONLY=parity|golden|gemm|perf|devices|train|ask|scale|nccl runs one part;
 * RMAS_CUDA_CASES=<regex> runs the parity cases whose "group/name" matches; RMAS_CUDA_ASK_ROWS=n asks n questions in (f).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DType } from '../src/formats/dtype';
import { decode, encode } from '../src/formats/encode';
import { F, Tape } from '../src/autograd';
import { ncclVersionText } from '../src/dist/nccl';
import { CudaUnavailable } from '../src/errors';
import { CUDA_DTYPE, type HalfGemm } from '../src/kernels/kernel';
import { allCases } from '../src/kernels/cases';
import { Decoder, generate, loadDecoderWeights } from '../src/model';
import { type WeightSource, weightSpecs } from '../src/model/weights';
import { planTrainingMemory } from '../src/train/memory';
import { randomDecoder } from '../src/model/model.bench';
import { tinyConfig } from '../src/testing/model';
import { CpuBackend } from '../src/tensor/cpu';
import { CudaBackend } from '../src/tensor/cuda';
import { newRng, type ParityEnv } from '../src/kernels/workbench/parity';
import { TINY_GOLDEN_MODELS, formatGoldenErrors, roundGoldenBound, tinyGoldenErrors } from '../src/testing/tiny-golden';
import { Rng } from '../src/util/rng';

const only = process.env.RMAS_CUDA_ONLY;
const failures: string[] = [];
const log = (s: string) => process.stdout.write(`${s}\n`);
/** NCCL's f32 sizes in (i): 1M floats checked; a larger buffer too, for the bus bandwidth, where timing means something. */
const NCCL_SIZES = [2 ** 20, 2 ** 25];
// (i)'s ranks: this script started again by nccl() with RMAS_CUDA_NCCL_RANK set; they do only their part
if (process.env.RMAS_CUDA_NCCL_RANK) {
  log(JSON.stringify(await ncclRank(Number(process.env.RMAS_CUDA_NCCL_RANK), process.env.RMAS_CUDA_NCCL_ID!)));
  process.exit(0);
}

let cuda: CudaBackend;
try {
  cuda = await CudaBackend.create();
} catch (e) {
  if (!(e instanceof CudaUnavailable)) throw e;
  log(`CudaUnavailable: ${e.message}`);
  log('skipped: needs a CUDA device');
  process.exit(0);
}
const probe = cuda.addon.probe();
log(
  `${cuda.name}; driver ${probe.driverVersion}, runtime ${probe.runtimeVersion}, cuBLASLt ${probe.cublasLt ?? `missing (${probe.cublasLtError})`}`,
);
log(`registered kernels: ${cuda.addon.kernels().join(', ')}`);

/** Every parity case in the backend's HalfGemm, then the matmul cases again in the other one. */
async function parity() {
  await parityRun(null);
  await withHalfGemm(cuda.halfGemm === 'round' ? 'split' : 'round', () => parityRun('matmul'));
}

/** Runs fn with the backend's HalfGemm set to `mode`, then puts the backend's own back. */
async function withHalfGemm(mode: HalfGemm, fn: () => Promise<void>) {
  const mode0 = cuda.halfGemm;
  cuda.halfGemm = mode;
  try {
    await fn();
  } finally {
    cuda.halfGemm = mode0;
  }
}

async function parityRun(onlyGroup: string | null) {
  const missing = new Map<string, string[]>();
  let passed = 0;
  let total = 0;
  let webgpuOnly = 0;
  const pick = process.env.RMAS_CUDA_CASES ? new RegExp(process.env.RMAS_CUDA_CASES) : null;
  for (const { group, cases } of allCases) {
    if (onlyGroup && group !== onlyGroup) continue;
    for (const [i, c] of cases.entries()) {
      if (pick && !pick.test(`${group}/${c.name}`)) continue;
      if (c.webgpuOnly) {
        webgpuOnly++;
        continue;
      }
      total++;
      // the cases use env.gpu only through the Backend interface; ParityEnv types it as the WebGPU backend
      const env: ParityEnv = { gpu: cuda, cpu: CpuBackend.reference(), rng: newRng(1000 + i), f16: true };
      try {
        await c.run(env);
        await cuda.sync();
        passed++;
      } catch (e) {
        const err = e as Error;
        const hook = /^(\S+): this op has no CUDA kernel yet/.exec(err.message);
        if (err.name === 'UnsupportedFeature' && hook) missing.set(hook[1], [...(missing.get(hook[1]) ?? []), `${group}/${c.name}`]);
        else failures.push(`parity (half gemm '${cuda.halfGemm}') ${group}/${c.name}: ${err.name}: ${err.message.split('\n')[0]}`);
        try {
          await cuda.sync();
        } catch (s) {
          failures.push(`parity ${group}/${c.name}: deferred CUDA error ${(s as Error).message}`);
        }
      }
    }
  }
  for (const [op, cases] of missing)
    failures.push(`missing cuda hook: ${op} (${cases.length} case${cases.length > 1 ? 's' : ''}, e.g. ${cases[0]})`);
  const what = onlyGroup ? `${onlyGroup} cases` : 'cases';
  log(
    `(a) parity, half gemm '${cuda.halfGemm}': ${passed}/${total} ${what} passed; ${missing.size} op(s) without a cuda hook; ${webgpuOnly} WebGPU-only case(s) not run`,
  );
}

/**
 * The tiny checkpoints hold bf16 weights. HalfGemm 'split' carries the f32 activations whole into cuBLASLt (three
 * bf16 parts): the f32 bound of the other backends. 'round' (the default, upstream's bf16 numerics) rounds them to bf16's 8
 * bits before every product: a bound sized for that rounding through the whole network.
 */
const GOLDEN_BOUND = { split: 1e-4, round: roundGoldenBound } as const;

async function golden() {
  for (const mode of ['split', 'round'] as const) await withHalfGemm(mode, () => goldenModels(mode));
}

async function goldenModels(mode: 'split' | 'round') {
  for (const name of TINY_GOLDEN_MODELS) {
    const bound = mode === 'round' ? GOLDEN_BOUND.round(name) : GOLDEN_BOUND.split;
    try {
      const err = await tinyGoldenErrors(cuda, name);
      log(`(b) ${name}, half gemm '${mode}': ${formatGoldenErrors(err)}`);
      for (const [k, v] of Object.entries(err))
        if (!(v < bound)) failures.push(`golden ${name} (half gemm '${mode}'): ${k} off by ${v.toExponential(2)} (bound ${bound})`);
    } catch (x) {
      failures.push(`golden ${name} (half gemm '${mode}'): ${(x as Error).name}: ${(x as Error).message.split('\n')[0]}`);
    }
  }
}

/**
 * One gemm_lt launch on padded, strided, batched operands against an f64 loop over the same values: A rounded to
 * B's half type as the addon converts it, or (split) A itself.
 */
function gemmCase(rng: Rng, tA: number, tB: number, dt: DType, bias: boolean, acc: boolean, split: boolean): number {
  const a = cuda.addon;
  const [M, N, K, batch, alpha] = [5, 7, 33, 3, 0.75];
  const [rA, cA] = tA ? [K, M] : [M, K];
  const [rB, cB] = tB ? [N, K] : [K, N];
  const [lda, ldb, ldc] = [cA + 1, cB + 3, N + 2];
  const [sA, sB, sC] = [rA * lda + 5, rB * ldb + 2, M * ldc + 3];
  // values as the device will see them: A rounded to B's type (the addon converts), B stored in its type
  const round = (v: Float32Array, d: DType) => (d === 'f32' ? v : decode(d, encode(d, v, [v.length]), [v.length]));
  const A = rng.normals(batch * sA), B = round(rng.normals(batch * sB), dt), C0 = rng.normals(batch * sC), bv = rng.normals(N);
  const Ar = split ? A : round(A, dt);
  const up = (v: Float32Array, d: DType) => {
    const b = encode(d, v, [v.length]);
    const p = a.malloc(b.byteLength);
    a.upload(p, b);
    return p;
  };
  const pA = up(A, 'f32'), pB = up(B, dt), pC = up(C0, 'f32'), pBias = bias ? up(bv, 'f32') : 0n;
  a.launch(
    'gemm_lt',
    [pA, pB, pC, pBias],
    [M, N, K, batch, tA, tB, lda, ldb, ldc, sA, sB, sC, CUDA_DTYPE.f32, CUDA_DTYPE[dt], acc ? 1 : 0, split ? 1 : 0],
    [alpha],
  );
  const got = decode('f32', a.download(pC, batch * sC * 4), [batch * sC]);
  [pA, pB, pC, pBias].forEach((p) => p && a.free(p));
  const want = Float64Array.from(C0);
  let scale = 0;
  for (let b = 0; b < batch; b++) {
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let sum = 0;
        for (let k = 0; k < K; k++) sum += Ar[b * sA + (tA ? k * lda + m : m * lda + k)] * B[b * sB + (tB ? n * ldb + k : k * ldb + n)];
        const i = b * sC + m * ldc + n;
        want[i] = alpha * sum + (bias ? bv[n] : 0) + (acc ? C0[i] : 0);
        scale = Math.max(scale, Math.abs(want[i]));
      }
    }
  }
  let err = 0;
  for (let i = 0; i < want.length; i++) err = Math.max(err, Math.abs(got[i] - want[i]));
  return err / scale;
}

async function gemmCheck() {
  const rng = new Rng(7);
  let worst = 0;
  let n = 0;
  let worstSplit = 0;
  const kinds = [['f32', false], ['bf16', false], ['f16', false], ['bf16', true], ['f16', true]] as const;
  for (const [dt, split] of kinds) {
    for (const [tA, tB] of [[0, 0], [0, 1], [1, 0], [1, 1]]) {
      for (const [bias, acc] of [[false, false], [true, false], [false, true], [true, true]]) {
        const label = `gemm_lt ${dt}${split ? ' split' : ''} transA=${tA} transB=${tB}${bias ? ' +bias' : ''}${acc ? ' +C' : ''}`;
        try {
          const e = gemmCase(rng, tA, tB, dt, bias, acc, split);
          if (split) worstSplit = Math.max(worstSplit, e);
          else worst = Math.max(worst, e);
          n++;
          // f32 accumulation of 33 products on inputs rounded alike on both sides; split: three bf16 parts carry all of
          // A, two f16 parts 22 bits (2^-23 of |A| at worst)
          if (!(e < 1e-5)) failures.push(`${label}: max|Δ|/max|want| ${e.toExponential(2)} (bound 1e-5)`);
        } catch (x) {
          failures.push(`${label}: ${(x as Error).message}`);
        }
      }
    }
  }
  log(
    `(g) gemm_lt vs f64 reference: ${n}/${kinds.length * 16} launches ran, worst scaled error ${worst.toExponential(2)}; split (A unrounded) ${worstSplit.toExponential(2)}`,
  );
}

/** cuBLASLt through gemm_lt: C[M,N] = A[M,K] (f32) · W[N,K]^T (bf16), the shape of a linear layer. */
function gemmTflops(M: number, N: number, K: number, split = false): number {
  const a = cuda.addon;
  const A = a.malloc(M * K * 4), W = a.malloc(N * K * 2), Cm = a.malloc(M * N * 4);
  a.memset(A, M * K * 4), a.memset(W, N * K * 2);
  const ints = [M, N, K, 1, 0, 1, K, K, N, 0, 0, 0, CUDA_DTYPE.f32, CUDA_DTYPE.bf16, 0, split ? 1 : 0];
  const run = () => a.launch('gemm_lt', [A, W, Cm, 0n], ints, [1]);
  for (let i = 0; i < 3; i++) run();
  a.sync();
  const iters = M >= 4096 ? 20 : 100;
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) run();
  a.sync();
  const s = (performance.now() - t0) / 1000 / iters;
  [A, W, Cm].forEach((p) => a.free(p));
  return (2 * M * N * K) / s / 1e12;
}

async function perf() {
  if (process.env.RMAS_CUDA_EMU_DRYRUN === '1' && cuda.name.includes('emulator'))
    log('(c) emulator dry run: the launches below are checked, not run, so their figures time nothing');
  for (const M of [1, 512, 4096]) {
    const row = [[6144, 2048, 'gate/up 2048→6144'], [2048, 6144, 'down 6144→2048'], [2048, 2048, 'o 2048→2048']] as const;
    try {
      log(
        `(c) gemm_lt bf16 M=${M}: ${row.map(([N, K, what]) => `${what} ${gemmTflops(M, N, K).toFixed(M === 1 ? 3 : 1)} TFLOP/s`).join(', ')}`,
      );
    } catch (e) {
      failures.push(`gemm_lt M=${M}: ${(e as Error).message}`);
    }
  }
  try {
    // HalfGemm 'split': the same product's useful TFLOP/s (two tensor-core passes and the hi/lo conversion)
    log(`(c) gemm_lt bf16 split M=4096: gate/up 2048→6144 ${gemmTflops(4096, 6144, 2048, true).toFixed(1)} TFLOP/s`);
  } catch (e) {
    failures.push(`gemm_lt split: ${(e as Error).message}`);
  }
  try {
    const layers = 4;
    const c = tinyConfig('qwen3', {
      hidden_size: 2048,
      num_hidden_layers: layers,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      intermediate_size: 6144,
      vocab_size: 151936,
      tie_word_embeddings: true,
      max_position_embeddings: 4096,
    });
    const model = await randomDecoder(c, cuda, null);
    const prompt = Array.from({ length: 64 }, (_, i) => (i * 7919) % 151936);
    await generate(model, { inputIds: prompt.slice(0, 8), maxNewTokens: 4, sampling: { greedy: true }, eosTokenIds: [] });
    const r = await generate(model, { inputIds: prompt, maxNewTokens: 64, sampling: { greedy: true }, eosTokenIds: [] });
    log(
      `(c) decode, random bf16 Qwen3-1.7B width (hidden 2048, ${layers} of 28 layers, vocab 151936): prefill ${r.prefillTokensPerSec.toFixed(0)} tokens/s, ` +
        `decode ${r.decodeTokensPerSec.toFixed(1)} tokens/s (${(1000 / r.decodeTokensPerSec).toFixed(2)} ms/token)`,
    );
  } catch (e) {
    failures.push(`decode: ${(e as Error).name}: ${(e as Error).message.split('\n')[0]}`);
  }
}

async function devices() {
  const a = cuda.addon;
  try {
    const bytes = Uint8Array.from({ length: 4096 }, (_, i) => (i * 37 + 11) & 255);
    const [src, dst] = [a.malloc(bytes.length), a.malloc(bytes.length)];
    a.upload(src, bytes);
    a.copyPeer(dst, cuda.device, src, cuda.device, bytes.length);
    const back = a.download(dst, bytes.length);
    [src, dst].forEach((p) => a.free(p));
    const same = back.every((v, i) => v === bytes[i]);
    log(`(d) copyPeer on device ${cuda.device}: ${same ? 'bytes equal' : 'BYTES DIFFER'}`);
    if (!same) failures.push('devices: copyPeer on one device changed the bytes');
  } catch (e) {
    failures.push(`devices: copyPeer: ${(e as Error).name}: ${(e as Error).message.split('\n')[0]}`);
  }
  if (probe.devices.length < 2) {
    log(`(d) skipped: moving tensors between GPUs and one role per GPU need two CUDA devices (${probe.devices.length} here)`);
    return;
  }
  try {
    const other = await CudaBackend.create({ device: 1 });
    const x = cuda.fromValues([1.5, -2, 0.25, 4], [2, 2]);
    x.requiresGrad = true;
    const tape = new Tape();
    const loss = tape.run(() => F.sum(F.mul(F.moveTo(x, other), other.fromValues([1, 2, 3, 4], [2, 2]))));
    await tape.backward(loss);
    const [l, g] = [(await loss.read())[0], Array.from(await x.grad!.read())];
    // 1.5·1 − 2·2 + 0.25·3 + 4·4, exact in f32
    log(`(d) moveTo device 0 → 1: loss ${l} (want 14.25), gradient on device ${(x.grad!.backend as CudaBackend).device}: ${g.join(', ')}`);
    if (l !== 14.25 || g.join() !== '1,2,3,4' || x.grad!.backend !== cuda) failures.push('devices: F.moveTo between GPUs');
    tape.dispose();
    const { runOuterGolden } = await import('../test/train/golden');
    const one = await runOuterGolden(cuda, true, 2);
    const placed = await runOuterGolden(cuda, true, 2, {
      critic: other,
      solver: probe.devices.length > 2 ? await CudaBackend.create({ device: 2 }) : other,
    });
    const rel = Math.max(
      ...one.map((r, k) => Math.abs(placed[k].loss / r.loss - 1)),
      ...one.map((r, k) => Math.abs(placed[k].gradNorm / r.gradNorm - 1)),
    );
    log(`(d) outer golden run, one role per GPU against one GPU: worst relative difference of loss and grad norm ${rel.toExponential(2)}`);
    if (!(rel < 1e-5)) failures.push(`devices: one role per GPU differs from one GPU by ${rel.toExponential(2)}`);
  } catch (e) {
    failures.push(`devices: ${(e as Error).name}: ${(e as Error).message.split('\n')[0]}`);
  }
}

/**
 * The training goldens in both HalfGemm modes. 'split': the other f32 backends' bounds on loss, gradient norm and
 * optimizer state. 'round' (bf16 activations into the tiny models' bf16 products): loss and gradient norm within
 * 1e-2; the state error is reported, not bounded: Adam's first steps move each parameter by about lr·sign(g), so
 * bf16 noise in near-zero gradients changes those updates wholesale.
 */
async function train() {
  for (const mode of ['split', 'round'] as const) await withHalfGemm(mode, () => trainMode(mode));
}

async function trainMode(mode: 'split' | 'round') {
  try {
    const { TRAIN_GOLDEN: G, runInnerGolden, runOuterGolden } = await import('../test/train/golden');
    const inner = await runInnerGolden(cuda);
    const rel = (x: number, want: number) => Math.abs(x / want - 1);
    const split = mode === 'split';
    const innerLoss = inner.flatMap((st, k) => [rel(st.loss, G.inner.steps[k].loss), rel(st.gradNorm, G.inner.steps[k].grad_norm)]);
    const innerState = [...inner.map((st) => st.stateErr), inner[0].gradErr ?? 0];
    const outer = await runOuterGolden(cuda, true, 2);
    const [c2] = await runOuterGolden(cuda, false, 1);
    const outerLoss = [
      ...outer.flatMap((st, k) => [rel(st.loss, G.outer.config1.steps[k].loss), rel(st.gradNorm, G.outer.config1.steps[k].grad_norm)]),
      rel(c2.loss, G.outer.config2.loss),
    ];
    const outerState = [...outer.map((st) => st.stateErr), outer[0].gradErr ?? 0, c2.gradErr ?? 0];
    const worst = (v: number[]) => Math.max(...v);
    const [bi, bo] = split ? [1e-5, 1e-4] : [1e-2, 1e-2];
    const [wi, wo] = split
      ? [worst([...innerLoss, ...innerState]), worst([...outerLoss, ...outerState])]
      : [worst(innerLoss), worst(outerLoss)];
    log(
      `(e) training vs PyTorch f64, half gemm '${mode}': inner loop worst ${wi.toExponential(2)} (bound ${bi}), outer loop worst ${wo.toExponential(2)} (bound ${bo})` +
        (split
          ? ''
          : `; optimizer state and gradients (not bounded) inner ${worst(innerState).toExponential(2)}, outer ${worst(outerState).toExponential(2)}`),
    );
    if (!(wi < bi)) failures.push(`train (half gemm '${mode}'): inner loop off by ${wi.toExponential(2)}`);
    if (!(wo < bo)) failures.push(`train (half gemm '${mode}'): outer loop off by ${wo.toExponential(2)}`);
  } catch (e) {
    failures.push(`train (half gemm '${mode}'): ${(e as Error).name}: ${(e as Error).message.split('\n')[0]}`);
  }
}

async function askTiny() {
  try {
    const { evalTiny } = await import('../scripts/tiny-system/eval');
    const { taskSplit } = await import('../src/eval/tiny-task');
    const rows = taskSplit('test').slice(0, Number(process.env.RMAS_CUDA_ASK_ROWS ?? 16));
    const configs = ['text2', 'latent2'] as const;
    const t = performance.now();
    const onCuda = await evalTiny({ backend: cuda, rows, configs });
    const secs = (performance.now() - t) / 1000;
    const onCpu = await evalTiny({ backend: new CpuBackend('f32'), rows, configs });
    for (const [i, r] of onCuda.entries()) {
      const ref = onCpu[i];
      const same = r.answers.filter((a, k) => a === ref.answers[k]).length;
      log(
        `(f) ask, tiny system, ${r.label}: ${r.correct}/${r.total} correct on cuda, ${ref.correct}/${ref.total} on cpu; ${same}/${r.total} texts identical`,
      );
      if (Math.abs(r.correct - ref.correct) > 1) failures.push(`ask: ${r.label} scores ${r.correct} on cuda, ${ref.correct} on cpu`);
    }
    log(`(f) ask on cuda: ${secs.toFixed(1)} s for ${rows.length * configs.length} questions`);
  } catch (e) {
    failures.push(`ask: ${(e as Error).name}: ${(e as Error).message.split('\n')[0]}`);
  }
}

/**
 * (h) scale: real sizes at reduced depth, the launches a full-size run makes: Qwen3-8B width (hidden 4096, 32 / 8
 * heads of 128, intermediate 12288, vocab 151936), 2 of its 36 layers, bf16 weights (zeros: nothing to read from
 * disk), a forward and backward of 4096 tokens with cross-entropy over every row's logits, then 4 greedy tokens
 * after the 4096-token prompt. Zero weights give uniform logits, so the loss is ln 151936 exactly. The pool's
 * peak over the forward and backward (every allocation: tensors, hook scratch, cuBLASLt's workspace and operand
 * copies) is compared with the memory plan of that step, which decides what fits on a GPU. On the
 * emulator with RMAS_CUDA_EMU_DRYRUN=1, every launch's configuration is checked against the device's limits and
 * not run (the loss is then garbage and not checked): what a GPU would refuse at these sizes fails here.
 */
async function scale() {
  const dry = process.env.RMAS_CUDA_EMU_DRYRUN === '1' && cuda.name.includes('emulator');
  const T = 4096;
  const c = tinyConfig('qwen3', { hidden_size: 4096, num_hidden_layers: 2, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 128,
    intermediate_size: 12288, vocab_size: 151936, tie_word_embeddings: false, max_position_embeddings: 40960 });
  const specs = new Map(weightSpecs(c).map((w) => [w.name, w.shape]));
  const zeros: WeightSource = {
    name: 'zero weights (Qwen3-8B width)',
    has: (n) => specs.has(n),
    read: async (n) => ({ dtype: 'BF16', shape: specs.get(n)!, bytes: new Uint8Array(2 * specs.get(n)!.reduce((a, b) => a * b, 1)) }),
  };
  let weights: Awaited<ReturnType<typeof loadDecoderWeights>> | null = null;
  // the training memory plan of this very step (src/train/memory.ts; what plan-memory prints), against the pool's peak
  const plan = planTrainingMemory({
    agents: [{ name: 'scale', config: c, weightBytesPerParam: 2, tokens: T, recorded: true, logitRows: T }],
    links: [],
    recompute: 'none',
    budgetBytes: 2 ** 50,
    halfGemm: cuda.halfGemm,
  });
  try {
    await cuda.sync();
    const base = cuda.memInfo().poolUsed;
    cuda.resetMemoryPeak();
    weights = await loadDecoderWeights(c, zeros, cuda);
    const model = new Decoder(c, weights);
    const ids = Array.from({ length: T }, (_, i) => (i * 7919) % c.vocabSize);
    const t = performance.now();
    const e = model.embed(cuda.fromValues(ids, [T], 'i32'));
    e.requiresGrad = true;
    const labels = cuda.fromValues(ids.map((x) => (x + 1) % c.vocabSize), [T], 'i32');
    const tape = new Tape();
    const loss = tape.run(() => F.crossEntropy(model.forward({ inputsEmbeds: e, logits: 'all' }).logits!, labels));
    await tape.backward(loss);
    const l = (await loss.read())[0];
    const train = (performance.now() - t) / 1000;
    const peak = cuda.memInfo().poolUsedHigh - base;
    tape.dispose();
    const t2 = performance.now();
    const r = await generate(model, { inputIds: ids, maxNewTokens: 4, sampling: { greedy: true }, eosTokenIds: [] });
    const decode = (performance.now() - t2) / 1000;
    const G = (x: number) => (x / 2 ** 30).toFixed(3);
    log(
      `(h) scale${dry ? ' (emulator dry run: every launch checked, none run)' : ''}, Qwen3-8B width, 2 of 36 layers, bf16: ` +
        `forward + backward of ${T} tokens with cross-entropy over all logits ${train.toFixed(2)} s` +
        (dry ? '' : ` (loss ${l.toFixed(4)}, want ${Math.log(c.vocabSize).toFixed(4)})`) +
        `; ${r.tokens.length} tokens after the ${T}-token prompt ${decode.toFixed(2)} s`,
    );
    log(
      `(h) scale, memory of the training step (half gemm '${cuda.halfGemm}'): pool peak ${G(peak)} GiB, memory plan ${G(plan.peak)} GiB ` +
        `(weights ${G(plan.weightsTotal)}, activations ${G(plan.activations)}, logits ${G(plan.logits)}, backward transient ${G(plan.transient)}, workspace ${G(plan.workspace)})`,
    );
    if (!dry && !(Math.abs(l - Math.log(c.vocabSize)) < 1e-3))
      failures.push(`scale: loss ${l} with zero weights, want ln ${c.vocabSize} = ${Math.log(c.vocabSize)}`);
    // the plan decides what fits: it must not be below what the step takes (1% for the device allocator's rounding), nor far above
    if (!(peak <= plan.peak * 1.01 && peak >= plan.peak * 0.95))
      failures.push(`scale: the step's pool peak ${G(peak)} GiB is not within [0.95, 1.01] of the memory plan's ${G(plan.peak)} GiB`);
    for (const x of [e, labels, loss]) x.dispose();
  } catch (x) {
    failures.push(`scale: ${(x as Error).name}: ${(x as Error).message.split('\n')[0]}`);
  } finally {
    weights?.dispose();
  }
}

/**
 * One rank of (i), on device `rank` of 2: rank 0 writes the unique id to `idFile`, rank 1 waits for it; then an
 * all-reduce and a broadcast of 1M floats, and the seconds one all-reduce takes at each size.
 */
async function ncclRank(rank: number, idFile: string) {
  const be = await CudaBackend.create({ device: rank });
  const a = be.addon;
  let id: Uint8Array;
  if (rank === 0) {
    id = a.ncclUniqueId();
    writeFileSync(`${idFile}.part`, id);
    renameSync(`${idFile}.part`, idFile);
  } else {
    for (const t0 = Date.now(); !existsSync(idFile); ) {
      if (Date.now() - t0 > 60_000) throw new Error(`rank 1: no NCCL id from rank 0 in ${idFile} within 60 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
    id = new Uint8Array(readFileSync(idFile));
  }
  const comm = a.ncclCommInit(id, 2, rank);
  const ptr = (t: { storage: unknown }) => (t.storage as { ptr: bigint }).ptr;
  const n = NCCL_SIZES[0];
  const x = be.fromValues(Float32Array.from({ length: n }, (_, i) => (i % 7) * (rank + 1)), [n]);
  a.ncclAllReduce(comm, ptr(x), n);
  const sum = await x.read();
  const y = be.fromValues(Float32Array.from({ length: n }, (_, i) => (rank === 1 ? i : -1)), [n]);
  a.ncclBroadcast(comm, ptr(y), n, 1);
  const bcast = await y.read();
  const seconds: number[] = [];
  // the emulator's figures time the CPU, not a link: one small size is enough there
  for (const size of be.name.includes('emulator') ? NCCL_SIZES.slice(0, 1) : NCCL_SIZES) {
    const p = a.malloc(size * 4);
    a.memset(p, size * 4);
    for (let i = 0; i < 3; i++) a.ncclAllReduce(comm, p, size);
    a.sync();
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) a.ncclAllReduce(comm, p, size);
    a.sync();
    seconds.push((performance.now() - t0) / 1000 / 20);
    a.free(p);
  }
  a.ncclCommDestroy(comm);
  return {
    rank,
    sumWrong: sum.reduce((k, v, i) => k + (v === (i % 7) * 3 ? 0 : 1), 0),
    bcastWrong: bcast.reduce((k, v, i) => k + (v === i ? 0 : 1), 0),
    seconds,
  };
}

/** (i): two processes, one GPU each, through NCCL; skipped, saying why, without NCCL or a second GPU. */
async function nccl() {
  const np = typeof cuda.addon.ncclProbe === 'function' ? cuda.addon.ncclProbe() : null;
  if (!np?.loaded) {
    log(`(i) skipped: ${np ? np.error : 'this CUDA addon predates NCCL support; rebuild it (npm run build:cuda -- --force)'}`);
    return;
  }
  const version = np.version === null ? '(version unknown)' : ncclVersionText(np.version);
  if (probe.devices.length < 2) {
    log(`(i) skipped: NCCL ${version} loads (${np.path}), but the two-process check needs two CUDA devices (${probe.devices.length} here)`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'rmas-nccl-'));
  const self = fileURLToPath(import.meta.url);
  // npm run test:cuda runs the .ts through tsx; the GPU kit runs a bundled .mjs
  const argv = self.endsWith('.ts') ? ['--import', 'tsx', self] : [self];
  const rank = (r: number) =>
    new Promise<{ code: number | null; out: string }>((done) => {
      const env = { ...process.env, RMAS_CUDA_NCCL_RANK: String(r), RMAS_CUDA_NCCL_ID: join(dir, 'id') };
      const p = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 180_000 });
      let out = '';
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      p.stderr.on('data', (d: Buffer) => (out += d.toString()));
      p.on('close', (code) => done({ code, out }));
    });
  try {
    const ranks = await Promise.all([rank(0), rank(1)]);
    const got = ranks.map((r, k) => {
      const line = r.out.trim().split('\n').pop() ?? '';
      if (r.code !== 0 || !line.startsWith('{'))
        throw new Error(`rank ${k} exited with ${r.code}: ${r.out.trim().split('\n').slice(-3).join(' | ')}`);
      return JSON.parse(line) as Awaited<ReturnType<typeof ncclRank>>;
    });
    const wrong = got.map((g) => g.sumWrong + g.bcastWrong);
    log(`(i) nccl ${version} (${np.path}), 2 processes on cuda:0 and cuda:1: all-reduce and broadcast of ${NCCL_SIZES[0]} f32, ` +
      `${wrong.every((w) => w === 0) ? 'every value exact on both ranks' : `WRONG VALUES (${wrong.join(', ')})`}`);
    if (wrong.some((w) => w)) failures.push(`nccl: ${wrong.join(' and ')} wrong values on ranks 0 and 1`);
    // bus bandwidth of an all-reduce over n ranks: bytes · 2 (n − 1) / n per second; n = 2
    got[0].seconds.forEach((_, k) => {
      const s = Math.max(got[0].seconds[k], got[1].seconds[k]);
      const mib = (NCCL_SIZES[k] * 4) / 2 ** 20;
      const busBw = (NCCL_SIZES[k] * 4) / s / 1e9;
      log(`(i) nccl all-reduce of ${mib} MiB: ${(s * 1e6).toFixed(0)} µs, bus bandwidth ${busBw.toFixed(1)} GB/s`);
    });
  } catch (e) {
    failures.push(`nccl: ${(e as Error).message.split('\n')[0]}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const t0 = performance.now();
if (!only || only === 'parity') await parity();
if (!only || only === 'golden') await golden();
if (!only || only === 'gemm') await gemmCheck();
if (!only || only === 'perf') await perf();
if (!only || only === 'train') await train();
if (!only || only === 'ask') await askTiny();
if (!only || only === 'devices') await devices();
if (!only || only === 'scale') await scale();
if (!only || only === 'nccl') await nccl();
const m = cuda.memInfo();
log(
  `pool ${(m.poolReserved / 2 ** 20).toFixed(0)} MiB reserved, ${(m.poolUsed / 2 ** 20).toFixed(0)} MiB in use; ${((performance.now() - t0) / 1000).toFixed(1)} s`,
);
for (const f of failures) log(`FAIL ${f}`);
log(failures.length ? `${failures.length} failure(s)` : 'all cuda checks passed');
process.exit(failures.length ? 1 : 0);
