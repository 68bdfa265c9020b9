import assert from "node:assert/strict";
import { statFields } from "./proc_stat.ts";

Deno.test("statFields() counts from the last parenthesis, whatever the command name holds", () => {
  assert.deepEqual(statFields("7 (sh) R 1 7"), ["R", "1", "7"]);
  assert.deepEqual(statFields("7 (a) b (c)) Z 1 7"), ["Z", "1", "7"]);
  assert.equal(statFields("not a stat line"), null);
  const own = statFields(Deno.readTextFileSync("/proc/self/stat"));
  assert.equal(Number(own?.[1]), Deno.ppid, "field 4 is this process's parent");
});
