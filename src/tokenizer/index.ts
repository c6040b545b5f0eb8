export {
  Tokenizer,
  loadTokenizer,
  parseJsonFile,
  type ApplyChatTemplateOptions,
  type ChatMessage,
  type JsonInput,
  type LoadTokenizerOptions,
} from './tokenizer.ts';
export { loadTokenizerFromDir } from './dir.ts';
export { renderChat, renderWithSlots, splitAtSlots, type RenderedPrompt } from './slots.ts';
export { loadTokenizerFromUrl } from './url.ts';
