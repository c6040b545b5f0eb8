import { InvalidArgument } from '../../errors';
import {
  gatedDeltaRuleBwdColsKernel, gatedDeltaRuleBwdGatesKernel, gatedDeltaRuleBwdRowsKernel, gatedDeltaRuleKernel,
} from '../../kernels/deltarule';
import type { Tensor } from '../../tensor/tensor';
import { runOp } from './op';
import { sumLastDim } from './reduce';

/**
 * The gated delta rule (kernels/deltarule): q, k [T, nk, dk] (already L2-normalised; q already scaled), v [T, nv, dv],
 * g [T, nv] (log decay, ≤ 0), beta [T, nv]; state [nv, dk, dv] the state before the first position (default zeros).
 * Returns o [T, nv, dv] and the final state. Gradients reach q, k, v, g and beta; `state` is frozen, and the returned
 * final state carries no gradient (it has requiresGrad false, so it can be passed on as the next call's state).
 */
export function gatedDeltaRule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state?: Tensor): { o: Tensor; state: Tensor } {
  if (state?.requiresGrad) {
    throw new InvalidArgument(
      'gatedDeltaRule: the initial state is frozen here (gradients reach q, k, v, g and beta); set requiresGrad = false on it',
    );
  }
  let recorded = false;
  const [o, final, u] = runOp(gatedDeltaRuleKernel, state ? [q, k, v, g, beta, state] : [q, k, v, g, beta], undefined, ([, , u]) => {
    recorded = true;
    return {
      backward: ([dout], needs): (Tensor | null)[] => {
        if (!dout) return [null, null, null, null, null, ...(state ? [null] : [])];
        const [dv, bpart] = runOp(gatedDeltaRuleBwdColsKernel, [q, k, g, beta, u, dout], undefined);
        const [dqp, dkp] = runOp(gatedDeltaRuleBwdRowsKernel, [q, k, g, beta, u, dv, dout, ...(state ? [state] : [])], undefined);
        const [dg, db] = runOp(gatedDeltaRuleBwdGatesKernel, [q, v, dv, bpart, dqp], undefined);
        bpart.dispose();
        // [T, nk, dk, r] -> [T, nk, dk]: value heads sharing a key head add up (a reshape when r = 1)
        const heads = (p: Tensor) => {
          const s = p.shape[3] === 1 ? p.reshape(q.shape) : sumLastDim(p);
          p.dispose();
          return s;
        };
        const dq = heads(dqp);
        const dk = heads(dkp);
        const out: Tensor[] = [dq, dk, dv, dg, db];
        out.forEach((t, i) => !needs[i] && t.dispose());
        return [...out.map((t, i) => (needs[i] ? t : null)), ...(state ? [null] : [])];
      },
    };
  });
  // the tape owns u (an output of the recorded op) and frees it with the tape; without a recording nobody needs it
  if (!recorded) u.dispose();
  final.requiresGrad = false;
  return { o, state: final };
}
