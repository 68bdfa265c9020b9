import assert from "node:assert/strict";
import { parseTopArgs } from "./top_command.ts";

Deno.test("parseTopArgs() reads pids, frequency, rows, interval and count with sensible defaults", () => {
  assert.deepEqual(parseTopArgs([]), {
    pids: [],
    frequencyHz: 99,
    rows: null,
    intervalSeconds: 1,
    count: null,
    idle: false,
  });
  assert.deepEqual(
    parseTopArgs(["-p", "12", "--pid", "34", "-F", "49", "-n", "15", "-i", "0.5", "-c", "3", "--idle"]),
    {
      pids: [12, 34],
      frequencyHz: 49,
      rows: 15,
      intervalSeconds: 0.5,
      count: 3,
      idle: true,
    },
  );
});

Deno.test("parseTopArgs() refuses what it cannot honour, naming the option", () => {
  assert.throws(() => parseTopArgs(["-p", "abc"]), /-p abc: not a process id/);
  assert.throws(() => parseTopArgs(["-p", "0"]), /-p 0: not a process id/);
  assert.throws(() => parseTopArgs(["-F", "0"]), /-F 0: expected a whole number from 1 to 20000 Hz/);
  assert.throws(() => parseTopArgs(["-F", "99.5"]), /-F 99.5/);
  assert.throws(() => parseTopArgs(["-F", "50000"]), /-F 50000: expected a whole number from 1 to 20000 Hz/);
  assert.throws(() => parseTopArgs(["-i", "0.05"]), /-i 0.05: expected seconds from 0.1 to/);
  assert.throws(() => parseTopArgs(["-i", "soon"]), /-i soon/);
  assert.throws(() => parseTopArgs(["-n", "-3"]), /-n/);
  assert.throws(() => parseTopArgs(["extra"]), /extra/);
  assert.throws(() => parseTopArgs(["--bogus"]), /bogus/);
  assert.throws(() => parseTopArgs(["-h"]), (error: Error) => error.message === "");
});
