#!/usr/bin/env node
// Build one TypeScript/JavaScript actor folder into a Sluice component:
//   type-check (tsc) -> bundle (esbuild) -> componentize (jco, componentize-js or QuickJS).
//
// usage: node tools/build.mjs ACTOR_DIR -o OUT.wasm [--backend qjs|starlingmonkey] [--no-check]
// QuickJS (qjs) is the default engine; StarlingMonkey brings more web APIs, ~12 MB and slower calls.
// The actor's entry is ACTOR_DIR/app.ts (or app.js); it must `export const actor = register(...)`.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const SDK_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WIT_DIR = resolve(SDK_ROOT, "../../wit");
const bin = (p) => join(SDK_ROOT, "node_modules", p);

function parseArgs(argv) {
  const o = { dir: null, out: null, backend: "qjs", check: true, wit: WIT_DIR };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-o" || a === "--out") o.out = argv[++i];
    else if (a === "--backend") o.backend = argv[++i];
    else if (a === "--wit") o.wit = argv[++i];
    else if (a === "--no-check") o.check = false;
    else if (!o.dir) o.dir = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!o.dir) throw new Error("usage: build.mjs ACTOR_DIR -o OUT.wasm [--backend qjs|starlingmonkey]");
  o.dir = resolve(o.dir);
  o.out = resolve(o.out ?? join(o.dir, "actor.wasm"));
  o.wit = resolve(o.wit);
  if (!["starlingmonkey", "sm", "quickjs", "qjs"].includes(o.backend)) {
    throw new Error(`unknown backend ${o.backend}`);
  }
  return o;
}

async function step(name, f) {
  const t0 = Date.now();
  console.error(`[sluice-ts] ${name} ...`);
  const r = await f();
  console.error(`[sluice-ts] ${name} done in ${Date.now() - t0} ms`);
  return r;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"], ...opts });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited with ${r.status}`);
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const entry = ["app.ts", "app.js", "index.ts", "index.js"].map((f) => join(o.dir, f)).find(existsSync);
  if (!entry) throw new Error(`no app.ts/app.js in ${o.dir}`);
  mkdirSync(dirname(o.out), { recursive: true });
  const work = mkdtempSync(join(tmpdir(), "sluice-ts-"));
  try {
    await buildIn(o, entry, work);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.error(`[sluice-ts] wrote ${o.out}`);
}

async function buildIn(o, entry, work) {

  if (o.check && entry.endsWith(".ts")) {
    await step("type-check (tsc)", () => {
      const tsconfig = join(work, "tsconfig.json");
      writeFileSync(tsconfig, JSON.stringify({
        extends: join(SDK_ROOT, "tsconfig.base.json"),
        compilerOptions: { paths: { "@sluice/guest": [join(SDK_ROOT, "sdk/index.ts")] } },
        files: [entry, join(SDK_ROOT, "types/generated/actor-world.d.ts")],
      }, null, 2));
      run(process.execPath, [bin("typescript/bin/tsc"), "-p", tsconfig]);
    });
  }

  // The component's entry: the actor's module, plus the `batch` export of batched turns made
  // from its `actor` (sdk/batch.ts), so queued messages cross into the guest in one call.
  const main = join(work, "main.js");
  writeFileSync(main, [
    `export * from ${JSON.stringify(entry)};`,
    `import { actor as __sluiceActor } from ${JSON.stringify(entry)};`,
    `import { batchOf as __sluiceBatchOf } from ${JSON.stringify(join(SDK_ROOT, "sdk/batch.ts"))};`,
    `export const batch = __sluiceBatchOf(__sluiceActor);`,
    "",
  ].join("\n"));

  const bundle = join(work, "bundle.js");
  await step("bundle (esbuild)", async () => {
    const esbuild = await import(bin("esbuild/lib/main.js"));
    await esbuild.build({
      entryPoints: [main],
      bundle: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      outfile: bundle,
      external: ["sluice:actor/*", "wasi:*"],
      alias: { "@sluice/guest": join(SDK_ROOT, "sdk/index.ts") },
      // u64 is a number under QuickJS, a bigint under StarlingMonkey (see sdk/u64.ts).
      define: { __SLUICE_U64_AS_NUMBER__: String(o.backend === "qjs" || o.backend === "quickjs") },
      logLevel: "warning",
    });
  });

  await step(`componentize (jco, ${o.backend})`, () => {
    const args = [
      "--import", join(SDK_ROOT, "tools/preopen.mjs"),
      bin("@bytecodealliance/jco/dist/jco.js"), "componentize", bundle,
      "-w", o.wit, "-n", "batched-actor-world", "-o", o.out,
    ];
    if (o.backend === "qjs" || o.backend === "quickjs") {
      args.push("--backend", "qjs", "--backend-qjs-disable-async");
    } else {
      args.push("--disable", "http", "fetch-event");
    }
    run(process.execPath, args);
  });
}

main().catch((e) => {
  console.error(`[sluice-ts] error: ${e.message}`);
  process.exit(1);
});
