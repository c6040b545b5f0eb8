// formats/: bytes <-> tensors. For now the dtype layouts and their encoders; safetensors, GGUF and
// torch .pt readers come with the engine and checkpoint issues.
export * from './dtype';
export * from './encode';
