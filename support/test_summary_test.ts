import assert from "node:assert/strict";
import { parseJunit, parseSkipLog, summarize } from "./test_summary.ts";

// The shape `deno test --junit-path` writes: steps are test cases of their own, names are escaped.
const JUNIT = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="deno test" tests="5" failures="1" errors="0" time="0.061">
    <testsuite name="./a_test.ts" tests="5" disabled="2" errors="0" failures="1">
        <testcase name="with steps" classname="./a_test.ts" time="0.012" line="1" col="6">
        </testcase>
        <testcase name="q&quot;uo&apos;te &amp; &lt;b&gt;" classname="./a_test.ts" time="0.000" line="5" col="6">
            <skipped/>
        </testcase>
        <testcase name="with steps &gt; two" classname="./a_test.ts" time="0.000" line="3" col="11">
            <skipped/>
        </testcase>
        <testcase name="fails" classname="./a_test.ts" time="0.001" line="4" col="6">
            <failure message="Uncaught Error: boom">Error: boom</failure>
        </testcase>
        <testcase name="empty" classname="./a_test.ts" time="0.001" line="9" col="6"/>
    </testsuite>
</testsuites>`;

Deno.test("parseJunit() reads each test case's name, file and outcome", () => {
  assert.deepEqual(parseJunit(JUNIT), [
    { name: "with steps", file: "./a_test.ts", outcome: "passed" },
    { name: `q"uo'te & <b>`, file: "./a_test.ts", outcome: "skipped" },
    { name: "with steps > two", file: "./a_test.ts", outcome: "skipped" },
    { name: "fails", file: "./a_test.ts", outcome: "failed" },
    { name: "empty", file: "./a_test.ts", outcome: "passed" },
  ]);
});

Deno.test("parseSkipLog() reads one record a line and refuses anything else", () => {
  const log = `${JSON.stringify({ name: "a", reason: "no JDK", bootstrapped: false })}\n\n` +
    `${JSON.stringify({ name: "b", reason: "not on PATH: clang", bootstrapped: true })}\n`;
  assert.deepEqual(parseSkipLog(log), [
    { name: "a", reason: "no JDK", bootstrapped: false },
    { name: "b", reason: "not on PATH: clang", bootstrapped: true },
  ]);
  assert.deepEqual(parseSkipLog(""), []);
  assert.throws(() => parseSkipLog(`{"name":"a"}\n`), /line 1 of the skip log is not a skip record/);
});

Deno.test("summarize() lists the failures, each skip with its reason, and counts one without a reason as failed", () => {
  const summary = summarize(parseJunit(JUNIT), [
    { name: `q"uo'te & <b>`, reason: "no JDK", bootstrapped: false },
    { name: "never ran here", reason: "from another run", bootstrapped: false },
  ]);
  assert.deepEqual(summary.lines, [
    "Failed (1):",
    "  ./a_test.ts: fails",
    "Skipped (1):",
    `  ./a_test.ts: q"uo'te & <b>: no JDK [optional]`,
    "Skipped without a recorded reason, counted as failed (1):",
    "  ./a_test.ts: with steps > two",
  ]);
  assert.deepEqual([summary.passed, summary.failed, summary.skipped], [2, 2, 1]);
});

Deno.test("summarize() pairs tests of the same name with one record each", () => {
  const cases = parseJunit(JUNIT).map((c) => ({ ...c, name: "same" }));
  const summary = summarize(cases, [
    { name: "same", reason: "first", bootstrapped: true },
    { name: "same", reason: "second", bootstrapped: false },
  ]);
  assert.deepEqual(summary.lines, [
    "Failed (1):",
    "  ./a_test.ts: same",
    "Skipped (2):",
    "  ./a_test.ts: same: first [bootstrap installs it; CI=true fails instead]",
    "  ./a_test.ts: same: second [optional]",
  ]);
});
