// What the Train view does when the engine is replaced under a run: resume on its own once per checkpoint, and the
// words it shows (test/engine-faults.browser.test.ts drives the view itself).
import { describe, expect, it } from 'vitest';
import { FAULTS } from './engine';
import { noCheckpoint, notResumed, resumedText, resumesOnItsOwn, resumingText, type RunFault } from './train-faults';

const lost: RunFault = {
  fault: FAULTS.deviceLost,
  reason: 'the GPU device was lost (unknown: reset); a new engine worker was started',
  afterStep: 37,
  checkpoint: 30,
  runId: 'run-a',
  stopping: false,
};

describe('train faults', () => {
  it('resumes on its own once per checkpoint, never a run being stopped, reloaded on request, or without an id', () => {
    expect(resumesOnItsOwn(lost, undefined)).toBe(true);
    expect(resumesOnItsOwn({ ...lost, checkpoint: null }, undefined)).toBe(true); // the worker knows better: it may have one
    expect(resumesOnItsOwn(lost, 30)).toBe(false); // the same fault again before a newer checkpoint
    expect(resumesOnItsOwn(lost, 20)).toBe(true);
    expect(resumesOnItsOwn({ ...lost, checkpoint: null }, null)).toBe(false);
    expect(resumesOnItsOwn({ ...lost, stopping: true }, undefined)).toBe(false);
    expect(resumesOnItsOwn({ ...lost, fault: FAULTS.requested }, undefined)).toBe(false);
    expect(resumesOnItsOwn({ ...lost, runId: null }, undefined)).toBe(false);
  });

  it('says what happened and what it offers', () => {
    expect(resumingText(lost)).toBe('The GPU device was lost after step 37; resuming the run from its last checkpoint on a new engine…');
    expect(resumedText(lost, 30)).toBe(
      'The GPU device was lost after step 37; the run resumed from its checkpoint at step 30 on a new engine.',
    );
    const crashed = { ...lost, fault: FAULTS.crashed, afterStep: 2, checkpoint: null };
    expect(noCheckpoint(crashed, 3)).toEqual({
      text:
        "The engine worker crashed after step 2, before the run's first checkpoint (one every 3 steps), so there is nothing to " +
        'resume from.',
      detail: lost.reason,
      offerResume: false,
      offerStartAgain: true,
    });
    expect(noCheckpoint(crashed, 0).text).toContain('(it saves only at the end)');
    expect(noCheckpoint({ ...crashed, afterStep: 0 }, 3).text).toBe(
      "The engine worker crashed before the run's first step, so there is nothing to resume from.",
    );
    expect(notResumed(lost)).toMatchObject({
      text:
        'The GPU device was lost again after step 37, before a checkpoint newer than step 30: not resumed on its own, since the ' +
        'fault may come back at the same point.',
      offerResume: true,
      offerStartAgain: true,
    });
    expect(notResumed({ ...lost, fault: FAULTS.requested }).text).toBe(
      'The engine was reloaded on request after step 37. Its last checkpoint is at step 30.',
    );
    expect(notResumed({ ...lost, stopping: true }).text).toBe(
      'The GPU device was lost after step 37, while the run was stopping. Its last checkpoint is at step 30.',
    );
  });
});
