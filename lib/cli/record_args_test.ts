import assert from "node:assert/strict";
import { formatFromPath, parseRecordArgs, UsageError } from "./record_args.ts";

Deno.test("parseRecordArgs() applies the defaults", () => {
  const args = parseRecordArgs([]);
  assert.equal(args.frequencyHz, 99);
  assert.equal(args.durationSeconds, null);
  assert.equal(args.output, "profile.pb.gz");
  assert.equal(args.format, "pprof");
  assert.deepEqual(args.pids, []);
  assert.deepEqual(args.command, []);
});

Deno.test("parseRecordArgs() takes repeated -p and infers the format from the extension", () => {
  const args = parseRecordArgs(["-p", "12", "--pid", "34", "-o", "x.folded", "-d", "2.5", "-F", "1000"]);
  assert.deepEqual(args.pids, [12, 34]);
  assert.equal(args.format, "folded");
  assert.equal(args.durationSeconds, 2.5);
  assert.equal(args.frequencyHz, 1000);
});

Deno.test("parseRecordArgs() keeps everything after -- as the command", () => {
  const args = parseRecordArgs(["-o", "a.pb", "--", "make", "-j2", "--", "x"]);
  assert.deepEqual(args.command, ["make", "-j2", "--", "x"]);
  assert.equal(args.format, "pprof");
});

Deno.test("parseRecordArgs() lets --format override the extension", () => {
  assert.equal(parseRecordArgs(["-o", "a.out", "--format", "folded"]).format, "folded");
});

Deno.test("parseRecordArgs() keeps kernel addresses only when asked", () => {
  assert.equal(parseRecordArgs([]).kernelAddresses, false);
  assert.equal(parseRecordArgs(["--kernel-addresses"]).kernelAddresses, true);
});

Deno.test("parseRecordArgs() gives --demo a default duration", () => {
  assert.equal(parseRecordArgs(["--demo"]).durationSeconds, 5);
  assert.equal(parseRecordArgs(["--demo", "-d", "2"]).durationSeconds, 2);
});

Deno.test("parseRecordArgs() rejects bad input with a UsageError", () => {
  const bad = [
    ["-F", "0"],
    ["-F", "1.5"],
    ["-F", "999999"],
    ["-d", "-1"],
    ["-d", "x"],
    ["-p", "0"],
    ["-p", "abc"],
    ["-p", "0x10"],
    ["-p", "1e3"],
    ["-p", " 7"],
    ["-p", ""],
    ["-d", "1e3"],
    ["-d", "+5"],
    ["-d", "0x10"],
    ["-d", ""],
    ["-d", "2147484"],
    ["-F", "99.0"],
    ["-F", "0x63"],
    ["-o", "profile.unknown"],
    ["--format", "json"],
    ["--bogus"],
    ["stray"],
    ["--"],
    ["-p", "1", "--demo"],
    ["--demo", "--", "true"],
  ];
  for (const argv of bad) assert.throws(() => parseRecordArgs(argv), UsageError, argv.join(" "));
});

Deno.test("formatFromPath() knows pprof and folded names", () => {
  assert.equal(formatFromPath("a.pb.gz"), "pprof");
  assert.equal(formatFromPath("a.pb"), "pprof");
  assert.equal(formatFromPath("a.folded"), "folded");
  assert.equal(formatFromPath("a.svg"), null);
});

Deno.test("parseRecordArgs() infers html and speedscope from the extension, or takes --format", () => {
  assert.equal(parseRecordArgs(["-o", "profile.html"]).format, "html");
  assert.equal(parseRecordArgs(["-o", "cpu.speedscope.json"]).format, "speedscope");
  assert.equal(parseRecordArgs(["-o", "out", "--format", "speedscope"]).format, "speedscope");
  assert.equal(parseRecordArgs(["-o", "out.json", "--format", "html"]).format, "html");
  assert.equal(formatFromPath("x.htm"), "html");
  assert.equal(formatFromPath("x.json"), null, "plain JSON says nothing about the format");
  assert.throws(() => parseRecordArgs(["-o", "x.json"]), UsageError);
});

Deno.test("parseRecordArgs() names the longest -d and the PIDs a -p may take", () => {
  assert.throws(() => parseRecordArgs(["-d", "4294967.296"]), /-d 4294967\.296: at most 2147483 s/);
  assert.throws(
    () => parseRecordArgs(["-p", "0x10"]),
    /-p 0x10: not a process id \(decimal digits from 1 to \d+\)/,
  );
  assert.equal(parseRecordArgs(["-d", "2147483"]).durationSeconds, 2147483);
});
