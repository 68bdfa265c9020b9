import assert from "node:assert/strict";
import { exitCodeOf, InterruptedError, Interrupts } from "./interrupts.ts";
import { delay } from "./timer.ts";

Deno.test("Interrupts.next() aborts at the next stop signal, with the signal as its reason", () => {
  using interrupts = Interrupts.listen();
  const first = interrupts.next();
  assert.equal(first.aborted, false);
  interrupts.receive("SIGTERM");
  assert.equal(first.aborted, true);
  assert.equal(first.reason, "SIGTERM");
  const second = interrupts.next();
  assert.equal(second.aborted, false, "a phase that starts now waits for a further signal");
  assert.equal(interrupts.next(0).aborted, true, "one already received counts for next(0)");
  interrupts.receive("SIGINT");
  assert.equal(second.reason, "SIGINT");
  assert.deepEqual(interrupts.received, ["SIGTERM", "SIGINT"]);
  assert.equal(interrupts.last, "SIGINT");
});

// SIGHUP rather than SIGINT: the test runner takes SIGINT for itself.
Deno.test("Interrupts catches a real SIGHUP instead of letting it end the process", async () => {
  using interrupts = Interrupts.listen();
  const next = interrupts.next();
  const aborted = new Promise((resolve) => next.addEventListener("abort", resolve));
  Deno.kill(Deno.pid, "SIGHUP");
  // A signal listener does not keep the event loop alive: a timer does, and bounds the wait.
  await Promise.race([aborted, delay(5000)]);
  assert.equal(interrupts.last, "SIGHUP");
});

Deno.test("exitCodeOf() and InterruptedError say what a shell would", () => {
  assert.equal(exitCodeOf("SIGINT"), 130);
  assert.equal(exitCodeOf("SIGTERM"), 143);
  assert.equal(exitCodeOf("SIGHUP"), 129);
  assert.equal(new InterruptedError("SIGINT", "before X").message, "Interrupted before X");
  assert.equal(new InterruptedError("SIGTERM", "before X").message, "Stopped by SIGTERM before X");
});
