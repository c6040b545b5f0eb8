// formats/: bytes <-> tensors: dtype layouts and encoders, byte sources, safetensors (read/write, sharded),
// GGUF (read) and torch .pt state dicts (safe read, write).
export * from './dtype';
export * from './encode';
export {
  GGML_TYPE,
  ggmlTypeName,
  readGgufHeader,
  readGgufTensor,
  ggufToStorage,
  dequantQ4K,
  dequantQ6K,
  type GgufFile,
  type GgufTensor,
  type GgufTensorInfo,
} from './gguf';
export * from './sources';
export * from './safetensors';
export * from './safetensors-sharded';
export { readTorchStateDict, writeTorchStateDict, type PtTensor } from './torch';
