/**
 * A small harness for fuzz tests of the readers of outside bytes (pprof files, collector responses, /proc
 * files). Cases come from a seeded PRNG, so a failure names the seed that reproduces it; they run in a
 * worker (the test module itself, loaded again) watched from the test, so a case that never returns fails
 * the test instead of hanging it. Every case must either be accepted (its own check passes) or refused
 * with the reader's own error; anything else (a RangeError from deep inside, a TypeError), a case slower
 * than its bound, or a silent worker fails the test. Test-only.
 *
 * @example
 * ```ts ignore
 * import { registerFuzzTest } from "../lib/testing/fuzz.ts";
 * registerFuzzTest(import.meta.url, {
 *   name: "parseThing() on garbage",
 *   cases: 10_000,
 *   seed: 0x5eed,
 *   makeCase: (random) => ({ kind: "garbage", run: () => parseThing(garbage(random, 100)) }),
 *   isOwnError: (error) => error instanceof RangeError && /^Cannot parse thing: /.test(error.message),
 * });
 * ```
 *
 * @module
 */
import assert from "node:assert/strict";

/** A seedable PRNG (mulberry32): numbers in [0, 1). */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A whole number in [0, n). */
export function below(random: () => number, n: number): number {
  return Math.floor(random() * n);
}

/** One of `items`. */
export function pick<T>(random: () => number, items: readonly T[]): T {
  return items[below(random, items.length)]!;
}

/** Up to `maxLength` random bytes. */
export function garbage(random: () => number, maxLength: number): Uint8Array {
  return Uint8Array.from({ length: below(random, maxLength + 1) }, () => below(random, 256));
}

/** Byte values that sit on the edges of varints, lengths and ASCII. */
const INTERESTING_BYTES = [0x00, 0x01, 0x0a, 0x20, 0x29, 0x2d, 0x3a, 0x7f, 0x80, 0xff];

/**
 * A copy of `bytes` damaged one way: truncated, bits flipped, bytes overwritten, a slice removed,
 * duplicated or replaced by garbage. Returns the damaged bytes and what was done, for the tally.
 */
