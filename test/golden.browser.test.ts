/**
 * The golden decoder layer and inner RecursiveLink (see golden.test.ts) on WebGPU in Chromium
 * (SwiftShader here): the same F.* composition from test/golden/check.ts, against torch float64.
 */
import { webgpuGoldenSuite } from './golden/suite';

webgpuGoldenSuite('chromium');
