import { registerParitySuite } from './parity/suite';

// Lavapipe compiles the other cut's quantized GEMVs without subgroups (a tree of barriers over 256 invocations) in
// 40-54 s each on a cold shader cache, as CI has it: here that cut runs one aligned quantized walk (q4_0 K 512, vec4
// loads), one scalar-word walk (q8_0 K 64) and the float ones; Chromium's suite (SwiftShader) runs all nine
registerParitySuite('node dawn', (name) => !/fused GEMV (q4_0 K 64|q8_0 K 512):/.test(name));
