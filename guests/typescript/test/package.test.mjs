// The npm package as a user gets it: `npm pack` holds the ESM source, its types and the WIT
// declarations, and an actor in a fresh folder type-checks against the installed package with
// plain `tsc --noEmit` (no `paths` mapping), resolving `@sluice/guest` through `exports`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8" });
  assert.equal(r.status, 0, `${cmd} ${args.join(" ")}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test("package.json declares ESM exports with types", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  assert.equal(pkg.type, "module");
  assert.equal(pkg.types, "./sdk/index.ts");
  assert.deepEqual(Object.keys(pkg.exports["."]), ["types", "import", "default"]);
});

test("an actor type-checks against the packed package", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-ts-pkg-"));
  try {
    const tgz = run("npm", ["pack", "--silent", "--pack-destination", dir], ROOT).trim().split("\n").pop();
    const pkgDir = join(dir, "node_modules/@sluice/guest");
    mkdirSync(pkgDir, { recursive: true });
    run("tar", ["-xzf", join(dir, tgz), "-C", pkgDir, "--strip-components=1"], dir);
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "my-actor", type: "module", private: true }));
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "es2022", module: "esnext", moduleResolution: "bundler", strict: true, noEmit: true,
        allowImportingTsExtensions: true, lib: ["es2022"], types: [],
      },
      include: ["app.ts"],
    }));
    writeFileSync(join(dir, "app.ts"), `
import { type Envelope, InvalidArgument, host, register } from "@sluice/guest";
export const actor = register({
  handle(env: Envelope): unknown {
    if (env.msgType === "ping") return { at: host.nowMs() };
    throw new InvalidArgument(\`INVALID_ARGUMENT: unknown msg-type \${env.msgType}\`);
  },
});
`);
    run(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", dir], dir);
    // And a type error is caught, so the check above is a real one.
    writeFileSync(join(dir, "app.ts"), `import { host } from "@sluice/guest";\nhost.log("loud" as const, 1);\n`);
    const r = spawnSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", dir], { encoding: "utf8" });
    assert.notEqual(r.status, 0, "tsc accepted a bad call");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
