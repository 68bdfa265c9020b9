/**
 * What `.ci/run` says of a `deno test` run: how many tests passed, failed and were skipped, which failed, and for each
 * skipped test the reason it recorded in the skip log (`OMNIPROF_SKIP_LOG`, written by
 * lib/testing/requirements.ts). A test skipped without a recorded reason counts as failed: every skip
 * must say why.
 *
 * ```sh
 * deno run --allow-read support/test_summary.ts JUNIT.xml SKIP_LOG
 * ```
 *
 * prints the list of skipped tests, then a last line `PASSED FAILED SKIPPED` for the shell.
 *
 * @module
 */
import type { SkipRecord } from "../lib/testing/requirements.ts";

/** One test (or test step) as deno's JUnit report gives it. */
export interface TestCase {
  name: string;
  /** The test file, as deno names it (`./lib/x_test.ts`). */
  file: string;
  outcome: "passed" | "failed" | "skipped";
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function unescapeXml(text: string): string {
  return text.replace(
    /&(amp|lt|gt|quot|apos|#(\d+)|#x([0-9a-fA-F]+));/g,
    (_, name, dec, hex) =>
      dec !== undefined
        ? String.fromCodePoint(Number(dec))
        : hex !== undefined
        ? String.fromCodePoint(parseInt(hex, 16))
        : ENTITIES[name]!,
  );
}

/** The test cases of a JUnit report as `deno test --junit-path` writes it. */
export function parseJunit(xml: string): TestCase[] {
  const cases: TestCase[] = [];
  for (const match of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attributes = match[1]!;
    const body = match[3] ?? "";
    const attribute = (key: string) => {
      const value = new RegExp(`\\b${key}="([^"]*)"`).exec(attributes)?.[1];
      if (value === undefined) throw new RangeError(`a testcase without ${key}: <testcase${attributes}>`);
      return unescapeXml(value);
    };
    const outcome = /<(failure|error)\b/.test(body)
      ? "failed"
      : /<skipped\b/.test(body)
      ? "skipped"
      : "passed";
    cases.push({ name: attribute("name"), file: attribute("classname"), outcome });
  }
  return cases;
}

/** The records of a skip log: one JSON object per line. */
export function parseSkipLog(text: string): SkipRecord[] {
  return text.split("\n").filter((line) => line.trim() !== "").map((line, index) => {
    const record = JSON.parse(line) as Partial<SkipRecord>;
    if (typeof record.name !== "string" || typeof record.reason !== "string") {
      throw new RangeError(`line ${index + 1} of the skip log is not a skip record: ${line}`);
    }
    return { name: record.name, reason: record.reason, bootstrapped: record.bootstrapped === true };
  });
}

/** The counts, and the lines that list what was skipped and why. */
export interface TestSummary {
  passed: number;
  failed: number;
  skipped: number;
  lines: string[];
}

/** Pairs each skipped test with a recorded reason; one without counts as failed. */
export function summarize(cases: readonly TestCase[], skips: readonly SkipRecord[]): TestSummary {
  const unused = [...skips];
  const justified: string[] = [];
  const unjustified: string[] = [];
  for (const test of cases.filter((c) => c.outcome === "skipped")) {
    const index = unused.findIndex((record) => record.name === test.name);
    if (index < 0) {
      unjustified.push(`  ${test.file}: ${test.name}`);
      continue;
    }
    const [record] = unused.splice(index, 1);
    const kind = record!.bootstrapped ? "bootstrap installs it; CI=true fails instead" : "optional";
    justified.push(`  ${test.file}: ${test.name}: ${record!.reason} [${kind}]`);
  }
  // Listed first: CI shows only the end of a long log, and a failure is what its reader looks for.
  const failed = cases.filter((c) => c.outcome === "failed").map((test) => `  ${test.file}: ${test.name}`);
  const lines = failed.length > 0 ? [`Failed (${failed.length}):`, ...failed] : [];
  lines.push(`Skipped (${justified.length}):`, ...justified);
  if (unjustified.length > 0) {
    lines.push(
      `Skipped without a recorded reason, counted as failed (${unjustified.length}):`,
      ...unjustified,
    );
  }
  const count = (outcome: TestCase["outcome"]) => cases.filter((c) => c.outcome === outcome).length;
  return {
    passed: count("passed"),
    failed: count("failed") + unjustified.length,
    skipped: justified.length,
    lines,
  };
}

if (import.meta.main) {
  const [junit, skipLog] = Deno.args;
  if (junit === undefined || skipLog === undefined) {
    console.error("usage: deno run --allow-read support/test_summary.ts JUNIT.xml SKIP_LOG");
    Deno.exit(2);
  }
  const summary = summarize(
    parseJunit(Deno.readTextFileSync(junit)),
    parseSkipLog(Deno.readTextFileSync(skipLog)),
  );
  for (const line of summary.lines) console.log(line);
  console.log(`${summary.passed} ${summary.failed} ${summary.skipped}`);
}
