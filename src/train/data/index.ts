export { loadRows, parseJsonRows, parseJsonlRows, cachePath, ROWS_API, type Row, type RowSource, type LoadRowsOptions } from './rows.ts';
export { roleExample, rowTask, canonicalRole, TRAIN_ROLES } from './roles.ts';
export {
  innerExample,
  stageExample,
  leftTruncate,
  renderChatPair,
  type InnerExample,
  type StageExample,
  type ChatPair,
} from './tokenize.ts';
