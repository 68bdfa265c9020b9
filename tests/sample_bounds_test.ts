import assert from "node:assert/strict";
import { reportedCpuSeconds, reportedLost, sampleBounds } from "./sample_bounds.ts";

Deno.test("sampleBounds() allows four standard deviations and two samples either side", () => {
  // 2 s at 1000 Hz: 2000 samples, sd at most sqrt(2000) = 44.72.
  const bounds = sampleBounds(2, 1000);
  assert.equal(bounds.expected, 2000);
  assert.ok(Math.abs(bounds.low - 1819.11) < 0.01, `${bounds.low}`);
  assert.ok(Math.abs(bounds.high - 2180.89) < 0.01, `${bounds.high}`);
  // A recorder that lost a tenth of them is outside.
  assert.ok(1800 < bounds.low);
});

Deno.test("sampleBounds() widens the upper bound by the steal, and a span by its ends", () => {
  // 10% stolen: up to 2000 / 0.9 = 2222.2 samples, sd 47.14.
  const stolen = sampleBounds(2, 1000, 0.1);
  assert.ok(Math.abs(stolen.low - 1819.11) < 0.01, `${stolen.low}`);
  assert.ok(Math.abs(stolen.high - 2412.79) < 0.01, `${stolen.high}`);
  const span = sampleBounds({ low: 1, high: 3 }, 100);
  assert.equal(span.expected, 200);
  assert.ok(Math.abs(span.low - (100 - 40 - 2)) < 1e-9);
  assert.ok(Math.abs(span.high - (300 + 4 * Math.sqrt(300) + 2)) < 1e-9);
  assert.equal(sampleBounds(0, 99).low, 0);
  assert.throws(() => sampleBounds({ low: 2, high: 1 }, 99), RangeError);
  assert.throws(() => sampleBounds(1, 0), RangeError);
  assert.throws(() => sampleBounds(1, 99, 1), RangeError);
});

Deno.test("reportedCpuSeconds() and reportedLost() read what the workload and the recorder printed", () => {
  assert.equal(reportedCpuSeconds("ready\ncpu_seconds=2.003\n"), 2.003);
  assert.throws(() => reportedCpuSeconds("cpu_seconds=\n"), /no cpu_seconds/);
  const wrote = "omniprof: wrote out.folded (folded): 200 samples, 4 distinct stacks";
  assert.equal(reportedLost(`${wrote}, 0 lost\n`), 0);
  assert.equal(reportedLost(`${wrote}, 17 samples LOST (ring buffer full: try a lower -F)\n`), 17);
  assert.equal(
    reportedLost(`${wrote}, 0 lost\nomniprof: 3 records could not be handled and were skipped (see above)\n`),
    3,
  );
  assert.throws(() => reportedLost("omniprof: recording all CPUs at 99 Hz\n"), /no count of lost samples/);
});
