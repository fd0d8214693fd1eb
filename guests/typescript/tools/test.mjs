#!/usr/bin/env node
// Runs the SDK unit tests: bundles test/*.test.ts with esbuild (the `sluice:actor/*` imports
// resolved to test/fake-host.ts), then runs them and test/*.test.mjs with `node --test`.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const esbuild = await import(join(ROOT, "node_modules/esbuild/lib/main.js"));
const out = mkdtempSync(join(tmpdir(), "sluice-ts-test-"));
const fake = join(ROOT, "test/fake-host.ts");
const tests = readdirSync(join(ROOT, "test")).filter((f) => f.endsWith(".test.ts"));
try {
  await esbuild.build({
    entryPoints: tests.map((f) => join(ROOT, "test", f)),
    bundle: true, format: "esm", platform: "node", target: "node20", outdir: out,
    outExtension: { ".js": ".mjs" }, logLevel: "warning",
    plugins: [{
      name: "fake-host",
      setup(b) {
        b.onResolve({ filter: /^sluice:actor\// }, () => ({ path: fake }));
      },
    }],
  });
  const files = readdirSync(out).filter((f) => f.endsWith(".mjs")).map((f) => join(out, f));
  // Plain-JS tests run as they are.
  files.push(...readdirSync(join(ROOT, "test")).filter((f) => f.endsWith(".test.mjs")).map((f) => join(ROOT, "test", f)));
  const r = spawnSync(process.execPath, ["--test", ...files], {
    stdio: "inherit", env: { ...process.env, SLUICE_TS_ROOT: ROOT },
  });
  process.exitCode = r.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}
