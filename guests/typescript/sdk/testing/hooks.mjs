// Node module hooks for unit tests of actors, registered by register.mjs:
// - every `sluice:actor/*` import (the SDK's WIT imports) resolves to ./imports.ts, which
//   forwards to the installed FakeHost;
// - `@sluice/guest` and `@sluice/guest/testing` resolve to this SDK, installed or not (one
//   module instance each, so the fake a test installs is the one the SDK calls);
// - `.ts` files load through esbuild's transform (types stripped; no type check: `tsc --noEmit`
//   is the type check).
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const IMPORTS = new URL("./imports.ts", import.meta.url).href;
const PACKAGE = new Map([
  ["@sluice/guest", new URL("../index.ts", import.meta.url).href],
  ["@sluice/guest/testing", new URL("./index.ts", import.meta.url).href],
]);
// esbuild: the one `sluice build` bundles with (this SDK's dependency).
const esbuild = createRequire(import.meta.url)("esbuild");

export async function resolve(specifier, context, next) {
  if (specifier.startsWith("sluice:actor/")) return { url: IMPORTS, shortCircuit: true };
  const pkg = PACKAGE.get(specifier);
  if (pkg !== undefined) return { url: pkg, shortCircuit: true };
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url.startsWith("file:") && url.endsWith(".ts") && !url.endsWith(".d.ts")) {
    const path = fileURLToPath(url);
    const { code } = esbuild.transformSync(await readFile(path, "utf8"), {
      loader: "ts", format: "esm", target: "node20", sourcemap: "inline", sourcefile: path,
    });
    return { format: "module", source: code, shortCircuit: true };
  }
  return next(url, context);
}
