/**
 * The CPU backend's WebAssembly SIMD kernels (matmul; attention's two products and the gated delta rule, further
 * down), written as WAT text by this builder (as the WGSL builders write shaders): y[m, n] = Σ_k x[m, k]·W[n, k]
 * (+ bias[n]) with W stored as f32, bf16, q8_0 or q4_0 rows, read in place.
 * `npm run build:cpu-kernels` compiles this text with wabt into wasm-bytes.ts; a test checks the two agree.
 *
 * One export per weight dtype, `gemm_<dtype>(w, ld, K, x, M, y, ldy, n0, n1, bias)`, computes the rows n0 ≤ n < n1
 * of y for all M rows of x: a row range is the unit a worker thread can take. x is M staged rows (xRowBytes apart:
 * K f32 for float weights, in X_ORDER; integers and scales for quantized ones, `stage_ints`), y has ldy floats per
 * row, ld is a weight row's bytes, bias is an address or 0 (none). Blocks of 4 weight rows × 2 x rows keep 8 sums in
 * registers, so each weight vector decoded serves 2 rows of x and each x vector 4 weight rows; single rows and
 * columns finish the edges. One row of x (decode) takes weight rows of up to ROW_LOOP_BYTES alone instead (rowFunc,
 * quantRowFunc, whose block dots wait in the calling thread's scratch, the quantized exports' last parameter, until
 * the row's scales are read): one stream through memory in address order, with the sums a block gives. Float rows'
 * products and sums are f32 (the TypeScript reference sums in f64): the kernels equal it within f32 summation error
 * (wasm.test.ts states the bound).
 *
 * Products of several x rows (a prompt) take the float dtypes' packed exports, `gemm_<dt>_packed` (one more
 * parameter: the calling thread's scratch): each 4 weight rows are widened once into f32, interleaved so that one
 * pointer and constant offsets address a step's vectors, and every pair of x rows (staged interleaved too) runs over
 * them. Its loop is 28 instructions for 64 flops against the unpacked block's 33 plus spills: 1.3× faster on bf16
 * rows, 1.5× on f32, at M = 128 (V8 x64). Where the engine has relaxed SIMD and the hardware a fused multiply-add,
 * the module's FMA build takes each mul + add as one f32x4.relaxed_madd (20 instructions; 1.2–1.3× on one thread).
 *
 * Quantized rows (formats/dtype.ts): quant bytes first, then one f16 scale per 32-value block. A block's 32 values
 * are taken as 16-bit integers and multiplied with x's integers in i32, exactly (X_INT_MAX); the block's sum is then
 * scaled by the weight's and x's scales in f32. The weight scales are read through a table of all 65536 f16 values
 * as f32 at F16_TABLE (filled by the loader), since wasm has no f16 conversion.
 */
import { type QuantDType, isQuant } from '../../formats/dtype';

export type WasmDType = 'f32' | 'bf16' | 'q8_0' | 'q4_0';
export const WASM_DTYPES: readonly WasmDType[] = ['f32', 'bf16', 'q8_0', 'q4_0'];
/** The dtypes with a packed export (`gemm_<dt>_packed`) for products of several x rows: all of them. */
export const PACKED_DTYPES = WASM_DTYPES;
/** Byte address of the f16 → f32 table (65536 f32); addresses below it stay unused so that 0 means "none". */
export const F16_TABLE = 1024;
/** First byte the loader's heap may use. */
export const HEAP_BASE = F16_TABLE + 4 * 65536;

const get = (n: string) => `(local.get $${n})`;
const i32 = (v: number) => `(i32.const ${v})`;
const add = (a: string, b: string) => `(i32.add ${a} ${b})`;
const fadd = (a: string, b: string) => `(f32x4.add ${a} ${b})`;
const fmul = (a: string, b: string) => `(f32x4.mul ${a} ${b})`;
const set = (n: string, v: string) => `(local.set $${n} ${v})`;
const load = (addr: string, off = 0) => `(v128.load${off ? ` offset=${off}` : ''} align=1 ${addr})`;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Sum of the four lanes: (l0 + l1) + (l2 + l3). */
const hsum = (v: string) =>
  `(f32.add (f32.add (f32x4.extract_lane 0 ${v}) (f32x4.extract_lane 1 ${v})) ` +
  `(f32.add (f32x4.extract_lane 2 ${v}) (f32x4.extract_lane 3 ${v})))`;

/** Byte lanes of `i8x16.shuffle` that gather the even (then the odd) f32 lanes of two vectors. */
const EVENS = '0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27';
const ODDS = '4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31';

/**
 * Two f32x4 from a float row at byte address `a`: values k, k+2, k+4, k+6 and k+1, k+3, k+5, k+7. A bf16 word's low
 * half shifted up and its high half masked give them in two operations for eight values; f32 rows are shuffled into
 * the same order, so that a model gives the same bits stored in either dtype. x is staged to match (`X_ORDER`).
 */
function floatPair(dt: 'f32' | 'bf16', a: string, lo: string, hi: string): string[] {
  if (dt === 'f32') {
    return [
      set(lo, load(a)),
      set(hi, load(a, 16)),
      set('t', `(i8x16.shuffle ${EVENS} ${get(lo)} ${get(hi)})`),
      set(hi, `(i8x16.shuffle ${ODDS} ${get(lo)} ${get(hi)})`),
      set(lo, get('t')),
    ];
  }
  return [
    set(hi, load(a)),
    set(lo, `(i32x4.shl ${get(hi)} ${i32(16)})`),
    set(hi, `(v128.and ${get(hi)} (v128.const i32x4 ${Array(4).fill('0xffff0000').join(' ')}))`),
  ];
}

/**
 * The order x's values are staged in for a float weight dtype, per whole group of eight (a K mod 8 tail stays in
 * place): float rows are read even values first (floatPair), so x is too.
 */
export const X_ORDER: readonly number[] = [0, 2, 4, 6, 1, 3, 5, 7];

/**
 * Quantized rows take x as integers (`stage_ints`): each 32-value block of a row as i16 over the block's scale
 * max|x|/X_INT_MAX (rounded to nearest), the row's K/32 scales (f32) after its K integers. A block's 32 products are then exact in
 * i32, which is what makes q8_0/q4_0 cheaper per value than bf16 rather than dearer; the price is x's rounding, at
 * most about half a scale per value (a relative 1.5e-5 of the block's largest |x|, against q8_0's own 4e-3 in w).
 */
export const X_INT_MAX = 32767;

/** Bytes of one staged x row of K values for a weight dtype. */
export const xRowBytes = (dt: WasmDType, K: number) => (isQuant(dt) ? 2 * K + K / 8 : 4 * K);

/** One weight value as f32 from byte address `a` (the scalar tail of float rows). */
const floatScalar = (dt: 'f32' | 'bf16', a: string) =>
  dt === 'f32' ? `(f32.load align=1 ${a})` : `(f32.reinterpret_i32 (i32.shl (i32.load16_u align=1 ${a}) ${i32(16)}))`;

/**
 * Quant block `blk` of the row at `w` as four i16x8 (`q0`..`q3`: values 0–7, 8–15, 16–23, 24–31), the integers the
 * block's scale multiplies: q8_0's bytes sign-extended, q4_0's nibbles minus 8 (low nibbles are values 0–15, high
 * nibbles 16–31).
 */
function quantInts(dt: QuantDType, w: string, blk: string | number): string[] {
  // a constant block index goes into the loads' offsets
  const at = (log2: number) => (typeof blk === 'number' ? w : add(w, `(i32.shl ${blk} ${i32(log2)})`));
  const off = (log2: number, o: number) => (typeof blk === 'number' ? (blk << log2) + o : o);
  if (dt === 'q8_0') {
    return range(4).map((j) => set(`q${j}`, `(v128.load8x8_s offset=${off(5, 8 * j)} align=1 ${at(5)})`));
  }
  const eight = '(v128.const i8x16 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8)';
  const low = `(v128.and ${get('t')} (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15))`;
  return [
    set('t', load(at(4), off(4, 0))),
    set('lo', `(i8x16.sub ${low} ${eight})`),
    set('hi', `(i8x16.sub (i8x16.shr_u ${get('t')} ${i32(4)}) ${eight})`),
    set('q0', `(i16x8.extend_low_i8x16_s ${get('lo')})`),
    set('q1', `(i16x8.extend_high_i8x16_s ${get('lo')})`),
    set('q2', `(i16x8.extend_low_i8x16_s ${get('hi')})`),
    set('q3', `(i16x8.extend_high_i8x16_s ${get('hi')})`),
  ];
}

/**
 * One block of R weight rows × C x rows: `(w ld K x xs y ys bias)`, w the first weight row, x the first x row (xs
 * bytes apart), y the output of (first x row, first weight row) (ys bytes per x row).
 */
