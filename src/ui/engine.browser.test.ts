// The engine handle's restarts, over a fake worker (comlink on a MessageChannel): a lost device, reported by the worker's
// notice or only by a call rejecting with DeviceLost, and a crash replace the worker once; calls in flight reject with
// EngineRestarted carrying the fault; a late word from a replaced worker changes nothing.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { expose } from 'comlink';
import { EngineRestarted } from '../errors';
import { FAULTS, faultOf, startEngine, type Engine } from './engine';

class FakeWorker extends EventTarget {
  static made: FakeWorker[] = [];
  terminated = false;
  private readonly port: MessagePort;

  constructor() {
    super();
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    port1.onmessage = (e) => this.dispatchEvent(new MessageEvent('message', { data: e.data }));
    expose(
      {
        ping: async () => 'pong',
        hang: () => new Promise(() => {}),
        lose: async () => {
          throw Object.assign(new Error('the GPU device was lost (unknown: driver reset). Everything on it is gone: …'), {
            name: 'DeviceLost',
          });
        },
      },
      port2,
    );
    FakeWorker.made.push(this);
  }

  postMessage(data: unknown, transfer: Transferable[] = []) {
    if (!this.terminated) this.port.postMessage(data, transfer);
  }

  terminate() {
    this.terminated = true;
    this.port.close();
  }

  /** What engine.worker.ts posts when its GPU device is lost. */
  noticeLoss(detail: string) {
    this.dispatchEvent(new MessageEvent('message', { data: { type: 'rmas:device-lost', detail } }));
  }

  crash(message: string) {
    this.dispatchEvent(new ErrorEvent('error', { message }));
  }
}

type Fake = { ping(): Promise<string>; hang(): Promise<never>; lose(): Promise<never> };

let engine: Engine | null = null;
const restarts: [string, string][] = [];
function start(): Fake {
  FakeWorker.made = [];
  restarts.length = 0;
  vi.stubGlobal('Worker', FakeWorker);
  engine = startEngine({ pingIntervalMs: 0, onRestart: (reason, fault) => void restarts.push([reason, fault]) });
  return engine.api as unknown as Fake;
}
afterEach(() => {
  engine?.stop();
  engine = null;
  vi.unstubAllGlobals();
});

const rejection = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e);

describe('engine restarts', () => {
  it("a device-lost notice replaces the worker: calls in flight reject with EngineRestarted naming the fault", async () => {
    const api = start();
    await expect(api.ping()).resolves.toBe('pong');
    const inFlight = rejection(api.hang());
    FakeWorker.made[0]!.noticeLoss('destroyed: Device was destroyed.');
    const err = await inFlight;
    const reason = 'the GPU device was lost (destroyed: Device was destroyed.); a new engine worker was started';
    expect(err).toBeInstanceOf(EngineRestarted);
    expect((err as Error).message).toBe(reason);
    expect(faultOf(err)).toBe(FAULTS.deviceLost);
    expect(restarts).toEqual([[reason, FAULTS.deviceLost]]);
    expect(FakeWorker.made.map((w) => w.terminated)).toEqual([true, false]);
    // the new worker answers; a late notice or crash of the old one changes nothing
    FakeWorker.made[0]!.noticeLoss('destroyed: again');
    FakeWorker.made[0]!.crash('late');
    await expect(api.ping()).resolves.toBe('pong');
    expect(restarts.length).toBe(1);
    expect(FakeWorker.made.length).toBe(2);
  });

  it('a call rejecting with DeviceLost before any notice replaces the worker once, as the notice would', async () => {
    const api = start();
    const inFlight = rejection(api.hang());
    const lost = await rejection(api.lose());
    const reason = 'the GPU device was lost (unknown: driver reset); a new engine worker was started';
    expect(lost).toBeInstanceOf(EngineRestarted);
    expect(await inFlight).toBe(lost); // every call on the old worker gets the same error
    expect(faultOf(lost)).toBe(FAULTS.deviceLost);
    expect(restarts).toEqual([[reason, FAULTS.deviceLost]]);
    FakeWorker.made[0]!.noticeLoss('unknown: driver reset'); // the old worker's notice, late
    expect(restarts.length).toBe(1);
    await expect(api.ping()).resolves.toBe('pong');
  });

  it('a crash replaces the worker; a reload on request names itself; other errors have no fault', async () => {
    const api = start();
    const inFlight = rejection(api.hang());
    FakeWorker.made[0]!.crash('Uncaught Error: boom');
    const err = await inFlight;
    expect((err as Error).message).toBe('the engine worker crashed (Uncaught Error: boom); a new one was started');
    expect(faultOf(err)).toBe(FAULTS.crashed);
    const again = rejection(api.hang());
    engine!.restart(FAULTS.requested);
    expect(faultOf(await again)).toBe(FAULTS.requested);
    expect(restarts.map(([, f]) => f)).toEqual([FAULTS.crashed, FAULTS.requested]);
    expect(faultOf(new Error('x'))).toBeNull();
    expect(faultOf(null)).toBeNull();
  });
});
