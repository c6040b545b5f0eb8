/**
 * The latent rollout against PyTorch (scripts/golden/tiny_mas.py, torch 1.13 float64): six links saved by
 * torch.save as bf16 `.pt`, and five stages of a tiny sequential system (planner qwen3-tiny 48, critic
 * llama-tiny 64, solver qwen2-tiny 32), each rolled out upstream's way (a full forward per step, no cache).
 * Ours reads the same .pt files with the safe reader and rolls out on a KV cache; each stage gets the
 * golden latents_in, so an error in one stage cannot hide in another. Shared by the Node CPU and GPU tests.
 */
import { readFileSync } from 'node:fs';
import { noGrad } from '../../src/autograd';
import { InnerLink, OuterLink } from '../../src/mas/links';
import { embedPieces, latentRollout, linkMessage, type Piece } from '../../src/mas/rollout';
import { tidy } from '../../src/tensor/scope';
import { readLinkFile } from '../../src/mas/upstream';
import { Decoder, generate, loadDecoderFromDir } from '../../src/model';
import type { KvDType } from '../../src/model/cache';
import { scaledError } from '../../src/testing/model';
import type { Backend } from '../../src/tensor/backend';
import { CpuBackend } from '../../src/tensor/cpu';
import type { Tensor } from '../../src/tensor/tensor';
import { f64 } from '../golden/check';

interface GoldenLink { file: string; kind: 'inner' | 'outer'; d_in: number; d_out: number; x: string; y: string }
interface GoldenStage {
  model: string; inner?: string; segments: number[][]; latents_in_from?: string; latents_in?: string;
  shapes: Record<string, number[]>; hidden?: string; latents_out?: Record<string, string>;
  generated_ids?: number[]; top2_gap?: number[]; logits0?: string;
}
export const golden = JSON.parse(readFileSync('test/golden/tiny-mas/rollout.json', 'utf8')) as {
  m: number; links: Record<string, GoldenLink>; stages: Record<string, GoldenStage>;
};

/** Values at the backend's precision (read() would round an f64 CPU tensor to f32). */
async function values(t: Tensor): Promise<ArrayLike<number>> {
  return t.backend instanceof CpuBackend ? Float64Array.from(t.backend.data(t)) : t.read();
}

export interface StageErrors { hidden?: number; latentsOut: Record<string, number>; logits0?: number; generatedIds?: number[] }

export class GoldenSystem {
  private constructor(
    readonly backend: Backend,
    readonly models: Map<string, Decoder>,
    readonly inner: Map<string, InnerLink>,
    readonly outer: Map<string, OuterLink>,
  ) {}

  /** The system on `backend`, its decoders keeping k and v in `kvDtype` (default: the backend's, as the runner does). */
  static async load(backend: Backend, kvDtype?: KvDType): Promise<GoldenSystem> {
    const models = new Map<string, Decoder>();
    for (const name of ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny']) {
      const m = await loadDecoderFromDir(`models/tiny/${name}`, backend);
      if (kvDtype) m.kvDtype = kvDtype;
      models.set(name, m);
    }
    const inner = new Map<string, InnerLink>();
    const outer = new Map<string, OuterLink>();
    for (const [name, l] of Object.entries(golden.links)) {
      const state = await readLinkFile(l.file);
      if (l.kind === 'inner') inner.set(name, InnerLink.fromStateDict(backend, state, { name, d: l.d_in }));
      else outer.set(name, OuterLink.fromStateDict(backend, state, { name, dIn: l.d_in, dOut: l.d_out }));
    }
    return new GoldenSystem(backend, models, inner, outer);
  }

  /** scaledError of each link on its own (x → y). */
  async linkErrors(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const [name, l] of Object.entries(golden.links)) {
      const link = l.kind === 'inner' ? this.inner.get(name)! : this.outer.get(name)!;
      const x = this.backend.fromValues(f64(l.x), [3, l.d_in]);
      const y = noGrad(() => link.forward(x));
      out[name] = scaledError(await values(y), f64(l.y));
      x.dispose();
      y.dispose();
    }
    return out;
  }

  private pieces(s: GoldenStage): Piece[] {
    if (!s.latents_in) return [s.segments[0]];
    const L = this.backend.fromValues(f64(s.latents_in), s.shapes.latents_in);
    return [s.segments[0], L, s.segments[1]];
  }

  async stageErrors(name: string): Promise<StageErrors> {
    const s = golden.stages[name];
    const model = this.models.get(s.model)!;
    const pieces = this.pieces(s);
    const errors: StageErrors = { latentsOut: {} };
    try {
      if (s.generated_ids) {
        const embeds = embedPieces(model, pieces);
        const r = await generate(model, { inputsEmbeds: embeds, maxNewTokens: s.generated_ids.length, sampling: { greedy: true } });
        errors.generatedIds = r.tokens;
        // the first step's logits: the same pieces prefilled into a fresh cache
        const T = embeds.reduce((n, e) => n + e.shape[0], 0);
        const cache = model.newCache(T);
        const logits = noGrad(() => tidy(() => {
          let out;
          for (const e of embeds) out = model.forward({ inputsEmbeds: e, cache, logits: e === embeds[embeds.length - 1] ? 'last' : false });
          return out!.logits!;
        }));
        errors.logits0 = scaledError(await values(logits), f64(s.logits0!));
        logits.dispose();
        cache.dispose();
        for (const e of embeds) if (!pieces.includes(e)) e.dispose();
        return errors;
      }
      const inner = this.inner.get(s.inner!)!;
      const H = await latentRollout(model, inner, pieces, golden.m);
      errors.hidden = scaledError(await values(H), f64(s.hidden!));
      for (const [key, want] of Object.entries(s.latents_out!)) {
        const L = linkMessage(inner, this.outer.get(key)!, H);
        errors.latentsOut[key] = scaledError(await values(L), f64(want));
        L.dispose();
      }
      H.dispose();
      return errors;
    } finally {
      for (const p of pieces) if (!Array.isArray(p)) (p as { dispose(): void }).dispose();
    }
  }

  dispose() {
    for (const m of this.models.values()) m.dispose();
    for (const l of [...this.inner.values(), ...this.outer.values()]) l.dispose();
  }
}
