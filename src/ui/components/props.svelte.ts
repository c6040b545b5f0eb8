/** Reactive props for component tests: mount(C, { props: reactiveProps({...}) }), then assign and flushSync(). */
export function reactiveProps<T extends object>(initial: T): T {
  const p = $state(initial);
  return p;
}
