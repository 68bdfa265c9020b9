/**
 * The protocol between the guest test suite and the host: lines on the serial console. qemu's exit code
 * says nothing about the guest, so every verdict travels as a marker line:
 *
 *   OMNIPROF-BOOT <kernel release>              the guest's init started
 *   OMNIPROF-TEST <name> PASS|FAIL|SKIP <detail> one per check
 *   OMNIPROF-DETAIL <name> <text>               more lines for a check (e.g. the verifier's log)
 *   OMNIPROF-END passed=<n> failed=<n> skipped=<n>   the suite finished
 *   OMNIPROF-EXIT <code>                        the suite's process exited with this code
 *
 * Markers may be found anywhere in a line (kernel messages can land in front of them), and lines may end
 * in CR as a serial console sends them.
 *
 * @example
 * ```ts
 * import { ConsoleParser, testMarker } from "./console_markers.ts";
 * const parser = new ConsoleParser();
 * parser.push(`${testMarker("check", "PASS", "ok")}\n`);
 * console.log(parser.report().tests[0]?.status); // "PASS"
 * ```
 *
 * @module
 */

/** A check's outcome. */
export type TestStatus = "PASS" | "FAIL" | "SKIP";

/** One check as reported by the guest. */
export interface GuestTest {
  name: string;
  status: TestStatus;
  detail: string;
  /** OMNIPROF-DETAIL lines that followed it. */
  log: string[];
}

/** Everything the console said. */
export interface GuestReport {
  /** `uname -r` of the guest, once it booted. */
  kernelRelease: string | null;
  tests: GuestTest[];
  /** The counts of the END marker, or null when the suite never finished. */
  end: { passed: number; failed: number; skipped: number } | null;
  /** The suite's exit code (EXIT marker), or null. */
  exitCode: number | null;
}

/** Names are one word so that the marker stays parseable. */
function checkName(name: string): string {
  if (!/^[A-Za-z0-9_.:/-]+$/.test(name)) {
    throw new RangeError(`Cannot use ${JSON.stringify(name)} as a check name`);
  }
  return name;
}

function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, " | ").trim();
}

/** The marker line of a check. */
export function testMarker(name: string, status: TestStatus, detail: string): string {
  return `OMNIPROF-TEST ${checkName(name)} ${status} ${oneLine(detail)}`.trimEnd();
}

/** Marker lines carrying more text for a check, one per line of `text`. */
export function detailMarkers(name: string, text: string): string[] {
  return text.split("\n").map((line) => line.trimEnd()).filter((line) => line.length > 0)
    .map((line) => `OMNIPROF-DETAIL ${checkName(name)} ${line}`);
}

/** The marker of a finished suite. */
export function endMarker(passed: number, failed: number, skipped: number): string {
  return `OMNIPROF-END passed=${passed} failed=${failed} skipped=${skipped}`;
}

const BOOT = /OMNIPROF-BOOT (\S+)/;
const TEST = /OMNIPROF-TEST (\S+) (PASS|FAIL|SKIP)(?: (.*))?$/;
const DETAIL = /OMNIPROF-DETAIL (\S+) ?(.*)$/;
const END = /OMNIPROF-END passed=(\d+) failed=(\d+) skipped=(\d+)/;
const EXIT = /OMNIPROF-EXIT (-?\d+)/;

/** Collects markers from console output that arrives in arbitrary chunks. */
export class ConsoleParser {
  #partial = "";
  #report: GuestReport = { kernelRelease: null, tests: [], end: null, exitCode: null };

  /** Feeds output; returns the tests completed by it (for live progress). */
  push(chunk: string): GuestTest[] {
    const text = this.#partial + chunk;
    const lines = text.split("\n");
    this.#partial = lines.pop() ?? "";
    const added: GuestTest[] = [];
    for (const line of lines) {
      const test = this.#line(line.replace(/\r+$/, ""));
      if (test) added.push(test);
    }
    return added;
  }

  /** The report so far (a last unterminated line counts too). */
  report(): GuestReport {
    if (this.#partial) {
      this.#line(this.#partial.replace(/\r+$/, ""));
      this.#partial = "";
    }
    return this.#report;
  }

  #line(line: string): GuestTest | null {
    const report = this.#report;
    let match = line.match(TEST);
    if (match) {
      const test = {
        name: match[1]!,
        status: match[2] as TestStatus,
        detail: match[3]?.trim() ?? "",
        log: [],
      };
      report.tests.push(test);
      return test;
    }
    if ((match = line.match(DETAIL))) {
      const test = report.tests.findLast((t) => t.name === match![1]);
      if (test) test.log.push(match[2] ?? "");
      return null;
    }
    if ((match = line.match(BOOT))) report.kernelRelease = match[1]!;
    else if ((match = line.match(END))) {
      report.end = { passed: Number(match[1]), failed: Number(match[2]), skipped: Number(match[3]) };
    } else if ((match = line.match(EXIT))) report.exitCode = Number(match[1]);
    return null;
  }
}

/** Why a report is not a pass, or null when it is one. */
export function reportFailure(report: GuestReport): string | null {
  const failed = report.tests.filter((test) => test.status === "FAIL");
  if (failed.length > 0) {
    return `${failed.length} check(s) failed: ${failed.map((test) => test.name).join(", ")}`;
  }
  if (report.kernelRelease === null) return "the guest never started the suite (no OMNIPROF-BOOT marker)";
  if (report.end === null) return "the suite did not finish (no OMNIPROF-END marker)";
  if (report.tests.length === 0) return "the suite reported no checks";
  if (
    report.end.failed > 0 ||
    report.end.passed + report.end.failed + report.end.skipped !== report.tests.length
  ) {
    return `the END marker (${report.end.passed} passed, ${report.end.failed} failed, ${report.end.skipped} ` +
      `skipped) does not match the ${report.tests.length} checks seen`;
  }
  if (report.exitCode !== null && report.exitCode !== 0) {
    return `the suite exited with code ${report.exitCode}`;
  }
  return null;
}
