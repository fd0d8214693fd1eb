#!/usr/bin/env node
// Runs the leader's unit tests: bundles test/*.test.ts with esbuild (from guests/typescript,
// installed by scripts/guest-toolchains.sh), the `sluice:actor/*` imports resolved to
// test/fake-world.ts, then runs them with `node --test`.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const SDK = resolve(HERE, "../../../../guests/typescript");
const esbuild = await import(join(SDK, "node_modules/esbuild/lib/main.js"));
const out = mkdtempSync(join(tmpdir(), "jq-ts-test-"));
const fake = join(HERE, "fake-world.ts");
const tests = readdirSync(HERE).filter((f) => f.endsWith(".test.ts"));
try {
  await esbuild.build({
    entryPoints: tests.map((f) => join(HERE, f)),
    bundle: true, format: "esm", platform: "node", target: "node20", outdir: out,
    outExtension: { ".js": ".mjs" }, logLevel: "warning",
    alias: { "@sluice/guest": join(SDK, "sdk/index.ts") },
    plugins: [{
      name: "fake-world",
      setup(b) {
        b.onResolve({ filter: /^sluice:actor\// }, () => ({ path: fake }));
      },
    }],
  });
  const files = readdirSync(out).filter((f) => f.endsWith(".mjs")).map((f) => join(out, f));
  const r = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
  process.exitCode = r.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}
