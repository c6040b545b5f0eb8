import { registerParitySuite } from './parity/suite';

registerParitySuite('node dawn');
