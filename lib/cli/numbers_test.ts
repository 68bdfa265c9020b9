import assert from "node:assert/strict";
import { MAX_SECONDS, parseFrequency, parsePid, parseSeconds, parseWholeNumber } from "./numbers.ts";
import { UsageError } from "./usage_error.ts";

/** Asserts that `fn` throws a UsageError whose message matches `message`. */
function throwsUsage(fn: () => unknown, message: RegExp, what = ""): void {
  assert.throws(fn, (error: Error) => {
    assert.ok(error instanceof UsageError, `${what}: ${error}`);
    assert.match(error.message, message, what);
    return true;
  });
}

/** Every way `Number()` accepts a text that is not plain decimal digits, and the empty cases. */
const NOT_DECIMAL = [
  "0x10",
  "0o17",
  "0b11",
  "1e3",
  "1E3",
  "+5",
  "-5",
  "5.0",
  "5.",
  ".5",
  "",
  " ",
  " 5",
  "5 ",
  "\t5",
  "5\n",
  "1_000",
  "Infinity",
  "NaN",
  "٥",
  "５",
];

Deno.test("parseWholeNumber() takes decimal digits in range", () => {
  assert.equal(parseWholeNumber("1", "-n", { min: 1, max: 10 }), 1);
  assert.equal(parseWholeNumber("10", "-n", { min: 1, max: 10 }), 10);
  assert.equal(parseWholeNumber("007", "-n", { min: 1, max: 10 }), 7, "leading zeros are still decimal");
});

Deno.test("parseWholeNumber() refuses each form that is not plain decimal, saying so", () => {
  for (const text of NOT_DECIMAL) {
    throwsUsage(
      () => parseWholeNumber(text, "-n", { min: 0, max: 1_000_000 }),
      /^-n .*: expected a whole number from 0 to 1000000, in decimal digits$/,
      JSON.stringify(text),
    );
  }
});

Deno.test("parseWholeNumber() refuses numbers out of range, with the range", () => {
  throwsUsage(
    () => parseWholeNumber("0", "-c", { min: 1, max: 5 }),
    /^-c 0: expected a whole number from 1 to 5$/,
  );
  throwsUsage(
    () => parseWholeNumber("6", "-c", { min: 1, max: 5 }),
    /^-c 6: expected a whole number from 1 to 5$/,
  );
  throwsUsage(
    () => parseWholeNumber("9".repeat(400), "-c", { min: 1, max: 5 }),
    /^-c 9+: expected a whole number from 1 to 5$/,
    "beyond a double",
  );
  throwsUsage(() => parseFrequency("20001", "-F"), /from 1 to 20000 Hz/);
  assert.equal(parseFrequency("20000", "-F"), 20000);
});

Deno.test("parseSeconds() takes whole seconds and up to three decimals", () => {
  assert.equal(parseSeconds("5", "-d"), 5);
  assert.equal(parseSeconds("0.5", "-d"), 0.5);
  assert.equal(parseSeconds("2.25", "-d"), 2.25);
  assert.equal(parseSeconds("0.001", "-d"), 0.001);
  assert.equal(parseSeconds(String(MAX_SECONDS), "-d"), MAX_SECONDS);
});

Deno.test("parseSeconds() refuses what is not plain decimal seconds", () => {
  for (const text of [...NOT_DECIMAL.filter((text) => text !== "5.0"), "0.0001", "1.2.3", "5s"]) {
    throwsUsage(
      () => parseSeconds(text, "-d"),
      /^-d .*: expected seconds from 0\.001 to 2147483, in decimal digits/,
      JSON.stringify(text),
    );
  }
});

Deno.test("parseSeconds() refuses what a timer cannot wait, naming the maximum", () => {
  // 2^31 ms fired at once before: the longest duration is what a timer holds.
  assert.equal(MAX_SECONDS, 2147483);
  for (const text of ["2147484", "2147483.648", "4294967.296", "99999999999999999999"]) {
    throwsUsage(() => parseSeconds(text, "-d"), /^-d \d+(\.\d+)?: at most 2147483 s \(about 24 days/, text);
  }
  throwsUsage(() => parseSeconds("0", "-d"), /^-d 0: expected seconds from 0\.001/);
  throwsUsage(() => parseSeconds("0.05", "-i", 0.1), /^-i 0\.05: expected seconds from 0\.1 to/);
});

Deno.test("parsePid() takes 1 up to one below the kernel's pid_max", () => {
  const pidMax = Number(Deno.readTextFileSync("/proc/sys/kernel/pid_max").trim());
  assert.equal(parsePid("1", "-p"), 1);
  assert.equal(parsePid(String(pidMax - 1), "-p"), pidMax - 1);
  throwsUsage(
    () => parsePid(String(pidMax), "-p"),
    new RegExp(`^-p ${pidMax}: not a process id \\(PIDs here go from 1 to ${pidMax - 1}\\)$`),
  );
  throwsUsage(() => parsePid("0", "-p"), /^-p 0: not a process id/);
  for (const text of NOT_DECIMAL) {
    throwsUsage(
      () => parsePid(text, "-p"),
      /: not a process id \(decimal digits from 1 to \d+\)$/,
      JSON.stringify(text),
    );
  }
  // Were these read as numbers, they would name PIDs 16 and 1000.
  throwsUsage(() => parsePid("0x10", "-p"), /^-p 0x10: not a process id/);
  throwsUsage(() => parsePid("1e3", "-p"), /^-p 1e3: not a process id/);
});
