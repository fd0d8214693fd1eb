// The committed .d.ts files (types/generated) are what `jco guest-types` makes from wit/ today,
// for both worlds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function files(dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

test("committed .d.ts match a fresh jco guest-types run", () => {
  const out = mkdtempSync(join(tmpdir(), "sluice-types-"));
  try {
    // Both worlds, as `npm run types` makes them: an actor's `actor-world` and the
    // `batched-actor-world` the build targets (sdk/batch.ts imports its `turns`).
    for (const world of ["actor-world", "batched-actor-world"]) {
      const r = spawnSync(process.execPath, [
        "--import", join(ROOT, "tools/preopen.mjs"), join(ROOT, "node_modules/@bytecodealliance/jco/dist/jco.js"),
        "guest-types", join(ROOT, "../../wit"), "-n", world, "-o", out,
      ], { encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
    }
    const committed = join(ROOT, "types/generated");
    const want = files(committed).map((f) => relative(committed, f)).sort();
    const got = files(out).map((f) => relative(out, f)).sort();
    assert.deepEqual(got, want);
    for (const f of want) {
      assert.equal(readFileSync(join(out, f), "utf8"), readFileSync(join(committed, f), "utf8"), `${f} is stale: npm run types`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
