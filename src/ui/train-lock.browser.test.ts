// webLock (train-session.ts) over the browser's Web Locks: a second take while the first holds gets null, held() says
// so (as another tab's would), and after the release the lock can be taken again.
import { describe, expect, it } from 'vitest';
import { webLock } from './train-session';

describe('webLock', () => {
  it('is held by one taker at a time and free again once released', async () => {
    const a = webLock('rmas-training-test');
    const b = webLock('rmas-training-test');
    expect(await a.held()).toBe(false);
    const release = await a.take();
    expect(release).toBeTypeOf('function');
    expect(await b.held()).toBe(true);
    expect(await b.take()).toBeNull();
    release!();
    await new Promise((r) => setTimeout(r, 0));
    expect(await b.held()).toBe(false);
    const again = await b.take();
    expect(again).toBeTypeOf('function');
    again!();
    // another name is another lock
    const other = await webLock('rmas-training-other').take();
    expect(other).toBeTypeOf('function');
    other!();
  });
});
