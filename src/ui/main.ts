// Entry of the start page (index.html). `?groups=elementwise,sample` limits the self-test.
import { mount } from 'svelte';
import App from './App.svelte';

const groups = new URLSearchParams(location.search).get('groups')?.split(',').filter(Boolean) ?? [];
mount(App, { target: document.getElementById('app')!, props: { groups } });