export function mutate(random: () => number, bytes: Uint8Array): { bytes: Uint8Array; how: string } {
  const at = () => below(random, bytes.length + 1);
  switch (below(random, 6)) {
    case 0:
      return { bytes: bytes.slice(0, at()), how: "truncated" };
    case 1: {
      const out = bytes.slice();
      for (let n = 1 + below(random, 8); n > 0 && out.length > 0; n--) {
        const i = below(random, out.length);
        out[i] = out[i]! ^ (1 << below(random, 8));
      }
      return { bytes: out, how: "bits flipped" };
    }
    case 2: {
      const out = bytes.slice();
      for (let n = 1 + below(random, 8); n > 0 && out.length > 0; n--) {
        out[below(random, out.length)] = random() < 0.5
          ? pick(random, INTERESTING_BYTES)
          : below(random, 256);
      }
      return { bytes: out, how: "bytes overwritten" };
    }
    case 3: {
      const start = at();
      return {
        bytes: concat(bytes.subarray(0, start), bytes.subarray(start + below(random, 64))),
        how: "cut",
      };
    }
    case 4: {
      const start = at();
      const slice = bytes.subarray(start, start + below(random, 256));
      const copies = Array.from({ length: 1 + below(random, 16) }, () => slice);
      return { bytes: concat(bytes.subarray(0, start), ...copies, bytes.subarray(start)), how: "repeated" };
    }
    default: {
      const start = at();
      const end = start + below(random, 32);
      return {
        bytes: concat(bytes.subarray(0, start), garbage(random, 64), bytes.subarray(end)),
        how: "garbage spliced",
      };
    }
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** One case: its kind (for the tally, and in failure messages) and the call under test. */
export interface FuzzCase {
  kind: string;
  /** Reads the input and checks what came out; throws (or rejects with) the reader's own error to refuse it. */
  run(): void | Promise<void>;
}

/** What {@linkcode registerFuzzTest} runs. */
export interface FuzzTarget {
  /** The test's name; also names its worker. */
  name: string;
  /** How many cases. */
  cases: number;
  /** Case `i` is made from the PRNG seeded with `seed + i`. */
  seed: number;
  /** Longest a case may take, wall time (so with room for a loaded machine). Default 2 s. */
  caseTimeBoundMs?: number;
  makeCase(random: () => number, index: number): FuzzCase;
  /** Whether `error` is the reader's own refusal of bad input. */
  isOwnError(error: unknown): boolean;
  /** False for code that refuses nothing by throwing (failures are results): no case may throw. */
  expectRefusals?: boolean;
  /**
   * The least share of cases that must be accepted (default: any), so that a generator that breaks every
   * input is noticed.
   */
  minAcceptedShare?: number;
  /** Workers the cases are split over (case i goes to worker i mod workers). Default 1. */
  workers?: number;
}

interface Outcome {
  cases: number;
  accepted: number;
  refused: number;
  slowest: number;
  /** Per kind: cases accepted, refused, and their total time in ms. */
  byKind: Record<string, [number, number, number]>;
  failures: string[];
}

type Message = { type: "progress"; done: number } | { type: "done"; outcome: Outcome };

const PROGRESS_EVERY = 200;
/** A worker silent for this long is hung; the first report may take longer (the module loads). */
const WATCHDOG_MS = 30_000;
const STARTUP_WATCHDOG_MS = 90_000;
const MAX_FAILURES_SHOWN = 10;

async function runCases(
  target: FuzzTarget,
  worker: number,
  post: (message: Message) => void,
): Promise<Outcome> {
  const bound = target.caseTimeBoundMs ?? 2000;
  const outcome: Outcome = { cases: 0, accepted: 0, refused: 0, slowest: 0, byKind: {}, failures: [] };
  const fail = (text: string) => {
    if (outcome.failures.length < MAX_FAILURES_SHOWN) outcome.failures.push(text);
    else if (outcome.failures.length === MAX_FAILURES_SHOWN) {
      outcome.failures.push("(more failures not shown)");
    }
  };
  for (let i = worker; i < target.cases; i += target.workers ?? 1) {
    const seed = target.seed + i;
    const started = performance.now();
    let kind = "?";
    let accepted = 0;
    let refused = 0;
    try {
      const fuzzCase = target.makeCase(prng(seed), i);
      kind = fuzzCase.kind;
      await fuzzCase.run();
      accepted = 1;
    } catch (error) {
      if (target.isOwnError(error)) refused = 1;
      else fail(`seed ${seed} (${kind}): ${error instanceof Error ? error.stack : error}`);
    }
    const elapsed = performance.now() - started;
    const tally = outcome.byKind[kind] ??= [0, 0, 0];
    tally[0] += accepted;
    tally[1] += refused;
    tally[2] += elapsed;
    outcome.accepted += accepted;
    outcome.refused += refused;
    outcome.slowest = Math.max(outcome.slowest, elapsed);
    if (elapsed > bound) fail(`seed ${seed} (${kind}): took ${elapsed.toFixed(0)} ms, over ${bound} ms`);
    outcome.cases++;
    if (outcome.cases % PROGRESS_EVERY === 0) post({ type: "progress", done: outcome.cases });
  }
  return outcome;
}

interface WorkerScope {
  name?: string;
  postMessage(message: Message): void;
  onmessage: ((event: MessageEvent<number>) => void) | null;
}

/**
 * Registers `target` as a Deno test of the module at `moduleUrl` (pass `import.meta.url`), which must
 * call this at its top level: the test loads the module again as a worker, where this call runs the
 * cases instead. The test fails on any case neither accepted nor refused with the reader's own error, on
 * a case over its time bound, on a worker that stops reporting, and when all cases had the same outcome
 * (the generator would then not be exercising both paths; unless refusals are not expected at all).
 */
export function registerFuzzTest(moduleUrl: string, target: FuzzTarget): void {
  const workerName = `omniprof-fuzz: ${target.name}`;
  const scope = globalThis as unknown as WorkerScope;
  if (scope.name !== undefined && scope.name.startsWith("omniprof-fuzz: ")) {
    // In a worker: only the target it was started for runs.
    if (scope.name === workerName) {
      scope.onmessage = async (event) => {
        const outcome = await runCases(target, event.data, (m) => scope.postMessage(m));
        scope.postMessage({ type: "done", outcome });
      };
    }
    return;
  }
  Deno.test({
    name: target.name,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const started = performance.now();
      const workers = target.workers ?? 1;
      const outcomes = await Promise.all(
        Array.from({ length: workers }, (_, index) => runWorker(moduleUrl, workerName, index)),
      );
      const outcome = mergeOutcomes(outcomes);
      const seconds = (performance.now() - started) / 1000;
      const kinds = Object.entries(outcome.byKind).sort().map(([kind, [ok, refused, ms]]) =>
        `${kind} ${ok}/${refused} ${ms.toFixed(0)} ms`
      );
      console.log(
        `${outcome.cases} cases in ${seconds.toFixed(1)} s: ${outcome.accepted} accepted, ` +
          `${outcome.refused} refused with the reader's error, slowest ${outcome.slowest.toFixed(1)} ms`,
      );
      console.log(`by kind (accepted/refused, time): ${kinds.join(", ")}`);
      for (const failure of outcome.failures) console.log(`FAIL ${failure}`);
      assert.equal(outcome.failures.length, 0, `${outcome.failures.length} failing cases (above)`);
      assert.equal(outcome.cases, target.cases);
      assert.ok(outcome.accepted > 0, "some cases are accepted");
      if (target.expectRefusals ?? true) assert.ok(outcome.refused > 0, "some cases are refused");
      const share = target.minAcceptedShare ?? 0;
      assert.ok(outcome.accepted >= share * outcome.cases, `fewer than ${share * 100}% of cases accepted`);
    },
  });
}

/** Runs worker `index`'s share of the cases, watched: a worker that stops reporting is hung. */
function runWorker(moduleUrl: string, workerName: string, index: number): Promise<Outcome> {
  const worker = new Worker(moduleUrl, { type: "module", name: workerName });
  let timer: ReturnType<typeof setTimeout> | undefined;
  return new Promise<Outcome>((resolve, reject) => {
    let done = 0;
    const arm = (ms: number) => {
      clearTimeout(timer);
      timer = setTimeout(
        () => reject(new Error(`worker ${index} hung: no progress for ${ms} ms after ${done} cases`)),
        ms,
      );
    };
    worker.onmessage = (event: MessageEvent<Message>) => {
      if (event.data.type === "progress") {
        done = event.data.done;
        arm(WATCHDOG_MS);
      } else resolve(event.data.outcome);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      reject(new Error(`worker ${index} crashed: ${event.message}`));
    };
    arm(STARTUP_WATCHDOG_MS);
    worker.postMessage(index);
  }).finally(() => {
    clearTimeout(timer);
    worker.terminate();
  });
}

function mergeOutcomes(outcomes: readonly Outcome[]): Outcome {
  const total: Outcome = { cases: 0, accepted: 0, refused: 0, slowest: 0, byKind: {}, failures: [] };
  for (const outcome of outcomes) {
    total.cases += outcome.cases;
    total.accepted += outcome.accepted;
    total.refused += outcome.refused;
    total.slowest = Math.max(total.slowest, outcome.slowest);
    for (const [kind, [ok, refused, ms]] of Object.entries(outcome.byKind)) {
      const tally = total.byKind[kind] ??= [0, 0, 0];
      tally[0] += ok;
      tally[1] += refused;
      tally[2] += ms;
    }
    total.failures.push(...outcome.failures);
  }
  return total;
}
