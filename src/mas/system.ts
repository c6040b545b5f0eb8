/**
 * A loaded RecursiveMAS system: its agents (frozen decoder, tokenizer, inner link, generation defaults) and the outer
 * links between them. Two loaders build one: from folders on disk (system-folders.ts, Node: the runner) and from URLs
 * (system-urls.ts, no node:fs: the engine worker).
 */
import type { Decoder, GenerationDefaults } from '../model';
import type { Backend } from '../tensor/backend';
import type { Tokenizer } from '../tokenizer';
import type { InnerLink, OuterLink } from './links';
import type { PromptSet } from './prompts';
import type { StyleSpec } from './styles';

export interface Agent {
  role: string;
  /** The repo id or folder it was loaded from (for the dump manifest and messages). */
  source: string;
  dir: string;
  decoder: Decoder;
  tokenizer: Tokenizer;
  /** Null in text mode (links are not loaded). */
  inner: InnerLink | null;
  generation: GenerationDefaults;
}

export interface MasSystem {
  style: StyleSpec;
  agents: ReadonlyMap<string, Agent>;
  /** Each on its sender's backend (an agent's backend is its decoder's: decoder.backend). */
  outer: ReadonlyMap<string, OuterLink>;
  /** The backend of the roles that LoadSystemOptions.placement does not place elsewhere. */
  backend: Backend;
  /** The adapter task the links were resolved for (null: one adapter per role). */
  adapterTask: 'math' | 'code' | null;
  /** The style's own prompt set (embedded styles): ask() uses it when the caller gives none. */
  prompts?: PromptSet;
  dispose(): void;
}

/**
 * The KV-cache dtypes the agents use: "f32", or per dtype its roles ("f16 (planner), f32 (critic)") when a placement
 * mixes backends. What the runner prints and the page shows beside an answer (f16 and f32 caches can answer differently).
 */
export function kvDtypes(system: MasSystem): string {
  const used = new Map<string, string[]>();
  for (const [role, agent] of system.agents) used.set(agent.decoder.kvDtype, [...(used.get(agent.decoder.kvDtype) ?? []), role]);
  return used.size === 1 ? [...used.keys()][0]! : [...used].map(([d, roles]) => `${d} (${roles.join(', ')})`).join(', ');
}
