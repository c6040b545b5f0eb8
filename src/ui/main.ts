// Entry of the playground (index.html). `?groups=elementwise,sample` opens Environment and runs that self-test.
import { mount } from 'svelte';
import 'katex/dist/katex.min.css';
import App from './App.svelte';

const groups = new URLSearchParams(location.search).get('groups')?.split(',').filter(Boolean) ?? [];
mount(App, { target: document.getElementById('app')!, props: { groups } });
