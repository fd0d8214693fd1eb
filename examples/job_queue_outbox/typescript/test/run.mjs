#!/usr/bin/env node
// Runs the example's unit tests (test/*.test.ts) with `node --test` under the SDK's fake-host
// hooks (guests/typescript/sdk/testing/register.mjs, esbuild from guests/typescript installed by
// scripts/guest-toolchains.sh): `.ts` loads with its types stripped, `@sluice/guest` and
// `@sluice/guest/testing` resolve to the SDK, its WIT imports to the installed FakeHost.
// Their types are checked by `tsc -p tsconfig.test.json` (scripts/lint-guests.sh).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const SDK = resolve(HERE, "../../../../guests/typescript");
const tests = readdirSync(HERE).filter((f) => f.endsWith(".test.ts")).map((f) => join(HERE, f));
const r = spawnSync(process.execPath, ["--import", join(SDK, "sdk/testing/register.mjs"), "--test", ...tests], {
  stdio: "inherit",
});
process.exitCode = r.status ?? 1;
