import { registerParitySuite } from './parity/suite';

registerParitySuite('chromium');
