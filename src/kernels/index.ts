/**
 * kernels/: one folder per op, each with its CPU reference (cpu.ts), WGSL builders (wgsl.ts), kernel
 * definitions for both backends (index.ts), tests, GPU-vs-CPU parity cases and benchmarks.
 * Models and training use them through the differentiable functions of autograd/ops (`F.*`).
 *
 *   elementwise  add / sub / mul with row broadcast, alpha·x + beta, column sums
 *   matmul       C = op(A)·op(B) + bias; weights f32/f16/bf16/q8_0/q4_0; tiled and GEMV paths; split weights
 *   embedding    row gather by i32 ids from any-dtype tables; deterministic scatter-add backward
 *   cast         f32 <-> f16/bf16 storage, dequantization of q8_0/q4_0
 *   rmsnorm      RMSNorm (and Gemma's 1 + w); layernorm: PyTorch LayerNorm with affine
 *   activation   SiLU, exact-erf GELU, tanh GELU, SwiGLU
 *   rope         rotary embedding, half-split layout, rope_theta, Llama-3 frequency scaling
 *   attention    causal GQA attention (prefill, chunked prefill, decode on a KV cache, sliding window),
 *                flash-attention backward, kvAppend
 *   softmax      softmax and log-softmax over the last dim
 *   loss         cross-entropy (ignore −100), masked cosine distance, masked MSE
 *   reduce       sum / mean / sum of squares (all or last dim), global gradient-norm clipping
 *   adamw        AdamW over flat parameter buffers, with a weight-decay mask
 *   sample       temperature / top-k / top-p / argmax token selection, seeded
 *   deltarule    gated delta rule (Qwen3.5's Gated DeltaNet core): forward with a carried state, column/row/gate backward
 *   conv1d       the DeltaNet's causal depthwise convolution, continued from a cached state
 *   cols         sliceCols / splitCols / concatCols along the last dim (fused q | k | v and query | gate splits)
 *   rows         sliceRows / concatRows / placeRows along dim 0 (prompt pieces around latents)
 *   topk         the k largest of each row with their indices (the logit lens)
 *   fused        the one-token inference path: GEMV with folded norms and epilogues, RoPE + KV append, decode
 *                attention over stacked caches, a whole DeltaNet token, norm-add (model/fused.ts uses them)
 *
 * Shared by the folders: kernel.ts (the KernelDef contract), wgsl.ts (WGSL snippets, the subgroup reductions),
 * segments.ts (walking tensors split across bindings), cases.ts (the one list of parity cases), workbench/ (closeness,
 * the parity and benchmark harness that the tests, the benchmarks and the page's self-test run the cases through).
 */
export type { KernelDef, GpuRef, GpuChunk, Meta, CpuArray, FloatArray } from './kernel';
