#!/usr/bin/env node
// Runs the SDK unit tests (test/*.test.ts and test/*.test.mjs) with `node --test`, under the
// hooks of the SDK's fake host (sdk/testing/register.mjs): the same way an actor's own unit
// tests run.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tests = readdirSync(join(ROOT, "test"))
  .filter((f) => f.endsWith(".test.ts") || f.endsWith(".test.mjs"))
  .map((f) => join(ROOT, "test", f));
const r = spawnSync(process.execPath, ["--import", join(ROOT, "sdk/testing/register.mjs"), "--test", ...tests], {
  stdio: "inherit", env: { ...process.env, SLUICE_TS_ROOT: ROOT },
});
process.exitCode = r.status ?? 1;
