// CheckpointList: rows from the registry's list, sizes formatted, and each action reports the right id.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import CheckpointList from './CheckpointList.svelte';
import type { CheckpointInfo } from '../services';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
});

const items: CheckpointInfo[] = [
  {
    id: 'a1',
    name: 'planner run',
    kind: 'inner',
    style: 'sequential_light',
    role: 'planner',
    step: 20,
    created: '2026-01-02T00:00:00.000Z',
    bytes: 1536,
    files: ['adapter.safetensors'],
  },
  {
    id: 'b2',
    name: 'outer run',
    kind: 'outer',
    style: 'mixture',
    step: 100,
    created: '2026-01-03T00:00:00.000Z',
    bytes: 5 * 2 ** 20 + 2 ** 19,
    files: ['outer_1s.safetensors'],
  },
  { id: 'c3', name: 'imported', kind: 'inner', created: '2026-01-04T00:00:00.000Z', bytes: 12, files: ['adapter.pt'] },
];

function setup(list = items) {
  const target = document.body.appendChild(document.createElement('div'));
  const cb = { onRename: vi.fn(), onDelete: vi.fn(), onExport: vi.fn(), onUse: vi.fn() };
  app = mount(CheckpointList, { target, props: { items: list, ...cb } });
  const row = (id: string) => target.querySelector<HTMLElement>(`tr[data-id="${id}"]`)!;
  const click = (id: string, action: string) => {
    row(id).querySelector<HTMLButtonElement>(`[data-action="${action}"]`)!.click();
    flushSync();
  };
  return { target, cb, row, click };
}

describe('CheckpointList', () => {
  it('renders one row per checkpoint with kind, style/role, step and formatted size', () => {
    const { target, row } = setup();
    expect(target.querySelectorAll('tbody tr').length).toBe(3);
    const cells = (id: string) => [...row(id).querySelectorAll('td')].slice(0, 5).map((td) => td.textContent!.trim());
    expect(cells('a1')).toEqual(['planner run', 'inner', 'sequential_light / planner', '20', '1.50 KiB']);
    expect(cells('b2')).toEqual(['outer run', 'outer', 'mixture', '100', '5.50 MiB']);
    expect(cells('c3')).toEqual(['imported', 'inner', '—', '—', '12 B']);
  });

  it('says what to do when the list is empty', () => {
    const { target } = setup([]);
    expect(target.querySelector('[data-testid="no-checkpoints"]')!.textContent).toMatch(/Train tab/);
  });

  it('exports and uses by id', () => {
    const { cb, click } = setup();
    click('b2', 'export');
    click('c3', 'use');
    expect(cb.onExport).toHaveBeenCalledExactlyOnceWith('b2');
    expect(cb.onUse).toHaveBeenCalledExactlyOnceWith('c3');
  });

  it('deletes only after the confirm, and keeps on cancel', () => {
    const { cb, click } = setup();
    click('a1', 'delete');
    expect(cb.onDelete).not.toHaveBeenCalled();
    click('a1', 'cancel-delete');
    click('a1', 'delete');
    click('a1', 'confirm-delete');
    expect(cb.onDelete).toHaveBeenCalledExactlyOnceWith('a1');
  });

  it('renames inline: Enter commits the trimmed name, Escape cancels', () => {
    const { cb, click, row } = setup();
    click('b2', 'rename');
    const input = row('b2').querySelector('input')!;
    expect(input.value).toBe('outer run');
    expect(document.activeElement).toBe(input);
    input.value = '  mixture outer, 100 steps ';
    input.dispatchEvent(new Event('input', { bubbles: true }));
    input.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
    flushSync();
    expect(cb.onRename).toHaveBeenCalledExactlyOnceWith('b2', 'mixture outer, 100 steps');
    click('a1', 'rename');
    const other = row('a1').querySelector('input')!;
    other.value = 'nope';
    other.dispatchEvent(new Event('input', { bubbles: true }));
    other.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    flushSync();
    expect(row('a1').querySelector('input')).toBeNull();
    expect(cb.onRename).toHaveBeenCalledTimes(1);
  });
});
