// formats/: bytes <-> tensors. The dtype layouts and their encoders, byte sources and safetensors; GGUF and
// torch .pt readers come with the engine and checkpoint issues.
export * from './dtype';
export * from './encode';
export { GGML_TYPE, ggmlTypeName, readGgufHeader, readGgufTensor, ggufToStorage, dequantQ4K, dequantQ6K, type GgufFile, type GgufTensor, type GgufTensorInfo } from './gguf';
export * from './sources';
export * from './safetensors';
export * from './safetensors-sharded';
