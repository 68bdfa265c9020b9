import assert from "node:assert/strict";
import {
  CAP_BPF,
  CAP_PERFMON,
  CAP_SYS_ADMIN,
  missingTracingCapabilities,
  parseCapabilities,
} from "./capabilities.ts";

Deno.test("parseCapabilities() reads bits above 32 exactly", () => {
  const caps = parseCapabilities("CapEff:\t000000c000000000\n");
  assert.ok(caps.has(CAP_BPF));
  assert.ok(caps.has(CAP_PERFMON));
  assert.ok(!caps.has(CAP_SYS_ADMIN));
});

Deno.test("missingTracingCapabilities() accepts CAP_SYS_ADMIN alone, or CAP_BPF with CAP_PERFMON", () => {
  assert.deepEqual(missingTracingCapabilities(parseCapabilities("CapEff:\t0000000000200000")), []);
  assert.deepEqual(missingTracingCapabilities(parseCapabilities("CapEff:\t000000c000000000")), []);
  assert.deepEqual(missingTracingCapabilities(parseCapabilities("CapEff:\t0000000000000000")), [
    "CAP_BPF",
    "CAP_PERFMON",
  ]);
  assert.deepEqual(missingTracingCapabilities(parseCapabilities("CapEff:\t0000008000000000")), [
    "CAP_PERFMON",
  ]);
});

Deno.test("parseCapabilities() rejects a status file without CapEff", () => {
  assert.throws(() => parseCapabilities("Name:\tx\n"), RangeError);
});
