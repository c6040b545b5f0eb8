import { F } from '../../autograd';
import type { DType } from '../../formats/dtype';
import type { Backend } from '../../tensor/backend';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, type ParityEnv, TOL, expectParity, observedClose, pair } from '../workbench';
import {
  type FusedGemvAttrs,
  SPLIT_KEYS,
  decodeAttentionKernel,
  deltaStepKernel,
  fusedGemvKernel,
  normAddKernel,
  ropeAppendKernel,
} from '.';

// Each fused kernel twice: the device against the CPU reference (kernel parity), and the CPU reference against the
// chain of differentiable ops it replaces (the fused path computes what the plain path does). The fused path runs on
// WebGPU and the CPU; CUDA keeps the plain path, so the CUDA parity run skips these (webgpuOnly).

/** Weight walks: K 512 gives 16-byte aligned quantized rows (vec4 loads), 64 scalar words, 36/30 one element per load. */
const WALKS: [DType, number][] = [
  ['q4_0', 512], ['q4_0', 64], ['q8_0', 512], ['q8_0', 64], ['bf16', 64], ['f16', 72], ['f16', 36], ['f32', 64], ['f32', 30],
];

/** x·Wᵀ for the plain path. */
const lin = (x: Tensor, w: Tensor, b?: Tensor) => F.linear(x, w, b);

async function both(env: ParityEnv, label: string, make: (b: Backend, side: 'g' | 'c') => { fused: Tensor; plain?: Tensor }) {
  const g = make(env.gpu, 'g');
  const c = make(env.cpu, 'c');
  await expectParity(g.fused, c.fused, TOL.f32, `${label}: device vs CPU`);
  if (c.plain) observedClose(await c.fused.read(), await c.plain.read(), TOL.f32, `${label}: fused vs plain ops`);
}

