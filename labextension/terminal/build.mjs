// Bundles the task terminal page (xterm.js + terminado's protocol) into the Python package, next to the server
// route that serves it: pai_jupyter/server/static/terminal/. Run by `npm run build` (and so by pip install).
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(here, '../../pai_jupyter/server/static/terminal');

await build({
  entryPoints: { terminal: path.join(here, 'main.ts') },
  bundle: true,
  minify: true,
  sourcemap: false,
  format: 'iife',
  target: ['es2020'],
  outdir: out,
  loader: { '.css': 'css' },
  logLevel: 'warning'
});
console.log(`terminal page bundle written to ${out}`);
