// Bundles the console into OUT (default dist/): app.js (our code + uPlot), app.css and
// index.html. Deterministic for a given package-lock.json, so a test can rebuild into a
// temporary folder and compare byte for byte with the committed dist/.
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, 'dist');
mkdirSync(out, { recursive: true });

// uPlot is MIT-licensed: its notice travels with the bundle (its header comment is not a
// `@license` comment, so esbuild would drop it).
const uplotLicense = readFileSync(join(here, 'node_modules/uplot/LICENSE'), 'utf8').trim();
const banner = `/*! Sluice console. Bundles uPlot (https://github.com/leeoniya/uPlot):\n${uplotLicense}\n*/`;

await esbuild.build({
  absWorkingDir: here,
  entryPoints: ['src/app.js'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  legalComments: 'eof',
  banner: { js: banner, css: banner },
  charset: 'utf8',
  logLevel: 'warning',
  // The CSS imported by app.js is written beside it as app.css.
  outfile: join(out, 'app.js'),
});
copyFileSync(join(here, 'src/index.html'), join(out, 'index.html'));
