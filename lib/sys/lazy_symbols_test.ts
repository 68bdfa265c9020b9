import assert from "node:assert/strict";
import { lazySymbols } from "./lazy_symbols.ts";

Deno.test("lazySymbols() binds a function when it is first read, and only then", () => {
  const fn = lazySymbols("libc.so.6", {
    getpid: { parameters: [], result: "i32" },
    omniprof_no_such_function: { parameters: [], result: "i32" },
  });
  assert.equal(fn.getpid(), Deno.pid);
  // Bound once: the same function every time.
  assert.equal(fn.getpid, fn.getpid);
  // A function never read is never bound: one the library lacks fails only where it is read.
  assert.throws(() => fn.omniprof_no_such_function, /omniprof_no_such_function/);
  assert.equal(fn.getpid(), Deno.pid);
});

Deno.test("lazySymbols() binds a function under its `name`, and nonblocking ones as promises", async () => {
  const fn = lazySymbols("libc.so.6", {
    processId: { name: "getpid", parameters: [], result: "i32" },
    processIdLater: { name: "getpid", parameters: [], result: "i32", nonblocking: true },
  });
  assert.equal(fn.processId(), Deno.pid);
  assert.equal(await fn.processIdLater(), Deno.pid);
});
