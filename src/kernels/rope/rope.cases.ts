import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, TOL, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';
import { type RopeConfig, ropeInvFreq } from '.';

const LLAMA3 = { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };

// [tokens, heads, head_dim] with a frequency config each: odd token counts, partial rotary, Llama-3 scaling.
const SHAPES: [number[], RopeConfig][] = [
  [[1, 1, 2], { theta: 10000, headDim: 2 }],
  [[3, 2, 6], { theta: 10000, headDim: 6, rotaryDim: 4 }],
  [[17, 3, 64], { theta: 500000, headDim: 64, scaling: LLAMA3 }],
  [[96, 2, 128], { theta: 1000000, headDim: 128 }],
  [[200, 1, 96], { theta: 10000, headDim: 96, partialRotaryFactor: 0.5 }],
];

export const cases: ParityCase[] = SHAPES.map(([shape, config]) => ({
  name: `rope forward and backward [${shape}] ${config.scaling ? 'llama3' : `theta ${config.theta}`}${config.rotaryDim || config.partialRotaryFactor ? ' partial' : ''}`,
  async run(env) {
    const [T] = shape;
    const n = shape.reduce((a, b) => a * b, 1);
    const inv = ropeInvFreq(config);
    const xv = env.rng.normals(n);
    // decode-style offsets and long-context positions: the angle reaches 1.3e5 rad at the top frequency,
    // where the shader's own range reduction keeps cos/sin accurate
    const posv = Array.from({ length: T }, (_, t) => (t % 3 === 0 ? env.rng.int(131072) : 4000 + t));
    const pos = pair(env, posv, [T], 'i32');
    const x = pair(env, xv, shape);
    // both sides rotate by the same f32 angle; the shader's own reduction and polynomials keep cos/sin
    // within ~1e-7 on every adapter (SwiftShader's builtin sin/cos are off by 2e-4), so 10x tighter than f32
    await expectParity(F.rope(x.g, pos.g, inv), F.rope(x.c, pos.c, inv), { atol: 1e-6, rtol: 1e-5 }, 'Float32Array frequencies');
    const fn = (a: Tensor, p: Tensor, f: Tensor) => F.rope(a, p, f, { scale: 1.25 });
    const specs = [
      { values: xv, shape },
      { values: posv, shape: [T], dtype: 'i32' as const },
      { values: inv, shape: [inv.length], grad: false },
    ];
    await expectGradParity(env, 'scaled, tensor frequencies', fn, specs, TOL.f32);
  },
}));