function blockFunc(dt: WasmDType, R: number, C: number): string {
  const rows = range(R);
  const cols = range(C);
  // with one x row, two sums per weight row (even and odd vectors) break the add chain
  const H = C === 1 ? 2 : 1;
  const acc = (r: number, c: number, h = 0) => `a${r}_${c}_${h}`;
  const locals = ['(local $k i32)', '(local $sc f32)'];
  for (const r of rows) locals.push(`(local $w${r} i32)`);
  for (const c of cols) locals.push(`(local $x${c} i32)`);
  for (const r of rows) for (const c of cols) {
    for (const h of range(H)) locals.push(`(local $${acc(r, c, h)} v128)`);
    locals.push(`(local $s${r}_${c} f32)`);
  }
  for (const n of ['t', 'lo', 'hi']) locals.push(`(local $${n} v128)`);
  for (const c of cols) locals.push(`(local $xl${c} v128) (local $xh${c} v128)`);
  if (isQuant(dt)) {
    locals.push('(local $dw f32)', ...range(4).map((j) => `(local $q${j} v128)`));
    for (const c of cols) locals.push(`(local $sx${c} f32)`, ...range(4).map((j) => `(local $xq${c}_${j} v128)`));
  }

  const body: string[] = [];
  for (const r of rows) body.push(set(`w${r}`, r === 0 ? get('w') : add(get(`w${r - 1}`), get('ld'))));
  for (const c of cols) body.push(set(`x${c}`, c === 0 ? get('x') : add(get(`x${c - 1}`), get('xs'))));
  body.push(set('k', i32(0)));
  const xAt = (c: number, scale: number) => add(get(`x${c}`), `(i32.shl ${get('k')} ${i32(scale)})`);

  /** Adds lo·xl + hi·xh of weight row r into its sums with each x row. */
  const accumulate = (r: number) =>
    cols.flatMap((c) => {
      if (H === 2) {
        return [
          set(acc(r, c, 0), fadd(get(acc(r, c, 0)), fmul(get('lo'), get(`xl${c}`)))),
          set(acc(r, c, 1), fadd(get(acc(r, c, 1)), fmul(get('hi'), get(`xh${c}`)))),
        ];
      }
      return [set(acc(r, c), fadd(get(acc(r, c)), fadd(fmul(get('lo'), get(`xl${c}`)), fmul(get('hi'), get(`xh${c}`)))))];
    });

  if (dt === 'f32' || dt === 'bf16') {
    const es = dt === 'f32' ? 2 : 1; // log2 bytes per value
    const step: string[] = [];
    for (const c of cols) step.push(set(`xl${c}`, load(xAt(c, 2))), set(`xh${c}`, load(xAt(c, 2), 16)));
    for (const r of rows) {
      step.push(...floatPair(dt, add(get(`w${r}`), `(i32.shl ${get('k')} ${i32(es)})`), 'lo', 'hi'));
      step.push(...accumulate(r));
    }
    body.push(
      '(block $main_done (loop $main',
      `(br_if $main_done (i32.gt_u ${add(get('k'), i32(8))} ${get('K')}))`,
      ...step,
      set('k', add(get('k'), i32(8))),
      '(br $main)))',
    );
    // the last K mod 8 values, one at a time
    const tail: string[] = [];
    for (const r of rows) {
      tail.push(`(local.set $sc ${floatScalar(dt, add(get(`w${r}`), `(i32.shl ${get('k')} ${i32(es)})`))})`);
      for (const c of cols) {
        const s = `s${r}_${c}`;
        tail.push(set(s, `(f32.add ${get(s)} (f32.mul ${get('sc')} (f32.load align=1 ${xAt(c, 2)})))`));
      }
    }
    body.push(
      '(block $tail_done (loop $tail',
      `(br_if $tail_done (i32.ge_u ${get('k')} ${get('K')}))`,
      ...tail,
      set('k', add(get('k'), i32(1))),
      '(br $tail)))',
    );
  } else {
    // k counts blocks of 32; each row's scales follow its quant bytes, each staged x row's follow its integers
    const qBytes = dt === 'q8_0' ? get('K') : `(i32.shr_u ${get('K')} ${i32(1)})`;
    const xInts = (c: number) => add(get(`x${c}`), `(i32.shl ${get('k')} ${i32(6)})`);
    const xScale = (c: number) =>
      `(f32.load ${add(add(get(`x${c}`), `(i32.shl ${get('K')} ${i32(1)})`), `(i32.shl ${get('k')} ${i32(2)})`)})`;
    const dot = (j: number, c: number) => `(i32x4.dot_i16x8_s ${get(`q${j}`)} ${get(`xq${c}_${j}`)})`;
    const step: string[] = [];
    for (const c of cols) {
      step.push(...range(4).map((j) => set(`xq${c}_${j}`, load(xInts(c), 16 * j))), set(`sx${c}`, xScale(c)));
    }
    for (const r of rows) {
      const scaleAddr = add(add(get(`w${r}`), qBytes), `(i32.shl ${get('k')} ${i32(1)})`);
      step.push(set('dw', `(f32.load offset=${F16_TABLE} (i32.shl (i32.load16_u align=1 ${scaleAddr}) ${i32(2)}))`));
      step.push(...quantInts(dt, get(`w${r}`), get('k')));
      for (const c of cols) {
        // the block's 32 products, exact in i32 (|q| ≤ 128, |x| ≤ 32767), then one f32 rounding per lane and scale
        step.push(set('t', `(i32x4.add (i32x4.add ${dot(0, c)} ${dot(1, c)}) (i32x4.add ${dot(2, c)} ${dot(3, c)}))`));
        const scale = `(f32x4.splat (f32.mul ${get('dw')} ${get(`sx${c}`)}))`;
        step.push(set(acc(r, c), fadd(get(acc(r, c)), fmul(`(f32x4.convert_i32x4_s ${get('t')})`, scale))));
      }
    }
    body.push(
      '(block $main_done (loop $main',
      `(br_if $main_done (i32.ge_u (i32.shl ${get('k')} ${i32(5)}) ${get('K')}))`,
      ...step,
      set('k', add(get('k'), i32(1))),
      '(br $main)))',
    );
  }
  for (const r of rows) for (const c of cols) {
    const v = H === 2 ? fadd(get(acc(r, c, 0)), get(acc(r, c, 1))) : get(acc(r, c));
    let y = `(f32.add ${hsum(v)} ${get(`s${r}_${c}`)})`;
    y = `(if (result f32) ${get('bias')} (then (f32.add ${y} (f32.load offset=${4 * r} ${get('bias')}))) (else ${y}))`;
    body.push(`(f32.store offset=${4 * r} ${add(get('y'), `(i32.mul ${get('ys')} ${i32(c)})`)} ${y})`);
  }
  const params = ['w', 'ld', 'K', 'x', 'xs', 'y', 'ys', 'bias'].map((n) => `(param $${n} i32)`).join(' ');
  return `(func $${dt}_${R}x${C} ${params}\n  ${locals.join(' ')}\n  ${body.join('\n  ')})`;
}

/**
 * The longest weight row (bytes) a single x row takes row by row. Longer rows stream well in the 4-row blocks, whose
 * 8 independent sums then win over the row loop's chain of two (bf16, one thread, from memory: K = 6144 rows 11.5–12.5
 * GB/s in blocks against 9.6 row by row; K = 3072 about even; K = 1024 and 2048 8–11 against 12–17).
 */
export const ROW_LOOP_BYTES = 4096;

/**
 * One float weight row's product with one staged x row, `(w K x) -> f32`, for products of a single x row (decode):
 * the same sums in the same order as a block's row with one x row (two accumulators, even and odd values, a step of
 * eight at a time, then the K mod 8 tail one value at a time), so a row gives the same bits either way. The row is
 * walked by one pointer with constant offsets, two steps an iteration: a block of 4 rows keeps 4 streams apart by the
 * row's bytes, each load with its own address arithmetic, and reads bf16 rows of K = 1024 from memory at 8–9 GB/s
 * on one core where this loop reads 12–17 (`npm run bench:cpu-kernels`).
 */
function rowFunc(dt: 'f32' | 'bf16'): string {
  const sb = dt === 'f32' ? 32 : 16; // bytes of a step's eight values
  const step = (off: number) => {
    const pair = floatPair(dt, off ? `(i32.add ${get('w')} ${i32(off)})` : get('w'), 'lo', 'hi');
    const xo = 2 * (off / sb) * 16;
    return [
      ...pair,
      set('a0', fadd(get('a0'), fmul(get('lo'), load(get('x'), xo)))),
      set('a1', fadd(get('a1'), fmul(get('hi'), load(get('x'), xo + 16)))),
    ];
  };
  const es = dt === 'f32' ? 2 : 1;
  const body = [
    set('end', add(get('w'), `(i32.shl (i32.and ${get('K')} ${i32(~7)}) ${i32(es)})`)),
    '(block $pairs_done (loop $pairs',
    `(br_if $pairs_done (i32.gt_u ${add(get('w'), i32(2 * sb))} ${get('end')}))`,
    ...step(0),
    ...step(sb),
    set('w', add(get('w'), i32(2 * sb))),
    set('x', add(get('x'), i32(64))),
    '(br $pairs)))',
    `(if (i32.lt_u ${get('w')} ${get('end')}) (then`,
    ...step(0),
    set('w', add(get('w'), i32(sb))),
    set('x', add(get('x'), i32(32))),
    '))',
    set('end', add(get('w'), `(i32.shl (i32.and ${get('K')} ${i32(7)}) ${i32(es)})`)),
    '(block $tail_done (loop $tail',
    `(br_if $tail_done (i32.ge_u ${get('w')} ${get('end')}))`,
    set('s', `(f32.add ${get('s')} (f32.mul ${floatScalar(dt, get('w'))} (f32.load align=1 ${get('x')})))`),
    set('w', add(get('w'), i32(1 << es))),
    set('x', add(get('x'), i32(4))),
    '(br $tail)))',
    `(f32.add ${hsum(fadd(get('a0'), get('a1')))} ${get('s')})`,
  ];
  const locals = '(local $end i32) (local $s f32) (local $a0 v128) (local $a1 v128) (local $lo v128) (local $hi v128) (local $t v128)';
  return `(func $${dt}_row (param $w i32) (param $K i32) (param $x i32) (result f32)\n  ${locals}\n  ${body.join('\n  ')})`;
}

/**
 * rowFunc for quantized rows, `(w K x pk) -> f32`, in two passes so that the row is read once, in address order:
 * first each block's exact i32 dots (four lanes) into the calling thread's scratch at pk (16 bytes a block), then
 * the row's scales, which follow its quant bytes, with x's scales, each block's lanes as the 4 × 1 block takes
 * them (one f32 product with the two scales, added in block order), so the bits are a block's. Reading a block's
 * scale beside its quant bytes touches the row's last line first; from memory, on one core, that ran q4_0 at
 * 7 G values/s where reading the row in order runs about 10.
 */
