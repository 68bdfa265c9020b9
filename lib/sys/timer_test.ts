import assert from "node:assert/strict";
import { after, delay, every, MAX_TIMER_MS } from "./timer.ts";

Deno.test("after() calls back once, after the delay", async () => {
  const started = performance.now();
  let calls = 0;
  using _timer = after(20, () => calls++);
  await delay(60);
  assert.equal(calls, 1);
  assert.ok(performance.now() - started >= 20);
});

Deno.test("after() does not call back once disposed", async () => {
  let calls = 0;
  const timer = after(10, () => calls++);
  timer[Symbol.dispose]();
  await delay(40);
  assert.equal(calls, 0);
});

Deno.test("every() calls back repeatedly until disposed", async () => {
  let calls = 0;
  const timer = every(10, () => calls++);
  await delay(75);
  timer[Symbol.dispose]();
  const seen = calls;
  assert.ok(seen >= 3, `${seen} calls in 75 ms`);
  await delay(40);
  assert.equal(calls, seen);
});

Deno.test("delay() resolves at once when its signal aborts, and leaves no timer behind", async () => {
  const controller = new AbortController();
  const started = performance.now();
  const waiting = delay(10_000, controller.signal);
  controller.abort();
  await waiting;
  assert.ok(performance.now() - started < 1000);
  await delay(10_000, controller.signal); // already aborted
  assert.ok(performance.now() - started < 1000);
});

Deno.test("a pending timer keeps the process alive, a disposed one does not", async () => {
  const run = async (code: string) => {
    const started = performance.now();
    const { code: exit, stdout } = await new Deno.Command(Deno.execPath(), {
      args: ["eval", `import { after } from "${new URL("./timer.ts", import.meta.url)}";\n${code}`],
      stdout: "piped",
      env: { DENO_NO_UPDATE_CHECK: "1" },
    }).output();
    assert.equal(exit, 0);
    return { ms: performance.now() - started, out: new TextDecoder().decode(stdout).trim() };
  };
  const pending = await run(`after(300, () => console.log("fired"));`);
  assert.equal(pending.out, "fired");
  assert.ok(pending.ms >= 300);
  const disposed = await run(`after(3000, () => console.log("fired"))[Symbol.dispose]();`);
  assert.equal(disposed.out, "");
  assert.ok(disposed.ms < 3000, `exited after ${disposed.ms} ms`);
});

Deno.test("the timers leave Deno's Node layer unloaded, unlike setTimeout", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const loadsNodeTimers = async (code: string) => {
      const log = `${dir}/v8.log`;
      const { code: exit } = await new Deno.Command(Deno.execPath(), {
        args: [
          "eval",
          `--v8-flags=--log-function-events,--logfile=${log},--no-logfile-per-isolate`,
          `import { delay, every } from "${new URL("./timer.ts", import.meta.url)}";\n${code}`,
        ],
        env: { DENO_NO_UPDATE_CHECK: "1" },
      }).output();
      assert.equal(exit, 0);
      return (await Deno.readTextFile(log)).includes("node:timers");
    };
    assert.equal(await loadsNodeTimers("await delay(5); every(5, () => {})[Symbol.dispose]();"), false);
    // The control: the test would notice the layer if it were loaded.
    assert.equal(await loadsNodeTimers("await new Promise((resolve) => setTimeout(resolve, 5));"), true);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("after() refuses a delay a timer cannot hold, which would fire at once", async () => {
  assert.throws(() => after(MAX_TIMER_MS + 1, () => {}), RangeError);
  assert.throws(() => after(Number.NaN, () => {}), RangeError);
  let calls = 0;
  const longest = after(MAX_TIMER_MS, () => calls++);
  await delay(30);
  longest[Symbol.dispose]();
  assert.equal(calls, 0, "the longest delay does not fire early");
});
