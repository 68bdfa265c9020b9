import assert from "node:assert/strict";
import { ConsoleParser, detailMarkers, endMarker, reportFailure, testMarker } from "./console_markers.ts";

/** A console as a guest prints it: serial CRLF line ends, kernel messages in between. */
function guestConsole(lines: string[]): string {
  return lines.map((line) => `${line}\r\n`).join("");
}

Deno.test("ConsoleParser reads markers split across chunks, with CRLF and kernel noise", () => {
  const text = guestConsole([
    "SeaBIOS (version 1.16.2)",
    "OMNIPROF-BOOT 6.1.0-57-amd64",
    testMarker("environment", "PASS", "Linux 6.1, BTF 4.2 MiB"),
    `[   12.345678] random: crng init done${
      testMarker("load:sample_cpu", "PASS", "PERF_EVENT, 308 instructions")
    }`,
    testMarker("lpm-trie", "SKIP", "the object has no LPM trie"),
    endMarker(2, 0, 1),
    "OMNIPROF-EXIT 0",
    "[   40.000000] reboot: Power down",
  ]);
  const parser = new ConsoleParser();
  const seen: string[] = [];
  // Feed it in 7-byte pieces, as a pipe may deliver it.
  for (let i = 0; i < text.length; i += 7) seen.push(...parser.push(text.slice(i, i + 7)).map((t) => t.name));
  const report = parser.report();
  assert.deepEqual(seen, ["environment", "load:sample_cpu", "lpm-trie"]);
  assert.equal(report.kernelRelease, "6.1.0-57-amd64");
  assert.deepEqual(report.tests.map((t) => [t.name, t.status, t.detail]), [
    ["environment", "PASS", "Linux 6.1, BTF 4.2 MiB"],
    ["load:sample_cpu", "PASS", "PERF_EVENT, 308 instructions"],
    ["lpm-trie", "SKIP", "the object has no LPM trie"],
  ]);
  assert.deepEqual(report.end, { passed: 2, failed: 0, skipped: 1 });
  assert.equal(report.exitCode, 0);
  assert.equal(reportFailure(report), null);
});

Deno.test("ConsoleParser attaches DETAIL lines (a verifier log) to their check", () => {
  const verifier = [
    "libbpf: prog 'broken_for_test': BPF program load failed: Permission denied",
    "; return (int)*(volatile __u64 *)(count + 64);",
    "invalid access to map value, value_size=8 off=512 size=8",
  ].join("\n");
  const parser = new ConsoleParser();
  parser.push(guestConsole([
    "OMNIPROF-BOOT 6.18.15+deb13-amd64",
    testMarker("load:broken_for_test", "FAIL", "Cannot load BPF programs: Permission denied (errno 13)"),
    ...detailMarkers("load:broken_for_test", verifier),
    testMarker("maps", "PASS", "27 maps"),
    endMarker(1, 1, 0),
    "OMNIPROF-EXIT 1",
  ]));
  const report = parser.report();
  assert.deepEqual(report.tests[0]!.log, verifier.split("\n"));
  assert.deepEqual(report.tests[1]!.log, []);
  assert.match(reportFailure(report)!, /1 check\(s\) failed: load:broken_for_test/);
});

Deno.test("reportFailure() names a guest that never booted, never finished, or miscounted", () => {
  const parse = (lines: string[]) => {
    const parser = new ConsoleParser();
    parser.push(guestConsole(lines));
    return parser.report();
  };
  assert.match(reportFailure(parse(["Kernel panic - not syncing: VFS"]))!, /never started the suite/);
  assert.match(
    reportFailure(parse(["OMNIPROF-BOOT 5.10.0-46-amd64", testMarker("environment", "PASS", "ok")]))!,
    /did not finish \(no OMNIPROF-END/,
  );
  assert.match(
    reportFailure(parse(["OMNIPROF-BOOT 5.10", testMarker("a", "PASS", ""), endMarker(2, 0, 0)]))!,
    /does not match the 1 checks/,
  );
  assert.match(
    reportFailure(
      parse(["OMNIPROF-BOOT 5.10", testMarker("a", "PASS", ""), endMarker(1, 0, 0), "OMNIPROF-EXIT 3"]),
    )!,
    /exited with code 3/,
  );
  assert.match(reportFailure(parse(["OMNIPROF-BOOT 5.10", endMarker(0, 0, 0)]))!, /no checks/);
});

Deno.test("testMarker() keeps a multi-line detail on one line and refuses names with spaces", () => {
  assert.equal(
    testMarker("cli-check", "FAIL", "exited with 1\nCannot load libbpf"),
    "OMNIPROF-TEST cli-check FAIL exited with 1 | Cannot load libbpf",
  );
  assert.throws(() => testMarker("two words", "PASS", ""), RangeError);
  const parser = new ConsoleParser();
  parser.push(testMarker("x", "PASS", "") + "\n");
  assert.deepEqual(parser.report().tests[0], { name: "x", status: "PASS", detail: "", log: [] });
});