function quantRowFunc(dt: QuantDType): string {
  const qb = dt === 'q8_0' ? 32 : 16; // quant bytes of a 32-value block
  const dot = (j: number, o: number) => `(i32x4.dot_i16x8_s ${get(`q${j}`)} ${load(get('x'), 64 * o + 16 * j)})`;
  // block o (0 or 1) of a pass's step
  const dots = (o: number) => [
    ...quantInts(dt, get('w'), o),
    `(v128.store offset=${16 * o} ${get('p')} (i32x4.add (i32x4.add ${dot(0, o)} ${dot(1, o)}) (i32x4.add ${dot(2, o)} ${dot(3, o)})))`,
  ];
  const scaled = (o: number) => [
    set('sc', `(f32.mul (f32.load offset=${F16_TABLE} (i32.shl (i32.load16_u offset=${2 * o} align=1 ${get('w')}) ${i32(2)})) ` +
      `(f32.load offset=${4 * o} ${get('xs')}))`),
    set('a0', fadd(get('a0'), fmul(`(f32x4.convert_i32x4_s (v128.load offset=${16 * o} ${get('p')}))`, `(f32x4.splat ${get('sc')})`))),
  ];
  const body = [
    set('end', add(get('w'), dt === 'q8_0' ? get('K') : `(i32.shr_u ${get('K')} ${i32(1)})`)),
    set('xs', add(get('x'), `(i32.shl ${get('K')} ${i32(1)})`)),
    set('p', get('pk')),
    '(block $dots_done (loop $dots',
    `(br_if $dots_done (i32.ge_u ${add(get('w'), i32(qb))} ${get('end')}))`,
    ...dots(0),
    ...dots(1),
    set('w', add(get('w'), i32(2 * qb))),
    set('x', add(get('x'), i32(128))),
    set('p', add(get('p'), i32(32))),
    '(br $dots)))',
    `(if (i32.lt_u ${get('w')} ${get('end')}) (then`,
    ...dots(0),
    set('w', add(get('w'), i32(qb))),
    set('p', add(get('p'), i32(16))),
    '))',
    // the scales: w is now the row's first scale; p ends the dots
    set('end', get('p')),
    set('p', get('pk')),
    '(block $blocks_done (loop $blocks',
    `(br_if $blocks_done (i32.ge_u ${add(get('p'), i32(16))} ${get('end')}))`,
    ...scaled(0),
    ...scaled(1),
    set('w', add(get('w'), i32(4))),
    set('xs', add(get('xs'), i32(8))),
    set('p', add(get('p'), i32(32))),
    '(br $blocks)))',
    `(if (i32.lt_u ${get('p')} ${get('end')}) (then`,
    ...scaled(0),
    '))',
    // a1 and s stay zero: the block's second sum and tail, kept so that the bits are the block's
    `(f32.add ${hsum(fadd(get('a0'), get('a1')))} ${get('s')})`,
  ];
  const locals = ['end', 'xs', 'p'].map((n) => `(local $${n} i32)`).join(' ') + ' (local $sc f32) (local $s f32) ' +
    ['a0', 'a1', 't', 'lo', 'hi', 'q0', 'q1', 'q2', 'q3'].map((n) => `(local $${n} v128)`).join(' ');
  return `(func $${dt}_row (param $w i32) (param $K i32) (param $x i32) (param $pk i32) (result f32)\n  ${locals}\n  ` +
    `${body.join('\n  ')})`;
}

/** The export: blocks of 4 weight rows × 2 x rows, then the edges. */
function gemmFunc(dt: WasmDType): string {
  const params = ['w', 'ld', 'K', 'x', 'M', 'y', 'ldy', 'n0', 'n1', 'bias', ...(isQuant(dt) ? ['pk'] : [])]
    .map((n) => `(param $${n} i32)`).join(' ');
  const call = (R: number, C: number) =>
    `(call $${dt}_${R}x${C} ${add(get('w'), `(i32.mul ${get('n')} ${get('ld')})`)} ${get('ld')} ${get('K')} ` +
    `${add(get('x'), `(i32.mul ${get('m')} ${get('xs')})`)} ${get('xs')} ` +
    `${add(add(get('y'), `(i32.mul ${get('m')} ${get('ys')})`), `(i32.shl ${get('n')} ${i32(2)})`)} ${get('ys')} ` +
    `(if (result i32) ${get('bias')} (then ${add(get('bias'), `(i32.shl ${get('n')} ${i32(2)})`)}) (else ${i32(0)})))`;
  const rowsOf = (R: number, label: string) => [
    `(block $${label}_done (loop $${label}`,
    `(br_if $${label}_done (i32.gt_u ${add(get('n'), i32(R))} ${get('n1')}))`,
    set('m', i32(0)),
    `(block $${label}_m_done (loop $${label}_m`,
    `(br_if $${label}_m_done (i32.gt_u ${add(get('m'), i32(2))} ${get('M')}))`,
    call(R, 2),
    set('m', add(get('m'), i32(2))),
    `(br $${label}_m)))`,
    `(if (i32.lt_u ${get('m')} ${get('M')}) (then ${call(R, 1)}))`,
    set('n', add(get('n'), i32(R))),
    `(br $${label})))`,
  ];
  // a staged x row's bytes, as xRowBytes: 2K + K/8 (integers, then scales) or 4K
  const K = get('K');
  const xStride = isQuant(dt) ? add(`(i32.shl ${K} ${i32(1)})`, `(i32.shr_u ${K} ${i32(3)})`) : `(i32.shl ${K} ${i32(2)})`;
  // one x row against rows of at most ROW_LOOP_BYTES: row by row (rowFunc, quantRowFunc), the same bits as the blocks
  const single = [
    `(if (i32.and (i32.eq ${get('M')} ${i32(1)}) (i32.le_u ${get('ld')} ${i32(ROW_LOOP_BYTES)})) (then`,
    `(block $row_done (loop $row`,
    `(br_if $row_done (i32.ge_u ${get('n')} ${get('n1')}))`,
    set('v', `(call $${dt}_row ${add(get('w'), `(i32.mul ${get('n')} ${get('ld')})`)} ${get('K')} ${get('x')}` +
      `${isQuant(dt) ? ` ${get('pk')}` : ''})`),
    `(if ${get('bias')} (then ${set('v', `(f32.add ${get('v')} (f32.load ${add(get('bias'), `(i32.shl ${get('n')} ${i32(2)})`)}))`)}))`,
    `(f32.store ${add(get('y'), `(i32.shl ${get('n')} ${i32(2)})`)} ${get('v')})`,
    set('n', add(get('n'), i32(1))),
    '(br $row)))',
    '(return)))',
  ];
  return [
    `(func (export "gemm_${dt}") ${params}`,
    '  (local $n i32) (local $m i32) (local $xs i32) (local $ys i32) (local $v f32)',
    `  ${set('xs', xStride)} ${set('ys', `(i32.shl ${get('ldy')} ${i32(2)})`)}`,
    `  ${set('n', get('n0'))}`,
    ...single.map((l) => `  ${l}`),
    ...rowsOf(4, 'quad').map((l) => `  ${l}`),
    ...rowsOf(1, 'single').map((l) => `  ${l}`),
    ')',
  ].join('\n');
}

/** K rounded up to the packed kernels' step, a group of four values. */
export const packedK = (K: number) => (K + 3) & ~3;

/** Bytes of the packed kernels' weight scratch for one thread: 4 rows of packedK(K) f32. */
export const packBytes = (K: number) => 16 * packedK(K);

/** Bytes of a quantized row's scratch for one thread (quantRowFunc): 16 per 32-value block. */
export const quantRowBytes = (K: number) => K / 2;

/**
 * `$pack_<dt>(w, ld, K, Kp, R, pk)`: R weight rows from w (ld bytes apart; the first four taken) as f32 at pk,
 * interleaved by groups of four values (group g of row r at pk + 64g + 16r), zeros for the rows from R to 4 and the
 * values from K to Kp = packedK(K).
 */