export const cases: ParityCase[] = [
  ...WALKS.map(([dtype, K]): ParityCase => ({
    name: `fused GEMV ${dtype} K ${K}: norm + three weights + bias; norm + SwiGLU; GELU; gate + residual (1 and 5 rows)`,
    webgpuOnly: true,
    async run(env) {
      const N = [40, 24, 24];
      for (const M of [1, 5]) {
        const xv = env.rng.normals(M * K, 1.5);
        const x = pair(env, xv, [M, K]);
        const gamma = pair(
          env,
          env.rng.normals(K, 0.2).map((v) => 1 + v),
          [K],
          'bf16',
        );
        const beta = pair(env, env.rng.normals(K, 0.1), [K]);
        const ws = N.map((n) => pair(env, env.rng.normals(n * K, 1 / Math.sqrt(K)), [n, K], dtype));
        const bias = pair(env, env.rng.normals(88, 0.1), [88]);
        const gate = pair(env, env.rng.normals(M * 2 * K), [M, 2 * K]);
        const res = pair(env, env.rng.normals(M * 24), [M, 24]);
        const run = (b: Backend, inputs: Tensor[], attrs: FusedGemvAttrs) => b.run(fusedGemvKernel, inputs, attrs)[0];
        const label = `${dtype} K ${K} M ${M}`;
        await both(env, `${label} qkv`, (b, s) => {
          const h = F.rmsNorm(x[s], gamma[s], 1e-6, { offset: 0 });
          const biases = [0, 40, 64].map((o, i) => F.reshape(F.sliceRows(F.reshape(bias[s], [88, 1]), o, N[i]), [N[i]]));
          return {
            fused: run(b, [x[s], gamma[s], ...ws.map((w) => w[s]), bias[s]], {
              norm: { kind: 'rms', eps: 1e-6, offset: 0 },
              weights: 3,
              bias: true,
            }),
            plain: F.concatCols(ws.map((w, i) => lin(h, w[s], biases[i]))),
          };
        });
        await both(env, `${label} swiglu, offset 1`, (b, s) => {
          const h = F.rmsNorm(x[s], gamma[s], 1e-5, { offset: 1 });
          return {
            fused: run(b, [x[s], gamma[s], ws[1][s], ws[2][s]], { norm: { kind: 'rms', eps: 1e-5, offset: 1 }, weights: 2, glu: 'silu' }),
            plain: F.swiglu(lin(h, ws[1][s]), lin(h, ws[2][s])),
          };
        });
        await both(env, `${label} layer norm, bias, GELU`, (b, s) => {
          const bb = F.reshape(F.sliceRows(F.reshape(bias[s], [88, 1]), 0, 40), [40]);
          return {
            fused: run(b, [x[s], gamma[s], beta[s], ws[0][s], bb], {
              norm: { kind: 'layer', eps: 1e-5 },
              weights: 1,
              bias: true,
              act: 'gelu',
            }),
            plain: F.gelu(lin(F.layerNorm(x[s], gamma[s], beta[s], 1e-5), ws[0][s], bb)),
          };
        });
        // the gate read as Qwen3.5's q_proj leaves it: per head, the query's values then the gate's
        const hd = K % 8 ? 6 : 8;
        await both(env, `${label} input gate + residual`, (b, s) => {
          const g = F.reshape(F.splitCols(F.reshape(gate[s], [M * (K / hd), 2 * hd]), [hd, hd])[1], [M, K]);
          return {
            fused: run(b, [x[s], gate[s], ws[1][s], res[s]], {
              inputGate: { ld: 2 * K, head: hd, headStride: 2 * hd, offset: hd },
              weights: 1,
              residual: true,
            }),
            plain: F.add(lin(F.mul(x[s], F.sigmoid(g)), ws[1][s]), res[s]),
          };
        });
        if (M === 1 || K % 8) continue;
        // Gemma's sandwich: x1 = x + norm(o) written out, then norm(x1) into GeGLU
        const o = pair(env, env.rng.normals(M * K), [M, K]);
        const wpost = pair(env, env.rng.normals(K, 0.2), [K], 'bf16');
        for (const out of [0, 1] as const) {
          await both(env, `${label} sandwich pre-add output ${out}`, (b, s) => {
            const x1 = F.add(x[s], F.rmsNorm(o[s], wpost[s], 1e-6, { offset: 1 }));
            const fused = b.run(fusedGemvKernel, [x[s], o[s], wpost[s], gamma[s], ws[1][s], ws[2][s]], {
              preAdd: { eps: 1e-6, offset: 1 },
              norm: { kind: 'rms', eps: 1e-6, offset: 1 },
              weights: 2,
              glu: 'gelu_tanh',
            })[out];
            const h = F.rmsNorm(x1, gamma[s], 1e-6, { offset: 1 });
            return { fused, plain: out ? x1 : F.geglu(lin(h, ws[1][s]), lin(h, ws[2][s])) };
          });
        }
      }
    },
  })),
  {
    name: 'fused q/k norm + RoPE (partial) + KV append: plain and gated q, with and without per-head norms',
    webgpuOnly: true,
    async run(env) {
      const [H, Hkv, D, T, at, maxLen] = [4, 2, 16, 3, 5, 10];
      for (const [gated, norm, half] of [
        [false, true, 8],
        [true, false, 2],
        [false, false, 5],
      ] as const) {
        const qw = H * D * (gated ? 2 : 1);
        const width = qw + 2 * Hkv * D;
        const qkv = pair(env, env.rng.normals(T * width), [T, width]);
        const qn = pair(env, env.rng.normals(D, 0.2), [D], 'bf16');
        const kn = pair(env, env.rng.normals(D, 0.2), [D], 'f32');
        const positions = [7, 300, 4095];
        // rows: RoPE positions, then the cache rows written (at, at + 1, …), then the sequence's first row
        const rows = pair(env, [...positions, ...positions.map((_, t) => at + t), 0, 0, 0], [3, T], 'i32');
        const pos = pair(env, positions, [T], 'i32');
        const freq = pair(
          env,
          Array.from({ length: half }, (_, i) => 10000 ** (-i / half)),
          [half],
        );
        // both caches start from the same rows: those before `at` must survive the append
        const [kv0, vv0] = [env.rng.normals(maxLen * Hkv * D), env.rng.normals(maxLen * Hkv * D)];
        const cache = () => ({ k: pair(env, kv0, [maxLen, Hkv, D]), v: pair(env, vv0, [maxLen, Hkv, D]) });
        const [fc, pc] = [cache(), cache()];
        const label = `gated ${gated} norm ${norm} rotary ${2 * half}/${D}`;
        await both(env, `${label} q`, (b, s) => {
          const fused = b.run(ropeAppendKernel, [qkv[s], ...(norm ? [qn[s], kn[s]] : []), rows[s], freq[s], fc.k[s], fc.v[s]], {
            heads: H,
            kvHeads: Hkv,
            headDim: D,
            gated,
            qkNorm: norm,
            eps: 1e-6,
            offset: 1,
          })[0];
          const [qa, k, v] = F.splitCols(qkv[s], [qw, Hkv * D, Hkv * D]);
          let q = gated ? F.splitCols(F.reshape(qa, [T * H, 2 * D]), [D, D])[0] : qa;
          q = F.reshape(q, [T, H, D]);
          let kk = F.reshape(k, [T, Hkv, D]);
          if (norm) {
            q = F.rmsNorm(q, qn[s], 1e-6, { offset: 1 });
            kk = F.rmsNorm(kk, kn[s], 1e-6, { offset: 1 });
          }
          F.kvAppend(pc.k[s], F.rope(kk, pos[s], freq[s]), at);
          F.kvAppend(pc.v[s], F.reshape(v, [T, Hkv, D]), at);
          return { fused, plain: F.rope(q, pos[s], freq[s]) };
        });
        await both(env, `${label} k cache`, (_b, s) => ({ fused: fc.k[s], plain: pc.k[s] }));
        await both(env, `${label} v cache`, (_b, s) => ({ fused: fc.v[s], plain: pc.v[s] }));
      }
    },
  },
  ...(
    [
      [2, 4, 16, 8, 4, 'bf16'],
      [1, 1, 128, 128, 4, 'f32'],
      [3, 3, 7, 200, 3, 'f16'],
    ] as const
  ).map(([nk, nv, dk, dv, K, nd]): ParityCase => ({
    name: `fused Gated DeltaNet step nk ${nk} nv ${nv} dk ${dk} dv ${dv} conv ${K}: output, next conv rows, state in place`,
    webgpuOnly: true,
    async run(env) {
      const C = 2 * nk * dk + nv * dv;
      const proj = pair(env, env.rng.normals(C + nv * dv + 2 * nv), [1, C + nv * dv + 2 * nv]);
      const cw = pair(env, env.rng.normals(C * K, 0.5), [C, K]);
      const cs = pair(env, env.rng.normals((K - 1) * C), [K - 1, C]);
      const stv = env.rng.normals(nv * dk * dv, 0.3);
      const [fs, ps] = [pair(env, stv, [nv, dk, dv]), pair(env, stv, [nv, dk, dv])];
      const aLog = pair(env, env.rng.uniforms(nv, -1, 1), [nv]);
      const dtBias = pair(env, env.rng.normals(nv), [nv]);
      const nw = pair(
        env,
        env.rng.normals(dv, 0.2).map((v) => 1 + v),
        [dv],
        nd,
      );
      const outs = { g: [] as Tensor[], c: [] as Tensor[] };
      const plain = { g: [] as Tensor[], c: [] as Tensor[] };
      for (const s of ['g', 'c'] as const) {
        const b = s === 'g' ? env.gpu : env.cpu;
        const gates = F.concatRows([F.reshape(F.scale(F.exp(aLog[s]), -1), [1, nv]), F.reshape(dtBias[s], [1, nv])]);
        outs[s] = b.run(deltaStepKernel, [proj[s], cw[s], cs[s], fs[s], gates, nw[s]], {
          keyHeads: nk,
          valueHeads: nv,
          keyDim: dk,
          valueDim: dv,
          convKernel: K,
          eps: 1e-6,
        });
        // the decoder's plain ops for one token
        const [mixed, z, bb, a] = F.splitCols(proj[s], [C, nv * dv, nv, nv]);
        const conv = F.silu(F.causalConv1d(mixed, cw[s], cs[s]));
        const [q, k, v] = F.splitCols(conv, [nk * dk, nk * dk, nv * dv]);
        const l2 = (t: Tensor, w: number) =>
          F.rmsNorm(F.reshape(t, [1, nk, dk]), b.fromValues(new Float32Array(dk).fill(w), [dk]), 1e-6 / dk);
        const g = F.mul(F.softplus(F.add(a, dtBias[s])), F.scale(F.exp(aLog[s]), -1));
        const rule = F.gatedDeltaRule(l2(q, 1 / dk), l2(k, 1 / Math.sqrt(dk)), F.reshape(v, [1, nv, dv]), g, F.sigmoid(bb), ps[s]);
        const y = F.mul(F.rmsNorm(rule.o, nw[s], 1e-6), F.silu(F.reshape(z, [1, nv, dv])));
        plain[s] = [F.reshape(y, [1, nv * dv]), F.sliceRows(F.concatRows([cs[s], mixed]), 1, K - 1), rule.state];
      }
      const names = ['output', 'next conv rows', 'state'];
      const fused = { g: [...outs.g, fs.g], c: [...outs.c, fs.c] };
      for (let i = 0; i < 3; i++) {
        await expectParity(fused.g[i], fused.c[i], TOL.f32, `${names[i]}: device vs CPU`);
        observedClose(await fused.c[i].read(), await plain.c[i].read(), TOL.f32, `${names[i]}: fused vs plain ops`);
      }
    },
  })),
  {
    name: 'fused norm + residual add (Gemma 3 post-feed-forward), f32 and bf16 weight',
    webgpuOnly: true,
    async run(env) {
      for (const [rows, cols, dt] of [
        [1, 32, 'bf16'],
        [3, 1100, 'f32'],
      ] as const) {
        const y = pair(env, env.rng.normals(rows * cols, 3), [rows, cols]);
        const w = pair(env, env.rng.normals(cols, 0.2), [cols], dt);
        const r = pair(env, env.rng.normals(rows * cols), [rows, cols]);
        await both(env, `norm add [${rows}, ${cols}] ${dt}`, (b, s) => ({
          fused: b.run(normAddKernel, [y[s], w[s], r[s]], { eps: 1e-6, offset: 1 })[0],
          plain: F.add(r[s], F.rmsNorm(y[s], w[s], 1e-6, { offset: 1 })),
        }));
      }
    },
  },
  {
    name: `fused decode attention over stacked caches: rows of different lengths (one past ${SPLIT_KEYS} keys: split), windows, GQA; a row alone gives the same bits`,
    webgpuOnly: true,
    async run(env) {
      const [Hq, Hkv, stride] = [4, 2, 320];
      for (const [D, window] of [
        [16, 0],
        [16, 7],
        [40, 0],
      ] as const) {
        // sequences in cache rows 2, 0, 1 hold 5, 300 and 1 positions; each row's query is its last position
        const seqs = [
          [2, 5],
          [0, 300],
          [1, 1],
        ] as const;
        const R = 3 * stride;
        const kv = [env.rng.normals(R * Hkv * D), env.rng.normals(R * Hkv * D)];
        const [k, v] = kv.map((x) => pair(env, x, [R, Hkv, D]));
        const qv = env.rng.normals(seqs.length * Hq * D);
        const q = pair(env, qv, [seqs.length, Hq, D]);
        const rowsOf = (ss: readonly (readonly [number, number])[]) => [
          ...ss.map(([, n]) => n - 1),
          ...ss.map(([r, n]) => r * stride + n - 1),
          ...ss.map(([r]) => r * stride),
        ];
        const rows = pair(env, rowsOf(seqs), [3, seqs.length], 'i32');
        const maxKeys = Math.min(300, window || 300);
        const label = `D ${D} window ${window}`;
        await both(env, label, (b, s) => ({ fused: b.run(decodeAttentionKernel, [q[s], k[s], v[s], rows[s]], { window, maxKeys })[0] }));
        // against the plain attention of each sequence alone, and the same kernel with that row alone
        const all = await env.gpu.run(decodeAttentionKernel, [q.g, k.g, v.g, rows.g], { window, maxKeys })[0].read();
        for (const [i, [r, n]] of seqs.entries()) {
          const cut = (x: Float32Array) => env.cpu.fromValues(x.subarray(r * stride * Hkv * D, (r * stride + n) * Hkv * D), [n, Hkv, D]);
          const qi = env.cpu.fromValues(qv.subarray(i * Hq * D, (i + 1) * Hq * D), [1, Hq, D]);
          const plain = F.attention(qi, cut(kv[0]), cut(kv[1]), { window: window || undefined, kvLen: n });
          observedClose(
            all.subarray(i * Hq * D, (i + 1) * Hq * D),
            await plain.read(),
            TOL.f32,
            `${label} sequence ${i} vs plain attention`,
          );
          const alone = await env.gpu
            .run(
              decodeAttentionKernel,
              [
                env.gpu.fromValues(qv.subarray(i * Hq * D, (i + 1) * Hq * D), [1, Hq, D]),
                k.g,
                v.g,
                env.gpu.fromValues(rowsOf([[r, n]]), [3, 1], 'i32'),
              ],
              { window, maxKeys: Math.min(n, window || n) },
            )[0]
            .read();
          const diff = alone.reduce((m, x, j) => Math.max(m, Math.abs(x - all[i * Hq * D + j])), 0);
          if (diff !== 0) throw new Error(`${label} sequence ${i}: alone differs from batched by ${diff}`);
        }
      }
    },
  },
  {
    name: 'fused Gated DeltaNet step over stacked rings and states: two of three sequences, equal to each one alone',
    webgpuOnly: true,
    async run(env) {
      const [nk, nv, dk, dv, K, R, stride] = [2, 4, 16, 8, 4, 3, 64];
      const C = 2 * nk * dk + nv * dv;
      const W = C + nv * dv + 2 * nv;
      const seqs = [
        [2, 5],
        [0, 1],
      ] as const;
      const projv = env.rng.normals(seqs.length * W);
      const cwv = env.rng.normals(C * K, 0.5);
      const ringv = env.rng.normals(R * K * C);
      const stv = env.rng.normals(R * nv * dk * dv, 0.3);
      const aLog = env.rng.uniforms(nv, -1, 1);
      const dtBias = env.rng.normals(nv);
      const nwv = env.rng.normals(dv, 0.2).map((x) => 1 + x);
      const attrs = { keyHeads: nk, valueHeads: nv, keyDim: dk, valueDim: dv, convKernel: K, eps: 1e-6 };
      const gates = (b: Backend) => b.fromValues([...aLog.map((x) => -Math.exp(x)), ...dtBias], [2, nv]);
      const info = [...seqs.map(([, n]) => n), ...seqs.map(([r, n]) => r * stride + n), ...seqs.map(([r]) => r * stride)];
      const out: Record<'g' | 'c', Float32Array[]> = { g: [], c: [] };
      for (const s of ['g', 'c'] as const) {
        const b = s === 'g' ? env.gpu : env.cpu;
        const ring = b.fromValues(ringv, [R * K, C]);
        const st = b.fromValues(stv, [R * nv, dk, dv]);
        const [y] = b.run(
          deltaStepKernel,
          [
            b.fromValues(projv, [seqs.length, W]),
            b.fromValues(cwv, [C, K]),
            ring,
            st,
            gates(b),
            b.fromValues(nwv, [dv]),
            b.fromValues(info, [3, seqs.length], 'i32'),
          ],
          { ...attrs, rowStride: stride },
        );
        out[s] = [await y.read(), await ring.read(), await st.read()];
      }
      for (let i = 0; i < 3; i++) observedClose(out.g[i], out.c[i], TOL.f32, `${['output', 'rings', 'states'][i]}: device vs CPU`);
      // each sequence alone through the one-sequence kernel: its K − 1 rows in order, its state
      for (const [i, [r, n]] of seqs.entries()) {
        const b = env.gpu;
        const ordered = Array.from({ length: (K - 1) * C }, (_, x) => ringv[(r * K + ((n + 1 + Math.floor(x / C)) % K)) * C + (x % C)]);
        const st = b.fromValues(stv.subarray(r * nv * dk * dv, (r + 1) * nv * dk * dv), [nv, dk, dv]);
        const [y, next] = b.run(
          deltaStepKernel,
          [
            b.fromValues(projv.subarray(i * W, (i + 1) * W), [1, W]),
            b.fromValues(cwv, [C, K]),
            b.fromValues(ordered, [K - 1, C]),
            st,
            gates(b),
            b.fromValues(nwv, [dv]),
          ],
          attrs,
        );
        const same = (a: ArrayLike<number>, e: ArrayLike<number>, what: string) => {
          for (let j = 0; j < e.length; j++)
            if (a[j] !== e[j]) throw new Error(`sequence ${i} ${what}: element ${j} is ${a[j]} batched, ${e[j]} alone`);
        };
        same(out.g[0].subarray(i * nv * dv, (i + 1) * nv * dv), await y.read(), 'output');
        same(out.g[2].subarray(r * nv * dk * dv, (r + 1) * nv * dk * dv), await st.read(), 'state');
        const nx = await next.read();
        same(
          Array.from({ length: C }, (_, c) => out.g[1][(r * K + (n % K)) * C + c]),
          nx.subarray((K - 2) * C),
          'newest conv row',
        );
      }
    },
  },
];
