import assert from "node:assert/strict";
import { OptionError, parseOptions } from "./options.ts";

const spec = {
  duration: { type: "string", short: "d" },
  pid: { type: "string", short: "p", multiple: true },
  demo: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

Deno.test("parseOptions() reads short, long, inline and repeated options", () => {
  const { values, positionals } = parseOptions(
    ["-d", "5", "-p7", "--pid", "8", "--pid=9", "--demo", "-h"],
    spec,
  );
  assert.deepEqual(values, { duration: "5", pid: ["7", "8", "9"], demo: true, help: true });
  assert.deepEqual(positionals, []);
  assert.equal(parseOptions(["--duration=2", "-d", "3"], spec).values.duration, "3", "the last one wins");
});

Deno.test("parseOptions() keeps positionals only when allowed; -- ends the options", () => {
  const parsed = parseOptions(["a.pb.gz", "-d", "1", "--", "-h", "b"], spec, { allowPositionals: true });
  assert.deepEqual(parsed.positionals, ["a.pb.gz", "-h", "b"]);
  assert.equal(parsed.values.help, undefined);
  assert.throws(() => parseOptions(["a.pb.gz"], spec), OptionError);
  assert.deepEqual(parseOptions(["-"], spec, { allowPositionals: true }).positionals, ["-"]);
});

Deno.test("parseOptions() refuses unknown options, missing values and values given to flags", () => {
  assert.throws(() => parseOptions(["--bogus"], spec), /Unknown option '--bogus'/);
  assert.throws(() => parseOptions(["-x"], spec), /Unknown option '-x'/);
  assert.throws(() => parseOptions(["-d"], spec), /Option '-d' needs a value/);
  assert.throws(() => parseOptions(["--demo=yes"], spec), /'--demo' does not take a value/);
  assert.throws(() => parseOptions(["-hd"], spec), /'-h' does not take a value/);
  assert.throws(() => parseOptions(["--constructor"], spec), /Unknown option/);
  // A forgotten value does not swallow the next option; written inline, a dash is a value.
  assert.throws(
    () => parseOptions(["-d", "--demo"], spec),
    /Option '-d' needs a value, not '--demo' \(write -d--demo/,
  );
  assert.throws(() => parseOptions(["--duration", "-h"], spec), /\(write --duration=-h if/);
  assert.equal(parseOptions(["--duration=-1"], spec).values.duration, "-1");
  assert.equal(parseOptions(["-d-1"], spec).values.duration, "-1");
  assert.equal(parseOptions(["-d", "-"], spec).values.duration, "-");
  // Words after -- are positionals, so they are refused where positionals are.
  assert.throws(() => parseOptions(["--", "sleep", "1"], spec), /Unexpected argument 'sleep'/);
  assert.deepEqual(parseOptions(["--"], spec).positionals, []);
});