function packFunc(dt: WasmDType): string {
  const zero = '(v128.const i32x4 0 0 0 0)';
  const body = [
    set('r', i32(0)),
    '(block $rows_done (loop $rows',
    `(br_if $rows_done (i32.ge_u ${get('r')} ${i32(4)}))`,
    set('d', add(get('pk'), `(i32.shl ${get('r')} ${i32(4)})`)),
    set('k', i32(0)),
    `(if (i32.lt_u ${get('r')} ${get('R')}) (then`,
    set('s', add(get('w'), `(i32.mul ${get('r')} ${get('ld')})`)),
    ...(isQuant(dt) ? quantRowPacked(dt) : floatRowPacked(dt)),
    '))',
    // a missing row: zeros
    '(block $zeros_done (loop $zeros',
    `(br_if $zeros_done (i32.ge_u ${get('k')} ${get('Kp')}))`,
    `(v128.store align=1 ${get('d')} ${zero})`,
    set('d', add(get('d'), i32(64))),
    set('k', add(get('k'), i32(4))),
    '(br $zeros)))',
    set('r', add(get('r'), i32(1))),
    '(br $rows)))',
  ];
  const params = ['w', 'ld', 'K', 'Kp', 'R', 'pk'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = ['r', 'k', 'j', 's', 'ws', 'd'].map((n) => `(local $${n} i32)`).join(' ') + ' ' +
    ['sc', 't', 'lo', 'hi', 'q0', 'q1', 'q2', 'q3'].map((n) => `(local $${n} v128)`).join(' ');
  return `(func $pack_${dt} ${params}\n  ${locals}\n  ${body.join('\n  ')})`;
}

/** packFunc's fill of one float row from s into d (group by group, the K mod 4 tail zero-padded), k left at its end. */
function floatRowPacked(dt: 'f32' | 'bf16'): string[] {
  const es = dt === 'f32' ? 2 : 1;
  const widen = (a: string) => (dt === 'f32' ? load(a) : `(i32x4.shl (v128.load16x4_u align=1 ${a}) ${i32(16)})`);
  return [
    '(block $groups_done (loop $groups',
    `(br_if $groups_done (i32.gt_u ${add(get('k'), i32(4))} ${get('K')}))`,
    `(v128.store align=1 ${get('d')} ${widen(get('s'))})`,
    set('s', add(get('s'), i32(4 << es))),
    set('d', add(get('d'), i32(64))),
    set('k', add(get('k'), i32(4))),
    '(br $groups)))',
    // the last K mod 4 values, zero-padded to a group
    `(if (i32.lt_u ${get('k')} ${get('K')}) (then`,
    `(v128.store align=1 ${get('d')} (v128.const i32x4 0 0 0 0))`,
    set('j', i32(0)),
    '(block $tail_done (loop $tail',
    `(br_if $tail_done (i32.ge_u ${add(get('k'), get('j'))} ${get('K')}))`,
    `(f32.store align=1 ${add(get('d'), `(i32.shl ${get('j')} ${i32(2)})`)} ` +
      `${floatScalar(dt, add(get('s'), `(i32.shl ${get('j')} ${i32(es)})`))})`,
    set('j', add(get('j'), i32(1))),
    '(br $tail)))',
    set('k', add(get('k'), i32(4))),
    '))',
  ];
}

/**
 * packFunc's fill of one quantized row (K a multiple of 32, so Kp = K): each block's values as q·d in f32, exact
 * (|q| ≤ 128 times an f16 scale fits f32's 24 bits). A prompt's product then runs on the packed kernel in f32 with x
 * unrounded, where one x row (decode) takes x as integers (stage_ints).
 */
function quantRowPacked(dt: QuantDType): string[] {
  const qb = dt === 'q8_0' ? 32 : 16;
  // the 32 values of a block as eight i32x4 groups, from i16x8 vectors q0..q3 (quantInts)
  const groups = range(8).map((g) => `(i32x4.extend_${g % 2 ? 'high' : 'low'}_i16x8_s ${get(`q${g >> 1}`)})`);
  return [
    // the row's scales follow its quant bytes
    set('ws', add(get('s'), dt === 'q8_0' ? get('K') : `(i32.shr_u ${get('K')} ${i32(1)})`)),
    '(block $blocks_done (loop $blocks',
    `(br_if $blocks_done (i32.ge_u ${get('k')} ${get('K')}))`,
    set('sc', `(f32x4.splat (f32.load offset=${F16_TABLE} (i32.shl (i32.load16_u align=1 ${get('ws')}) ${i32(2)})))`),
    ...quantInts(dt, get('s'), 0),
    ...groups.map((g, i) => `(v128.store offset=${64 * i} align=1 ${get('d')} ${fmul(`(f32x4.convert_i32x4_s ${g})`, get('sc'))})`),
    set('s', add(get('s'), i32(qb))),
    set('ws', add(get('ws'), i32(2))),
    set('d', add(get('d'), i32(512))),
    set('k', add(get('k'), i32(32))),
    '(br $blocks)))',
  ];
}

/**
 * `$packed_4x<C>(p, pe, x, y, ys, R, bias)`: 4 packed weight rows (p to pe, packFunc's layout) against C = 2 (or 1)
 * staged x rows at x (group g of x row c at x + 16(Cg + c)), one group a pass, every address a pointer plus a
 * constant: one four-lane sum per (row, x row), lane j adding the products of k ≡ j (mod 4) in order of k, then
 * (l0 + l1) + (l2 + l3) and the bias. y[c, r] is stored at y + c·ys + 4r for the rows r < R.
 * One group a pass is the fastest form V8 gives: it loads a pass's vectors before its arithmetic, so a second group
 * would spill the sums (15 vector registers on x64). `fma`: each multiply-add is one `f32x4.relaxed_madd` (relaxed
 * SIMD; fused where the hardware has FMA, which cpuKernelsWat's caller checks), 20 instructions a pass instead of 28.
 */
function packedBlockFunc(C: number, fma: boolean): string {
  const rows = range(4);
  const cols = range(C);
  const acc = (r: number, c: number) => `a${r}_${c}`;
  const locals = ['(local $wv v128)', ...cols.map((c) => `(local $xv${c} v128)`)];
  for (const r of rows) for (const c of cols) locals.push(`(local $${acc(r, c)} v128)`);
  const body: string[] = ['(loop $main'];
  for (const c of cols) body.push(set(`xv${c}`, `(v128.load offset=${16 * c} align=1 ${get('x')})`));
  for (const r of rows) {
    body.push(set('wv', `(v128.load offset=${16 * r} align=1 ${get('p')})`));
    for (const c of cols) {
      const [a, w, x] = [get(acc(r, c)), get('wv'), get(`xv${c}`)];
      body.push(set(acc(r, c), fma ? `(f32x4.relaxed_madd ${w} ${x} ${a})` : fadd(a, fmul(w, x))));
    }
  }
  body.push(set('p', add(get('p'), i32(64))), set('x', add(get('x'), i32(16 * C))));
  body.push(`(br_if $main (i32.lt_u ${get('p')} ${get('pe')}))`, ')');
  for (const r of rows) for (const c of cols) {
    let y = hsum(get(acc(r, c)));
    y = `(if (result f32) ${get('bias')} (then (f32.add ${y} (f32.load offset=${4 * r} ${get('bias')}))) (else ${y}))`;
    const yAt = add(get('y'), `(i32.mul ${get('ys')} ${i32(c)})`);
    body.push(`(if (i32.gt_u ${get('R')} ${i32(r)}) (then (f32.store offset=${4 * r} ${yAt} ${y})))`);
  }
  const params = ['p', 'pe', 'x', 'y', 'ys', 'R', 'bias'].map((n) => `(param $${n} i32)`).join(' ');
  return `(func $packed_4x${C} ${params}\n  ${locals.join(' ')}\n  ${body.join('\n  ')})`;
}

/**
 * A dtype's packed export, `gemm_<dt>_packed(w, ld, K, x, M, y, ldy, n0, n1, bias, pk)`, for products of
 * several x rows (a prompt, a batch): each 4 weight rows of [n0, n1) are widened once into the calling thread's
 * scratch at pk (packBytes(K)), then every pair of x rows runs over them. x is staged in pairs of rows interleaved by
 * groups of four (group g of the pair's row c at 8g + 4c floats), an odd M's last row alone after the pairs, every row
 * zero-padded to packedK(K) (wasm.ts stagePacked).
 * Its sums are in another order than gemm_<dt>'s (lanes of k mod 4, not X_ORDER's), within the same bound.
 */
function packedGemmFunc(dt: WasmDType): string {
  const params = ['w', 'ld', 'K', 'x', 'M', 'y', 'ldy', 'n0', 'n1', 'bias', 'pk'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = ['n', 'm', 'Kp', 'pe', 'xp', 'ys', 'yn', 'bn', 'R'].map((n) => `(local $${n} i32)`).join(' ');
  const call = (C: number) => `(call $packed_4x${C} ${get('pk')} ${get('pe')} ${get('xp')} ` +
    `${add(get('yn'), `(i32.mul ${get('m')} ${get('ys')})`)} ${get('ys')} ${get('R')} ${get('bn')})`;
  const body = [
    set('Kp', `(i32.and ${add(get('K'), i32(3))} ${i32(-4)})`),
    set('pe', add(get('pk'), `(i32.shl ${get('Kp')} ${i32(4)})`)),
    set('ys', `(i32.shl ${get('ldy')} ${i32(2)})`),
    set('n', get('n0')),
    '(block $rows_done (loop $rows',
    `(br_if $rows_done (i32.ge_u ${get('n')} ${get('n1')}))`,
    set('R', `(i32.sub ${get('n1')} ${get('n')})`),
    `(call $pack_${dt} ${add(get('w'), `(i32.mul ${get('n')} ${get('ld')})`)} ${get('ld')} ${get('K')} ${get('Kp')} ${get('R')} ${get('pk')})`,
    set('yn', add(get('y'), `(i32.shl ${get('n')} ${i32(2)})`)),
    set('bn', `(if (result i32) ${get('bias')} (then ${add(get('bias'), `(i32.shl ${get('n')} ${i32(2)})`)}) (else ${i32(0)}))`),
    set('xp', get('x')),
    set('m', i32(0)),
    '(block $pairs_done (loop $pairs',
    `(br_if $pairs_done (i32.gt_u ${add(get('m'), i32(2))} ${get('M')}))`,
    call(2),
    set('xp', add(get('xp'), `(i32.shl ${get('Kp')} ${i32(3)})`)),
    set('m', add(get('m'), i32(2))),
    '(br $pairs)))',
    `(if (i32.lt_u ${get('m')} ${get('M')}) (then ${call(1)}))`,
    set('n', add(get('n'), i32(4))),
    '(br $rows)))',
  ];
  return `(func (export "gemm_${dt}_packed") ${params}\n  ${locals}\n  ${body.join('\n  ')})`;
}

/**
 * `read_bytes(addr, n) -> i32`: reads n bytes (a multiple of 64) as v128 words, four independent xor chains, and
 * returns a lane of the result so that nothing is skipped: the memory bandwidth one thread reaches, which the
 * benchmark reports the kernels' throughput against.
 */
const READ_BYTES = `(func (export "read_bytes") (param $p i32) (param $n i32) (result i32)
  (local $end i32) (local $a v128) (local $b v128) (local $c v128) (local $d v128)
  ${set('end', add(get('p'), get('n')))}
  (block $done (loop $next
    (br_if $done (i32.ge_u ${get('p')} ${get('end')}))
    ${set('a', `(v128.xor ${get('a')} ${load(get('p'))})`)} ${set('b', `(v128.xor ${get('b')} ${load(get('p'), 16)})`)}
    ${set('c', `(v128.xor ${get('c')} ${load(get('p'), 32)})`)} ${set('d', `(v128.xor ${get('d')} ${load(get('p'), 48)})`)}
    ${set('p', add(get('p'), i32(64)))}
    (br $next)))
  (i32x4.extract_lane 0 (v128.xor (v128.xor ${get('a')} ${get('b')}) (v128.xor ${get('c')} ${get('d')}))))`;

/**
 * `stage_ints(x, K, q)`: one row of x (K f32 at x, K a multiple of 32) staged for the quantized rows at q: per
 * 32-value block the values over the block's scale max|x|/X_INT_MAX, rounded to nearest (ties to even) and saturated
 * to i16, the K/32 scales (f32) after the K integers. x·(1/scale) is an f32 product, so a value moves by at most
 * (½ + 2⁻⁸)·scale. A block whose largest |x| is NaN or infinite gets a NaN scale (and integers 0), so its products
 * are NaN.
 */
const STAGE_INTS = (() => {
  const absAt = (o: number) => `(f32x4.abs ${load(get('p'), o)})`;
  const maxOf = (a: string, b: string) => `(f32x4.max ${a} ${b})`;
  const pairs = range(4).map((i) => maxOf(absAt(32 * i), absAt(32 * i + 16)));
  const tree = maxOf(maxOf(pairs[0], pairs[1]), maxOf(pairs[2], pairs[3]));
  const lane = (i: number) => `(f32x4.extract_lane ${i} ${get('m')})`;
  const ints = (o: number) => `(i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul ${load(get('p'), o)} ${get('inv')})))`;
  const body = [
    set('b', i32(0)),
    '(block $done (loop $next',
    `(br_if $done (i32.ge_u (i32.shl ${get('b')} ${i32(5)}) ${get('K')}))`,
    set('p', add(get('x'), `(i32.shl ${get('b')} ${i32(7)})`)),
    set('m', tree),
    set('mx', `(f32.max (f32.max ${lane(0)} ${lane(1)}) (f32.max ${lane(2)} ${lane(3)}))`),
    set('s', `(f32.div ${get('mx')} (f32.const ${X_INT_MAX}))`),
    // s + (mx - mx): NaN where mx is NaN or infinite
    `(f32.store ${add(add(get('q'), `(i32.shl ${get('K')} ${i32(1)})`), `(i32.shl ${get('b')} ${i32(2)})`)} ` +
      `(f32.add ${get('s')} (f32.sub ${get('mx')} ${get('mx')})))`,
    set('inv', `(f32x4.splat (select (f32.div (f32.const 1) ${get('s')}) (f32.const 0) ` +
      `(i32.and (f32.gt ${get('s')} (f32.const 0)) (f32.lt ${get('s')} (f32.const inf)))))`),
    ...range(4).map((j) => `(v128.store offset=${16 * j} align=1 ${add(get('q'), `(i32.shl ${get('b')} ${i32(6)})`)} ` +
      `(i16x8.narrow_i32x4_s ${ints(32 * j)} ${ints(32 * j + 16)}))`),
    set('b', add(get('b'), i32(1))),
    '(br $next))',
    ')',
  ];
  const params = ['x', 'K', 'q'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = '(local $b i32) (local $p i32) (local $m v128) (local $inv v128) (local $mx f32) (local $s f32)';
  return `(func (export "stage_ints") ${params}\n  ${locals}\n  ${body.join('\n  ')})`;
})();

/**
 * Attention's two products for one query row (head h, query t) over its n visible keys, f32 (the reference,
 * attention/cpu.ts, sums in f64; attn_rows runs the softmax between them):
 * - `attn_scores(q, k, ks, n, D, s)`: s[j] = q·k_j for j < n, k_j at byte address k + j·ks (a cache row's head), q
 *   and each k_j D floats; eight keys at a time, each q vector loaded once for the eight.
 * - `attn_mix(p, v, vs, n, D, o)`: o = Σ_j p[j]·v_j, v_j at v + j·vs; eight keys a pass, o accumulated in place.
 * D must be a multiple of 4 (the caller keeps the reference otherwise).
 */
/**
 * attn_scores' and attn_mix's pass over R keys at a time while R more remain: `${row}0` … to the R key rows (at
 * base + j·stride, then a stride apart), then `body`, then j advanced by R.
 */
function keyRowsPass(label: string, R: number, row: string, base: string, stride: string, body: (keys: number[]) => string[]) {
  const keys = range(R);
  return [
    `(block $${label}_done (loop $${label}`,
    `(br_if $${label}_done (i32.gt_u ${add(get('j'), i32(R))} ${get('n')}))`,
    ...keys.map((r) => set(`${row}${r}`, r === 0 ? add(get(base), `(i32.mul ${get('j')} ${get(stride)})`)
      : add(get(`${row}${r - 1}`), get(stride)))),
    ...body(keys),
    set('j', add(get('j'), i32(R))),
    `(br $${label})))`,
  ];
}

/** A loop over a row's vectors, i from 0 to D bytes by 16, around `inner`. */
function overDims(label: string, inner: string[]) {
  return [
    set('i', i32(0)),
    `(block $${label}_dims_done (loop $${label}_dims`,
    `(br_if $${label}_dims_done (i32.ge_u ${get('i')} ${get('D')}))`,
    ...inner,
    set('i', add(get('i'), i32(16))),
    `(br $${label}_dims)))`,
  ];
}

const ATTN_SCORES = (() => {
  /** s[j .. j + R) for R keys at a time while R more remain, each vector of q loaded once for the R. */
  const pass = (label: string, R: number) => keyRowsPass(label, R, 'k', 'k', 'ks', (keys) => [
    ...keys.map((r) => set(`a${r}`, '(v128.const i32x4 0 0 0 0)')),
    ...overDims(label, [
      set('qv', load(add(get('q'), get('i')))),
      ...keys.map((r) => set(`a${r}`, fadd(get(`a${r}`), fmul(get('qv'), load(add(get(`k${r}`), get('i'))))))),
    ]),
    ...keys.map((r) => `(f32.store offset=${4 * r} ${add(get('s'), `(i32.shl ${get('j')} ${i32(2)})`)} ${hsum(get(`a${r}`))})`),
  ]);
  const body = [set('D', `(i32.shl ${get('D')} ${i32(2)})`), set('j', i32(0)), ...pass('oct', 8), ...pass('one', 1)];
  const params = ['q', 'k', 'ks', 'n', 'D', 's'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = ['(local $j i32) (local $i i32) (local $qv v128)', ...range(8).map((r) => `(local $k${r} i32) (local $a${r} v128)`)];
  return `(func $attn_scores ${params}\n  ${locals.join(' ')}\n  ${body.join('\n  ')})`;
})();

const ATTN_MIX = (() => {
  /**
   * R keys a pass while R more remain: o[i] += p[j]·v_j[i] for each of them in order of j, over o's vectors. Each key
   * row is read whole and in address order (a cache's rows of one head are a page apart, so reading 64 bytes of every
   * row per pass walked the whole cache once per 16 values of o); o, D floats, stays in L1 between passes.
   */
  const pass = (label: string, R: number) => keyRowsPass(label, R, 'v', 'v', 'vs', (keys) => [
    ...keys.map((r) => set(`p${r}`, `(f32x4.splat (f32.load offset=${4 * r} ${add(get('p'), `(i32.shl ${get('j')} ${i32(2)})`)}))`)),
    ...overDims(label, [
      set('ov', load(add(get('o'), get('i')))),
      ...keys.map((r) => set('ov', fadd(get('ov'), fmul(get(`p${r}`), load(add(get(`v${r}`), get('i'))))))),
      `(v128.store align=1 ${add(get('o'), get('i'))} ${get('ov')})`,
    ]),
  ]);
  const body = [
    set('D', `(i32.shl ${get('D')} ${i32(2)})`),
    // o = 0, then each key added in order of j: a lane's sum is the reference's order
    ...overDims('zero', [`(v128.store align=1 ${add(get('o'), get('i'))} (v128.const i32x4 0 0 0 0))`]),
    set('j', i32(0)), ...pass('oct', 8), ...pass('one', 1),
  ];
  const params = ['p', 'v', 'vs', 'n', 'D', 'o'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = ['(local $j i32) (local $i i32) (local $ov v128)', ...range(8).map((r) => `(local $v${r} i32) (local $p${r} v128)`)];
  return `(func $attn_mix ${params}\n  ${locals.join(' ')}\n  ${body.join('\n  ')})`;
})();

/** f64 arithmetic as WAT, on a scalar (`f64`) or on two lanes (`f64x2`, constants splatted): $exp and $exp2 alike. */
interface F64Ops {
  k(v: string): string;
  mul(a: string, b: string): string;
  add(a: string, b: string): string;
  sub(a: string, b: string): string;
  div(a: string, b: string): string;
}
const f64Ops = (shape: 'f64' | 'f64x2'): F64Ops => ({
  k: shape === 'f64' ? (v) => `(f64.const ${v})` : (v) => `(f64x2.splat (f64.const ${v}))`,
  mul: (a, b) => `(${shape}.mul ${a} ${b})`,
  add: (a, b) => `(${shape}.add ${a} ${b})`,
  sub: (a, b) => `(${shape}.sub ${a} ${b})`,
  div: (a, b) => `(${shape}.div ${a} ${b})`,
});

/** fdlibm's e^x: ln 2 in two parts, 1/ln 2, and the coefficients P1..P5 of its rational approximation. */
const LN2_HI = '6.93147180369123816490e-01';
const LN2_LO = '1.90821492927058770002e-10';
const INV_LN2 = '1.44269504088896338700e+00';
const EXP_P = ['1.66666666666666019037e-01', '-2.77777777770155933842e-03', '6.61375632143793436117e-05',
  '-1.65339022054652515390e-06', '4.13813679705723846039e-08'];

/**
 * fdlibm's steps after the reduction, from locals $x (reduced), $t, $c, $hi and $lo: `c` = x − t·(P1 + t·(P2 + …)) with
 * t = x², then the result for k = 0, 1 − (x·c/(c − 2) − x), and for k ≠ 0 before its scale by 2^k,
 * 1 − ((lo − x·c/(2 − c)) − hi). `xc` is x·c, or a local that holds it.
 */
function expSteps(o: F64Ops, xc = o.mul(get('x'), get('c'))) {
  const [x, t, c] = [get('x'), get('t'), get('c')];
  const poly = o.mul(t, EXP_P.slice(0, -1).reduceRight((inner, p) => o.add(o.k(p), o.mul(t, inner)), o.k(EXP_P[EXP_P.length - 1]!)));
  return {
    c: o.sub(x, poly),
    k0: o.sub(o.k('1'), o.sub(o.div(xc, o.sub(c, o.k('2'))), x)),
    scaled: o.sub(o.k('1'), o.sub(o.sub(get('lo'), o.div(xc, o.sub(o.k('2'), c))), get('hi'))),
  };
}

/**
 * `exp(x) -> f64`: e^x with the bits of V8's Math.exp, which is fdlibm's algorithm (reduction by k·ln 2 in two
 * parts, a degree-5 rational approximation on [−ln2/2, ln2/2], then a scale by 2^k); wasm.test.ts compares the two on
 * a sweep of arguments. The CPU reference's softmax calls Math.exp, so attention on the kernels' threads (attn_rows)
 * gives its bits.
 */
const EXP = (() => {
  const o = f64Ops('f64');
  const f = o.k;
  const x = get('x');
  const high = (v: string) => `(i32.wrap_i64 (i64.shr_u (i64.reinterpret_f64 ${v}) (i64.const 32)))`;
  // 2^k for k ≥ −1021 (else 2^(k+1000)), as the high word of a double
  const pow2 = (k: string) => `(f64.reinterpret_i64 (i64.shl (i64.extend_i32_u (i32.add ${i32(0x3ff00000)} (i32.shl ${k} ${i32(20)}))) ` +
    '(i64.const 32)))';
  const steps = expSteps(o);
  const body = [
    set('hx', high(x)),
    set('xsb', `(i32.shr_u ${get('hx')} ${i32(31)})`),
    set('hx', `(i32.and ${get('hx')} ${i32(0x7fffffff)})`),
    `(if (i32.ge_u ${get('hx')} ${i32(0x40862e42)}) (then`,
    // NaN: x + x; ±∞: ∞ or 0; past the thresholds: overflow to ∞, underflow to 0
    `(if (i32.ge_u ${get('hx')} ${i32(0x7ff00000)}) (then`,
    `(if (i32.or (i32.and ${get('hx')} ${i32(0xfffff)}) (i32.wrap_i64 (i64.reinterpret_f64 ${x}))) (then (return (f64.add ${x} ${x}))))`,
    `(return (select ${x} ${f('0')} (i32.eqz ${get('xsb')})))))`,
    `(if (f64.gt ${x} ${f('7.09782712893383973096e+02')}) (then (return ${f('inf')})))`,
    `(if (f64.lt ${x} ${f('-7.45133219101941108420e+02')}) (then (return ${f('0')})))))`,
    `(if (i32.gt_u ${get('hx')} ${i32(0x3fd62e42)}) (then`,
    `(if (i32.lt_u ${get('hx')} ${i32(0x3ff0a2b2)}) (then`,
    `(if (f64.eq ${x} ${f('1')}) (then (return ${f('2.718281828459045')})))`,
    set('hi', `(f64.sub ${x} (select ${f(`-${LN2_HI}`)} ${f(LN2_HI)} ${get('xsb')}))`),
    set('lo', `(select ${f(`-${LN2_LO}`)} ${f(LN2_LO)} ${get('xsb')})`),
    set('k', `(i32.sub ${i32(1)} (i32.shl ${get('xsb')} ${i32(1)}))`),
    ') (else',
    set('k', `(i32.trunc_f64_s ${o.add(o.mul(f(INV_LN2), x), `(select ${f('-0.5')} ${f('0.5')} ${get('xsb')})`)})`),
    set('t', `(f64.convert_i32_s ${get('k')})`),
    set('hi', `(f64.sub ${x} (f64.mul ${get('t')} ${f(LN2_HI)}))`),
    set('lo', `(f64.mul ${get('t')} ${f(LN2_LO)})`),
    '))',
    set('x', `(f64.sub ${get('hi')} ${get('lo')})`),
    ') (else',
    // |x| < 2^-28: 1 + x
    `(if (i32.lt_u ${get('hx')} ${i32(0x3e300000)}) (then (return (f64.add ${f('1')} ${x}))))`,
    set('k', i32(0)),
    '))',
    set('t', `(f64.mul ${x} ${x})`),
    set('c', steps.c),
    `(if (i32.eqz ${get('k')}) (then (return ${steps.k0})))`,
    set('y', steps.scaled),
    `(if (i32.ge_s ${get('k')} ${i32(-1021)}) (then`,
    `(if (i32.eq ${get('k')} ${i32(1024)}) (then (return (f64.mul (f64.mul ${get('y')} ${f('2')}) ${f('8.988465674311579539e307')}))))`,
    `(return (f64.mul ${get('y')} ${pow2(get('k'))}))))`,
    `(f64.mul (f64.mul ${get('y')} ${pow2(add(get('k'), i32(1000)))}) ${f('9.33263618503218878990e-302')})`,
  ];
  const locals = ['hx', 'xsb', 'k'].map((n) => `(local $${n} i32)`).join(' ') + ' ' +
    ['hi', 'lo', 't', 'c', 'y'].map((n) => `(local $${n} f64)`).join(' ');
  return `(func $exp (export "exp") (param $x f64) (result f64)\n  ${locals}\n  ${body.join('\n  ')})`;
})();

/**
 * `$exp2(x: f64x2) -> f64x2`: $exp on both lanes, the same bits, two at a time. Lanes with 2⁻²⁸ ≤ |x| < 708 and x ≠ 1
 * take fdlibm's three cases at once (k = 0 below ln2/2, k = ±1 below 1.5·ln2, else k = trunc(x/ln2 ± ½), the same
 * reduction, polynomial and the two final forms, each lane keeping its case's); a pair with any other lane (NaN, ±∞,
 * near overflow or underflow, tiny, or 1, which V8 answers from a constant) goes to $exp lane by lane. `exp_array`
 * exports it over arrays, for the tests.
 */
const EXP2 = (() => {
  const o = f64Ops('f64x2');
  const f2 = o.k;
  const x = get('x');
  const sel = (a: string, b: string, m: string) => `(v128.bitselect ${a} ${b} ${m})`;
  const steps = expSteps(o, get('xc'));
  const i64 = (v: string) => `(i64x2.splat (i64.const ${v}))`;
  const body = [
    set('ax', `(f64x2.abs ${x})`),
    `(if (v128.any_true (v128.or (v128.not (f64x2.lt ${get('ax')} ${f2('708')})) ` +
      `(v128.or (f64x2.lt ${get('ax')} ${f2('0x1p-28')}) (f64x2.eq ${x} ${f2('1')})))) (then ` +
      `(return (f64x2.replace_lane 1 (f64x2.splat (call $exp (f64x2.extract_lane 0 ${x}))) (call $exp (f64x2.extract_lane 1 ${x}))))))`,
    // the high words of |x|, the cases, and k as f64: 0, ±1, or trunc(x/ln2 ± ½)
    set('hx', `(i64x2.shr_u (v128.and ${x} ${i64('0x7fffffffffffffff')}) ${i32(32)})`),
    set('neg', `(f64x2.lt ${x} ${f2('0')})`),
    set('t', `(f64x2.convert_low_i32x4_s (i32x4.trunc_sat_f64x2_s_zero ${o.add(o.mul(f2(INV_LN2), x),
      sel(f2('-0.5'), f2('0.5'), get('neg')))}))`),
    set('t', sel(get('t'), sel(sel(f2('-1'), f2('1'), get('neg')), f2('0'), `(i64x2.gt_s ${get('hx')} ${i64('0x3fd62e42')})`),
      `(i64x2.ge_s ${get('hx')} ${i64('0x3ff0a2b2')})`)),
    set('kz', `(f64x2.eq ${get('t')} ${f2('0')})`),
    set('p2', `(i64x2.shl (i64x2.add (i64x2.extend_low_i32x4_s (i32x4.trunc_sat_f64x2_s_zero ${get('t')})) ${i64('1023')}) ${i32(52)})`),
    set('hi', o.sub(x, o.mul(get('t'), f2(LN2_HI)))),
    set('lo', o.mul(get('t'), f2(LN2_LO))),
    set('x', o.sub(get('hi'), get('lo'))),
    set('t', o.mul(x, x)),
    set('c', steps.c),
    set('xc', o.mul(x, get('c'))),
    sel(steps.k0, o.mul(steps.scaled, get('p2')), get('kz')),
  ];
  const locals = ['ax', 'hx', 'neg', 'kz', 'p2', 'hi', 'lo', 't', 'c', 'xc'].map((n) => `(local $${n} v128)`).join(' ');
  const exp2 = `(func $exp2 (param $x v128) (result v128)\n  ${locals}\n  ${body.join('\n  ')})`;
  const at = (base: string) => add(get(base), `(i32.shl ${get('i')} ${i32(3)})`);
  const array = `(func (export "exp_array") (param $x i32) (param $y i32) (param $n i32) (local $i i32)
  (block $done (loop $pairs
    (br_if $done (i32.gt_u ${add(get('i'), i32(2))} ${get('n')}))
    (v128.store align=8 ${at('y')} (call $exp2 (v128.load align=8 ${at('x')})))
    ${set('i', add(get('i'), i32(2)))}
    (br $pairs)))
  (if (i32.lt_u ${get('i')} ${get('n')}) (then (f64.store ${at('y')} (call $exp (f64.load ${at('x')}))))))`;
  return `${exp2}\n${array}`;
})();

/** The gated activations `glu` takes, by its mode parameter. */
export const GLU_MODES = ['silu', 'gelu_tanh'] as const;

/**
 * `glu(gate, up, out, mode, _, _, _, i0, i1, _, _)`: out[i] = act(gate[i])·up[i] for i in [i0, i1), f32 arrays, in
 * f64 as the CPU reference (activation/cpu.ts) computes it, e^x by $exp, so the bits are the reference's: act is
 * x·σ(x) (mode 0, SiLU) or x·σ(2·√(2/π)·(x + 0.044715·x³)) (mode 1, tanh-approximated GELU), σ(z) = 1/(1 + e^−z) for
 * z ≥ 0 and e^z/(1 + e^z) below. Its parameters are a GEMM export's, so that the threads split its values.
 */
const GLU = (() => {
  const f = (v: string) => `(f64.const ${v})`;
  const at = (base: string) => add(get(base), `(i32.shl ${get('i')} ${i32(2)})`);
  const x = get('x');
  // the argument of σ: x, or 2·√(2/π)·(x + ((0.044715·x)·x)·x), each product in the reference's order
  const geluOf = (o: F64Ops, v: string) => o.mul(o.k('1.5957691216057308'), o.add(v, o.mul(o.mul(o.mul(o.k('0.044715'), v), v), v)));
  const gelu = geluOf(f64Ops('f64'), x);
  // two values a pass ($exp2), each lane the scalar loop's steps; then an odd last value
  const x2 = get('x2');
  const gelu2 = geluOf(f64Ops('f64x2'), x2);
  const pairs = [
    '(block $pairs_done (loop $pairs',
    `(br_if $pairs_done (i32.gt_u ${add(get('i'), i32(2))} ${get('i1')}))`,
    set('x2', `(f64x2.promote_low_f32x4 (v128.load64_zero align=4 ${at('gate')}))`),
    set('z2', `(select ${gelu2} ${x2} ${get('mode')})`),
    set('ge', `(f64x2.ge ${get('z2')} (f64x2.splat ${f('0')}))`),
    set('e2', `(call $exp2 (v128.bitselect (f64x2.neg ${get('z2')}) ${get('z2')} ${get('ge')}))`),
    set('d2', `(f64x2.add (f64x2.splat ${f('1')}) ${get('e2')})`),
    set('s2', `(v128.bitselect (f64x2.div (f64x2.splat ${f('1')}) ${get('d2')}) (f64x2.div ${get('e2')} ${get('d2')}) ${get('ge')})`),
    `(v128.store64_lane align=4 0 ${at('out')} (f32x4.demote_f64x2_zero (f64x2.mul (f64x2.mul ${x2} ${get('s2')}) ` +
      `(f64x2.promote_low_f32x4 (v128.load64_zero align=4 ${at('up')})))))`,
    set('i', add(get('i'), i32(2))),
    '(br $pairs)))',
  ];
  const body = [
    set('i', get('i0')),
    ...pairs,
    '(block $done (loop $next',
    `(br_if $done (i32.ge_u ${get('i')} ${get('i1')}))`,
    set('x', `(f64.promote_f32 (f32.load ${at('gate')}))`),
    set('z', `(select ${gelu} ${x} ${get('mode')})`),
    `(if (f64.ge ${get('z')} ${f('0')}) (then ${set('s', `(f64.div ${f('1')} (f64.add ${f('1')} (call $exp (f64.neg ${get('z')}))))`)}) ` +
      `(else ${set('e', `(call $exp ${get('z')})`)} ${set('s', `(f64.div ${get('e')} (f64.add ${f('1')} ${get('e')}))`)}))`,
    `(f32.store ${at('out')} (f32.demote_f64 (f64.mul (f64.mul ${x} ${get('s')}) (f64.promote_f32 (f32.load ${at('up')})))))`,
    set('i', add(get('i'), i32(1))),
    '(br $next)))',
  ];
  const params = ['gate', 'up', 'out', 'mode', 'u0', 'u1', 'u2', 'i0', 'i1', 'u3', 'u4'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = '(local $i i32) (local $x f64) (local $z f64) (local $s f64) (local $e f64) ' +
    ['x2', 'z2', 'ge', 'e2', 'd2', 's2'].map((n) => `(local $${n} v128)`).join(' ');
  return `(func (export "glu") ${params}\n  ${locals}\n  ${body.join('\n  ')})`;
})();

/** Bytes of rmsnorm's dims block: eps, then offset (f64). */
export const RMSNORM_DIMS_BYTES = 16;

/**
 * `rmsnorm(x, w, out, cols, dims, _, _, r0, r1, _, _)`: RMSNorm of rows [r0, r1) of x (cols f32 each) as
 * rmsnorm/cpu.ts's rmsnormForward computes it, the same bits: Σx² in f64 in order of the columns, r = 1/√(Σx²/cols +
 * eps), then each value (x·r)·(offset + w) in f64 rounded to f32. eps and offset are f64 in the dims block
 * (RMSNORM_DIMS_BYTES). The scaling runs two values at a time (f64x2), elementwise, so its bits are the scalar ones.
 * Its parameters are a GEMM export's, so that the threads split its rows.
 */
const RMSNORM = (() => {
  const f64at = (o: number) => `(f64.load offset=${o} ${get('dims')})`;
  const xc = add(get('xr'), `(i32.shl ${get('c')} ${i32(2)})`);
  const body = [
    set('eps', f64at(0)),
    set('off', `(f64x2.splat ${f64at(8)})`),
    set('r', get('r0')),
    '(block $rows_done (loop $rows',
    `(br_if $rows_done (i32.ge_u ${get('r')} ${get('r1')}))`,
    set('xr', add(get('x'), `(i32.shl (i32.mul ${get('r')} ${get('cols')}) ${i32(2)})`)),
    set('or', add(get('out'), `(i32.shl (i32.mul ${get('r')} ${get('cols')}) ${i32(2)})`)),
    set('ss', '(f64.const 0)'),
    set('c', i32(0)),
    '(block $sum_done (loop $sum',
    `(br_if $sum_done (i32.ge_u ${get('c')} ${get('cols')}))`,
    set('v', `(f64.promote_f32 (f32.load ${xc}))`),
    set('ss', `(f64.add ${get('ss')} (f64.mul ${get('v')} ${get('v')}))`),
    set('c', add(get('c'), i32(1))),
    '(br $sum)))',
    set('rs', `(f64x2.splat (f64.div (f64.const 1) (f64.sqrt (f64.add ` +
      `(f64.div ${get('ss')} (f64.convert_i32_u ${get('cols')})) ${get('eps')}))))`),
    set('c', i32(0)),
    '(block $pairs_done (loop $pairs',
    `(br_if $pairs_done (i32.gt_u ${add(get('c'), i32(2))} ${get('cols')}))`,
    set('t', `(f64x2.mul (f64x2.mul (f64x2.promote_low_f32x4 (v128.load64_zero align=1 ${xc})) ${get('rs')}) ` +
      `(f64x2.add ${get('off')} (f64x2.promote_low_f32x4 (v128.load64_zero align=1 ${add(get('w'), `(i32.shl ${get('c')} ${i32(2)})`)}))))`),
    `(v128.store64_lane align=1 0 ${add(get('or'), `(i32.shl ${get('c')} ${i32(2)})`)} (f32x4.demote_f64x2_zero ${get('t')}))`,
    set('c', add(get('c'), i32(2))),
    '(br $pairs)))',
    // an odd last column
    `(if (i32.lt_u ${get('c')} ${get('cols')}) (then (f32.store ${add(get('or'), `(i32.shl ${get('c')} ${i32(2)})`)} (f32.demote_f64 ` +
      `(f64.mul (f64.mul (f64.promote_f32 (f32.load ${xc})) (f64x2.extract_lane 0 ${get('rs')})) ` +
      `(f64.add (f64x2.extract_lane 0 ${get('off')}) (f64.promote_f32 (f32.load ${add(get('w'), `(i32.shl ${get('c')} ${i32(2)})`)}))))))))`,
    set('r', add(get('r'), i32(1))),
    '(br $rows)))',
  ];
  const params = ['x', 'w', 'out', 'cols', 'dims', 'u0', 'u1', 'r0', 'r1', 'u2', 'u3'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = '(local $r i32) (local $c i32) (local $xr i32) (local $or i32) (local $eps f64) (local $ss f64) (local $v f64) ' +
    '(local $off v128) (local $rs v128) (local $t v128)';
  return `(func (export "rmsnorm") ${params}\n  ${locals}\n  ${body.join('\n  ')})`;
})();

/** Bytes of attn_rows' dims block: T, hq, hkv, D, kvLen, window (i32), then scale (f64). */
export const ATTN_DIMS_BYTES = 32;

/** Bytes of attn_rows' scratch for one thread over kvLen keys: the scores (f32), then their exponentials (f64). */
export const attnRowsBytes = (kvLen: number) => 8 * Math.ceil(kvLen / 2) + 8 * kvLen;

/**
 * `attn_rows(q, k, v, o, dims, ms, _, r0, r1, _, pk)`: attention's forward for rows [r0, r1) of (head, query) pairs,
 * row r = h·T + t, as the CPU reference computes it: the scores by attn_scores, the softmax in f64 (max, e^(s·scale −
 * max) by $exp, their sum in order, each probability stored as f32), then attn_mix into o; where ms is not 0, the
 * row's max and sum (f64) at ms + 16r, for the caller's logsumexp. The dims block at `dims` (ATTN_DIMS_BYTES) gives T,
 * hq, hkv, D, kvLen, window and scale; pk is the calling thread's scratch (attnRowsBytes). Its parameters are a GEMM
 * export's, so that the threads split its rows as they split a product's (wasm-threads.ts).
 */
const ATTN_ROWS = (() => {
  const dim = (o: number) => `(i32.load offset=${o} ${get('dims')})`;
  const sj = `(f32.load ${add(get('pk'), `(i32.shl ${get('j')} ${i32(2)})`)})`;
  const ej = add(get('e'), `(i32.shl ${get('j')} ${i32(3)})`);
  const overKeys = (label: string, body: string[]) => [
    set('j', i32(0)),
    `(block $${label}_done (loop $${label}`,
    `(br_if $${label}_done (i32.ge_u ${get('j')} ${get('n')}))`,
    ...body,
    set('j', add(get('j'), i32(1))),
    `(br $${label})))`,
  ];
  const body = [
    set('T', dim(0)),
    set('group', `(i32.div_u ${dim(4)} ${dim(8)})`),
    set('D', dim(12)),
    set('scale', `(f64.load offset=24 ${get('dims')})`),
    set('rowBytes', `(i32.shl (i32.mul ${dim(8)} ${get('D')}) ${i32(2)})`),
    // the exponentials after the scores, 8-byte aligned
    set('e', add(get('pk'), `(i32.shl (i32.shr_u ${add(dim(16), i32(1))} ${i32(1)}) ${i32(3)})`)),
    set('r', get('r0')),
    '(block $rows_done (loop $rows',
    `(br_if $rows_done (i32.ge_u ${get('r')} ${get('r1')}))`,
    set('h', `(i32.div_u ${get('r')} ${get('T')})`),
    set('t', `(i32.sub ${get('r')} (i32.mul ${get('h')} ${get('T')}))`),
    // keyRange: pos = kvLen − T + t; lo = max(0, pos − window + 1) with a window
    set('pos', `(i32.add (i32.sub ${dim(16)} ${get('T')}) ${get('t')})`),
    set('lo', i32(0)),
    `(if (i32.gt_s ${dim(20)} ${i32(0)}) (then ${set('lo', `(select (i32.sub (i32.add ${get('pos')} ${i32(1)}) ${dim(20)}) ${i32(0)} ` +
      `(i32.gt_s (i32.sub (i32.add ${get('pos')} ${i32(1)}) ${dim(20)}) ${i32(0)}))`)}))`,
    set('n', `(i32.sub (i32.add ${get('pos')} ${i32(1)}) ${get('lo')})`),
    set('qo', `(i32.shl (i32.mul (i32.add (i32.mul ${get('t')} ${dim(4)}) ${get('h')}) ${get('D')}) ${i32(2)})`),
    // the key head's first row in range
    set('ko', add(`(i32.mul ${get('lo')} ${get('rowBytes')})`,
      `(i32.shl (i32.mul (i32.div_u ${get('h')} ${get('group')}) ${get('D')}) ${i32(2)})`)),
    `(call $attn_scores ${add(get('q'), get('qo'))} ${add(get('k'), get('ko'))} ${get('rowBytes')} ${get('n')} ${get('D')} ${get('pk')})`,
    set('m', '(f64.const -inf)'),
    ...overKeys('max', [set('m', `(f64.max ${get('m')} (f64.mul (f64.promote_f32 ${sj}) ${get('scale')}))`)]),
    set('sum', '(f64.const 0)'),
    ...overKeys('exp', [
      `(f64.store ${ej} (call $exp (f64.sub (f64.mul (f64.promote_f32 ${sj}) ${get('scale')}) ${get('m')})))`,
      set('sum', `(f64.add ${get('sum')} (f64.load ${ej}))`),
    ]),
    ...overKeys('norm', [
      `(f32.store ${add(get('pk'), `(i32.shl ${get('j')} ${i32(2)})`)} (f32.demote_f64 (f64.div (f64.load ${ej}) ${get('sum')})))`,
    ]),
    `(call $attn_mix ${get('pk')} ${add(get('v'), get('ko'))} ${get('rowBytes')} ${get('n')} ${get('D')} ${add(get('o'), get('qo'))})`,
    // the row's max and sum, from which the caller takes its logsumexp
    `(if ${get('ms')} (then (f64.store ${add(get('ms'), `(i32.shl ${get('r')} ${i32(4)})`)} ${get('m')}) ` +
      `(f64.store offset=8 ${add(get('ms'), `(i32.shl ${get('r')} ${i32(4)})`)} ${get('sum')})))`,
    set('r', add(get('r'), i32(1))),
    '(br $rows)))',
  ];
  const params = ['q', 'k', 'v', 'o', 'dims', 'ms', 'u1', 'r0', 'r1', 'u2', 'pk'].map((n) => `(param $${n} i32)`).join(' ');
  const ints = ['T', 'group', 'D', 'rowBytes', 'e', 'r', 'h', 't', 'pos', 'lo', 'n', 'qo', 'ko', 'j'];
  const locals = ints.map((n) => `(local $${n} i32)`).join(' ') + ' (local $scale f64) (local $m f64) (local $sum f64)';
  return `(func (export "attn_rows") ${params}\n  ${locals}\n  ${body.join('\n  ')})`;
})();

/**
 * `delta_rule(q, k, v, a, b, S, o, u, T, nk, nv, dk, dv, m)`: the gated delta rule's forward (deltarule/cpu.ts, whose
 * f64 column walk is the reference) for every value head h over T tokens, the state S [nv, dk, dv] updated in place
 * (the caller fills it with the initial state or zeros), row by row of S so that each pass is 4 values of dv a vector:
 *   m = Sᵀk;  u = v − a·m;  δ = b·u;  S ← a·S + k δᵀ;  o = Sᵀq
 * with a = exp(g) and b = β given per (t, h) (wasm has no exp), value head h reading key head h / (nv / nk). q, k
 * [T, nk, dk]; v, o, u [T, nv, dv]; a, b [T, nv]; m is scratch for 2·dv floats. dv must be a multiple of 4; sums f32.
 */
const DELTA_RULE = (() => {
  const at = (base: string, off: string) => add(get(base), off);
  /** for (j = 0; j < dv bytes; j += 16) body */
  const overJ = (label: string, body: string[]) => [
    set('j', i32(0)),
    `(block $${label}_done (loop $${label}`,
    `(br_if $${label}_done (i32.ge_u ${get('j')} ${get('dvb')}))`,
    ...body,
    set('j', add(get('j'), i32(16))),
    `(br $${label})))`,
  ];
  /** for (i = 0, row = sh; i < dk; i++, row += dvb) body */
  const overI = (label: string, body: string[]) => [
    set('i', i32(0)),
    set('row', get('sh')),
    `(block $${label}_done (loop $${label}`,
    `(br_if $${label}_done (i32.ge_u ${get('i')} ${get('dk')}))`,
    ...body,
    set('row', add(get('row'), get('dvb'))),
    set('i', add(get('i'), i32(1))),
    `(br $${label})))`,
  ];
  const zero = '(v128.const i32x4 0 0 0 0)';
  const splatAt = (base: string) => `(f32x4.splat (f32.load ${add(get(base), `(i32.shl ${get('i')} ${i32(2)})`)}))`;
  const perToken = [
    set('gate', `(i32.shl ${add(`(i32.mul ${get('t')} ${get('nv')})`, get('h'))} ${i32(2)})`),
    set('av', `(f32x4.splat (f32.load ${at('a', get('gate'))}))`),
    set('bv', `(f32x4.splat (f32.load ${at('b', get('gate'))}))`),
    // key head h / r of token t
    set('kv', add(get('k'), `(i32.shl (i32.mul ${add(`(i32.mul ${get('t')} ${get('nk')})`, `(i32.div_u ${get('h')} ${get('r')})`)} ` +
      `${get('dk')}) ${i32(2)})`)),
    set('qv', add(get('q'), `(i32.sub ${get('kv')} ${get('k')})`)),
    set('vt', `(i32.mul ${add(`(i32.mul ${get('t')} ${get('nv')})`, get('h'))} ${get('dvb')})`),
    // m = Sᵀk
    ...overJ('mz', [`(v128.store ${at('m', get('j'))} ${zero})`]),
    ...overI('m', [
      set('ki', splatAt('kv')),
      ...overJ('mj', [`(v128.store ${at('m', get('j'))} ${fadd(load(at('m', get('j'))), fmul(load(at('row', get('j'))), get('ki')))})`]),
    ]),
    // u = v − a·m, δ = b·u (δ after m in the scratch)
    ...overJ('u', [
      set('x', `(f32x4.sub ${load(add(at('v', get('vt')), get('j')))} ${fmul(get('av'), load(at('m', get('j'))))})`),
      `(v128.store ${add(at('u', get('vt')), get('j'))} ${get('x')})`,
      `(v128.store ${add(at('m', get('dvb')), get('j'))} ${fmul(get('bv'), get('x'))})`,
    ]),
    // S ← a·S + k δᵀ and o = Sᵀq in one pass over the rows
    ...overJ('oz', [`(v128.store ${add(at('o', get('vt')), get('j'))} ${zero})`]),
    ...overI('s', [
      set('ki', splatAt('kv')),
      set('qi', splatAt('qv')),
      ...overJ('sj', [
        set('x', fadd(fmul(get('av'), load(at('row', get('j')))), fmul(get('ki'), load(add(at('m', get('dvb')), get('j')))))),
        `(v128.store ${at('row', get('j'))} ${get('x')})`,
        `(v128.store ${add(at('o', get('vt')), get('j'))} ${fadd(load(add(at('o', get('vt')), get('j'))), fmul(get('x'), get('qi')))})`,
      ]),
    ]),
  ];
  const body = [
    set('dvb', `(i32.shl ${get('dv')} ${i32(2)})`),
    set('r', `(i32.div_u ${get('nv')} ${get('nk')})`),
    set('h', i32(0)),
    '(block $heads_done (loop $heads',
    `(br_if $heads_done (i32.ge_u ${get('h')} ${get('nv')}))`,
    set('sh', add(get('S'), `(i32.mul (i32.mul ${get('h')} ${get('dk')}) ${get('dvb')})`)),
    set('t', i32(0)),
    '(block $tokens_done (loop $tokens',
    `(br_if $tokens_done (i32.ge_u ${get('t')} ${get('T')}))`,
    ...perToken,
    set('t', add(get('t'), i32(1))),
    '(br $tokens)))',
    set('h', add(get('h'), i32(1))),
    '(br $heads)))',
  ];
  const params = ['q', 'k', 'v', 'a', 'b', 'S', 'o', 'u', 'T', 'nk', 'nv', 'dk', 'dv', 'm'].map((n) => `(param $${n} i32)`).join(' ');
  const locals = ['h', 't', 'i', 'j', 'r', 'dvb', 'sh', 'row', 'kv', 'qv', 'vt', 'gate'].map((n) => `(local $${n} i32)`)
    .concat(['av', 'bv', 'ki', 'qi', 'x'].map((n) => `(local $${n} v128)`));
  return `(func (export "delta_rule") ${params}\n  ${locals.join(' ')}\n  ${body.join('\n  ')})`;
})();

/**
 * The module of every kernel but the packed ones: one imported memory, the exports. `shared` imports a shared memory
 * (threads: every worker instantiates the same modules over it); the code is the same, only the import's type
 * differs. A shared memory needs a maximum: 65536 pages, the 4 GiB of wasm32.
 */
export function cpuKernelsWat(shared = false): string {
  const funcs: string[] = [READ_BYTES, STAGE_INTS, ATTN_SCORES, ATTN_MIX, EXP, EXP2, ATTN_ROWS, GLU, RMSNORM, DELTA_RULE];
  for (const dt of WASM_DTYPES) {
    for (const [R, C] of [[4, 2], [4, 1], [1, 2], [1, 1]]) funcs.push(blockFunc(dt, R, C));
    funcs.push(isQuant(dt) ? quantRowFunc(dt) : rowFunc(dt as 'f32' | 'bf16'));
    funcs.push(gemmFunc(dt));
  }
  return moduleWat(shared, funcs);
}

/**
 * The packed kernels' module (`gemm_<dt>_packed`), instantiated over the same memory as cpuKernelsWat's. It stands
 * apart because it comes in two builds: `fma` fuses its multiply-adds (relaxed SIMD, which a module declares by using
 * it: an engine without it refuses the whole module, so the rest of the kernels do not depend on it).
 */
export function packedKernelsWat(shared = false, fma = false): string {
  const funcs: string[] = [];
  for (const dt of PACKED_DTYPES) funcs.push(packFunc(dt), packedGemmFunc(dt));
  funcs.push(packedBlockFunc(2, fma), packedBlockFunc(1, fma));
  return moduleWat(shared, funcs);
}

function moduleWat(shared: boolean, funcs: string[]): string {
  const memory = shared ? '(memory 1 65536 shared)' : '(memory 1)';
  return `(module\n(import "env" "memory" ${memory})\n${funcs.join('\n')}\n)\n`;
}

/**
 * `fma_probe(a, b, c) -> f32`: lane 0 of f32x4.relaxed_madd(a, b, c). Relaxed SIMD lets an engine fuse it or not; at
 * a = 1 + 2⁻¹³, b = a, c = −(1 + 2⁻¹²) the fused result is 2⁻²⁶ and the unfused one 0 (a·b rounds to 1 + 2⁻¹² in f32).
 * The arguments are parameters so that no compiler folds the product.
 */
export const FMA_PROBE_WAT = `(module (func (export "fma_probe") (param $a f32) (param $b f32) (param $c f32) (result f32)
  (f32x4.extract_lane 0 (f32x4.relaxed_madd (f32x4.splat (local.get $a)) (f32x4.splat (local.get $b)) (f32x4.splat (local.get $c))))))
`;
