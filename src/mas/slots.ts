/**
 * Slot strings (docs/method.md §5): placeholders in a role's user prompt where another agent's latents (or, in the
 * text baseline, its text) go. They are matched in the rendered chat text, so they must survive the chat
 * template unchanged, which plain ASCII between double angle brackets does.
 */
export const SLOTS = {
  planner: '<<LATENT_PLANNER_SLOT>>',
  refined: '<<LATENT_REFINED_SLOT>>',
  feedback: '<<LATENT_FEEDBACK_SLOT>>',
  hieMath: '<<HIE_MATH_EXPERT_SLOT>>',
  hieCode: '<<HIE_CODE_EXPERT_SLOT>>',
  hieScience: '<<HIE_SCIENCE_EXPERT_SLOT>>',
  hieFeedback: '<<HIE_FEEDBACK_SLOT>>',
  distillExpert: '<<DISTILL_EXPERT_SLOT>>',
  distillFeedback: '<<DISTILL_FEEDBACK_SLOT>>',
  deliberationReflector: '<<DELIBERATION_REFLECTOR_SLOT>>',
  deliberationFeedback: '<<DELIBERATION_FEEDBACK_SLOT>>',
} as const;

export const ALL_SLOTS: readonly string[] = Object.values(SLOTS);

/** The first slot string `text` holds, or null: a question holding one would be taken for a slot, so it is refused. */
export function slotIn(text: string): string | null {
  let first: { at: number; slot: string } | null = null;
  for (const slot of ALL_SLOTS) {
    const at = text.indexOf(slot);
    if (at >= 0 && (!first || at < first.at)) first = { at, slot };
  }
  return first?.slot ?? null;
}
