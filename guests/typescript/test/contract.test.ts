// The TypeScript side of the error contract: the SDK's codes, prefixes and error classes match
// wit/errors.json row for row, and a plain throw becomes its "uncoded" form.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CODES, SluiceError, fromWit, prefix, uncoded } from "../sdk/index.ts";

// tools/test.mjs runs the bundled tests from a temporary folder and says where the SDK is.
const root = process.env.SLUICE_TS_ROOT;
if (!root) throw new Error("SLUICE_TS_ROOT is unset: run the tests with npm test");
const contract = JSON.parse(readFileSync(join(root, "../../wit/errors.json"), "utf8"));

test("the error table matches wit/errors.json", () => {
  const want = contract.codes.map((r: any) => [r.code, r.name, r.type]);
  const got = CODES.map((code) => {
    const e = fromWit({ code, message: "x", skipped: false });
    assert.ok(e instanceof SluiceError);
    assert.equal(e.code, code);
    return [code, prefix(code), e.type];
  });
  assert.deepEqual(got, want);
});

test("messages take the canonical form; a plain throw is INTERNAL with its message", () => {
  for (const code of CODES) {
    const m = contract.message_form.replace("{name}", prefix(code)).replace("{detail}", "d");
    assert.equal(m, `${prefix(code)}: d`);
  }
  const e = uncoded(new Error("boom"));
  assert.equal(e.code, contract.uncoded.code);
  assert.equal(e.message, contract.uncoded.message.replace("{message}", "boom"));
});
