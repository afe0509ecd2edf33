// The cross-language vectors (tests/contract/vectors.json): canonical JSON, action
// digests, the answers JSON and its digest computed here as the Rust contract crate
// (askgate-contract) computes them, which the server signs and chains.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { ReceiptError, actionDigest, answersDigest, answersJson, canonicalJson } from "@askgate/client/receipts";
import { answersText } from "@askgate/client/tool";

const VECTORS = JSON.parse(readFileSync(new URL("../../../tests/contract/vectors.json", import.meta.url), "utf8"));

test("every kind of vector has cases", () => {
  for (const kind of ["canonical", "action_digest", "answers"]) {
    assert.ok(VECTORS[kind].length >= 3, kind);
  }
});

for (const v of VECTORS.canonical) {
  test(`canonical JSON: ${v.name}`, () => {
    assert.equal(canonicalJson(JSON.parse(v.json)), v.canonical);
  });
}

for (const v of VECTORS.action_digest) {
  test(`action digest: ${v.name}`, () => {
    const action = { name: v.action.name, argumentsJson: v.action.arguments_json };
    if (v.error === undefined) {
      assert.equal(actionDigest(action), v.digest);
    } else {
      const kind = { inexact: "inexact", not_json: "malformed" }[v.error];
      assert.throws(() => actionDigest(action), (e) => e instanceof ReceiptError && e.kind === kind);
    }
  });
}

for (const v of VECTORS.answers) {
  test(`answers JSON: ${v.name}`, () => {
    const isSecret = (id) => v.secret.includes(id);
    assert.equal(answersText(v.answers), v.text);
    assert.equal(canonicalJson(answersJson(v.answers, isSecret)), v.canonical);
    assert.equal(answersDigest(v.answers, isSecret), v.digest);
  });
}
