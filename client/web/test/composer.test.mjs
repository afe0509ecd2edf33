// The answering rules the console's composer shares with the terminal overlay
// (tests/composer/vectors.json, which cargo test runs against the overlay too), each
// human intent performed with the composer's own controls. The composer is TypeScript:
// esbuild bundles it for this test, as it does for the page.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

import { build } from "esbuild";

const HERE = fileURLToPath(new URL(".", import.meta.url));
const VECTORS = JSON.parse(
  readFileSync(new URL("../../../tests/composer/vectors.json", import.meta.url), "utf8"),
);

/** The composer module (and what builds a batch), bundled from the sources. */
async function load() {
  const bundled = await build({
    stdin: {
      contents: [
        'export { Composer } from "../src/composer.ts";',
        'export { create } from "@bufbuild/protobuf";',
        'export { RequestedSchema } from "@askgate/client/proto";',
      ].join("\n"),
      resolveDir: HERE,
      loader: "ts",
    },
    bundle: true,
    // The SDK's sources, as the console's own build takes them.
    conditions: ["source"],
    format: "esm",
    platform: "node",
    write: false,
    logLevel: "warning",
  });
  const code = bundled.outputFiles[0].text;
  return import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
}

const { Composer, create, RequestedSchema } = await load();

function batch(questions) {
  return create(RequestedSchema, {
    rpcId: "r",
    sessionId: "s",
    questions: questions.map((q) => ({
      id: q.id,
      question: q.question,
      options: (q.options ?? []).map((label) => ({ label })),
      multiSelect: q.multi_select ?? false,
    })),
  });
}

function step(composer, s) {
  const multi = composer.question.multiSelect;
  if (s.answer !== undefined) {
    if (multi) {
      for (const label of s.answer) composer.toggle(label);
      if (s.other !== undefined) composer.type(s.other);
      composer.confirm();
    } else {
      composer.choose(s.answer[0]);
    }
  } else if (s.other !== undefined) {
    composer.type(s.other);
    composer.confirm();
  } else if (s.toggle !== undefined) {
    composer.toggle(s.toggle);
  } else if (s.confirm === true) {
    composer.confirm();
  } else if (s.skip === true) {
    composer.skip();
  } else if (s.go !== undefined) {
    composer.goTo(s.go);
  } else {
    assert.fail(`a step this composer does not know: ${JSON.stringify(s)}`);
  }
}

function answersOf(composer) {
  return composer.answers().map((a) =>
    a.custom === undefined ? { id: a.id, selected: [...a.selected] } : { id: a.id, selected: [...a.selected], custom: a.custom },
  );
}

for (const vector of VECTORS.vectors) {
  test(`${vector.name}: ${vector.about}`, () => {
    const composer = new Composer(batch(vector.questions));
    for (const s of vector.steps) step(composer, s);
    for (const [key, expected] of Object.entries(vector.expect)) {
      switch (key) {
        case "phase":
          assert.equal(composer.phase.kind === "review" ? "review" : "question", expected, "phase");
          break;
        case "item":
          assert.equal(composer.item, expected, "item");
          break;
        case "statuses":
          assert.deepEqual(
            composer.drafts.map((d) => d.status),
            expected,
            "statuses",
          );
          break;
        case "answers":
          assert.deepEqual(answersOf(composer), expected, "answers");
          break;
        default:
          assert.fail(`an expectation this composer does not know: ${key}`);
      }
    }
  });
}

test("the question that approves the batch's action takes its options only", () => {
  const approving = create(RequestedSchema, {
    rpcId: "r",
    sessionId: "s",
    questions: [
      { id: "go", question: "Deploy?", options: [{ label: "Approve" }, { label: "Reject" }] },
      { id: "why", question: "Why?", options: [{ label: "ops" }] },
    ],
    action: { name: "deploy", argumentsJson: "{}", approvingAnswers: [{ id: "go", selected: ["Approve"] }] },
  });
  const composer = new Composer(approving);
  assert.equal(composer.approving, true);
  composer.skip();
  assert.equal(composer.item, 0, "not skipped");
  assert.match(composer.hint, /approves the action/);
  composer.type("my own words");
  assert.equal(composer.draft.custom, "", "no own words");
  composer.choose("Approve");
  assert.equal(composer.item, 1);
  assert.equal(composer.approving, false);
  composer.skip();
  assert.equal(composer.phase.kind, "review");
});
