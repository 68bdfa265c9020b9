import assert from "node:assert/strict";
import { below, garbage, mutate, pick, prng, registerFuzzTest } from "../testing/fuzz.ts";
import { RegularFile } from "../sys/regular_file.ts";
import { MAX_LINE_BYTES, PerfMap } from "./perf_map.ts";

const encoder = new TextEncoder();

function mapOf(text: string, final = true, options = {}): PerfMap {
  const map = new PerfMap(options);
  map.append(encoder.encode(text), final);
  return map;
}

function withDir(body: (dir: string) => void | Promise<void>): Promise<void> {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_perf_map_test_" });
  return Promise.resolve(body(dir)).finally(() => Deno.removeSync(dir, { recursive: true }));
}

/** An entry the way a test states it, and the answer a lookup must give: the last entry that covers it. */
interface Entry {
  start: number;
  size: number;
  name: string;
}

function expectedName(entries: readonly Entry[], address: number): string | null {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!;
    if (address >= entry.start && address < entry.start + entry.size) return entry.name;
  }
  return null;
}

/** Addresses at and around every edge of `entries`, plus a few outside them all. */
function probes(entries: readonly Entry[]): number[] {
  const out = [0, 1, 2 ** 47 - 1];
  for (const { start, size } of entries) {
    out.push(start - 1, start, start + 1, start + size - 1, start + size);
  }
  return out.filter((address) => address >= 0);
}

Deno.test("PerfMap names an address by the V8 entry that covers it, start inclusive, end exclusive", () => {
  const text = "18c4000 300 Builtin:DeoptimizationEntry_Eager\n" +
    "7f44c67c6d40 2c4 JS:*leaf /tmp/chain.js:1:14\n" +
    "7f44c67c5b80 130 JS:^leaf /tmp/chain.js:1:14\n";
  const map = mapOf(text);
  assert.equal(map.lookup(0x7f44c67c6d40), "JS:*leaf /tmp/chain.js:1:14");
  assert.equal(map.lookup(0x7f44c67c6d40 + 0x2c3), "JS:*leaf /tmp/chain.js:1:14");
  assert.equal(map.lookup(0x7f44c67c6d40 + 0x2c4), null);
  assert.equal(map.lookup(0x7f44c67c5b80 + 0x12f), "JS:^leaf /tmp/chain.js:1:14");
  assert.equal(map.lookup(0x7f44c67c5b7f), null);
  assert.equal(map.lookup(0x18c4000), "Builtin:DeoptimizationEntry_Eager");
  assert.deepEqual(map.stats, { entries: 3, malformedLines: 0, bytesRead: text.length, truncated: false });
});

Deno.test("PerfMap reads the variants writers use: 0x, upper case, tabs, spaces in names, CRLF", () => {
  const map = mapOf(
    "0x1000 0x10 with prefix\n" +
      "2000 0X20 size prefix only\n" +
      "7F3A0000 1A [JIT] Method::Name(int, string)[Optimized]\r\n" +
      "\t3000\t8\tpy::<module>:/app/main.py  \n" +
      "   \n" +
      "\n" +
      "00004000 0000000000000004 leading zeros\n" +
      "5000 4 last, unterminated",
  );
  assert.equal(map.lookup(0x100f), "with prefix");
  assert.equal(map.lookup(0x2000), "size prefix only");
  assert.equal(map.lookup(0x7f3a0019), "[JIT] Method::Name(int, string)[Optimized]");
  assert.equal(map.lookup(0x3007), "py::<module>:/app/main.py");
  assert.equal(map.lookup(0x4003), "leading zeros");
  assert.equal(map.lookup(0x5000), "last, unterminated");
  assert.equal(map.stats.entries, 6);
  assert.equal(map.stats.malformedLines, 0, "blank lines are not malformed");
});

Deno.test("PerfMap counts and skips malformed lines, and keeps the good ones around them", () => {
  const lines = [
    "1000 10 good one",
    "nothex 10 name",
    "2000 zz name",
    "3000 10", // no name
    "3000 10 ", // only blanks after the size
    "4000", // no size
    "5000 0 covers nothing",
    "6000-10 no blank",
    "7000 10name",
    "0x 10 no digits",
    "20000000000000 10 above 2^53",
    "100000000000000000 1 seventeen digits",
    "ffffffffffffffff 1 the top of memory",
    "8000 10 good two",
  ];
  const map = mapOf(lines.join("\n") + "\n");
  assert.equal(map.stats.entries, 2);
  assert.equal(map.stats.malformedLines, lines.length - 2);
  assert.equal(map.lookup(0x1000), "good one");
  assert.equal(map.lookup(0x8000), "good two");
  for (const address of [0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000]) {
    assert.equal(map.lookup(address), null);
  }
});

Deno.test("PerfMap: where entries overlap the later one wins, in every arrangement", () => {
  const entries: Entry[] = [
    { start: 0x1000, size: 0x100, name: "first" },
    { start: 0x1040, size: 0x20, name: "inside, later" }, // re-JITted in the middle
    { start: 0x10f0, size: 0x100, name: "straddles the end" },
    { start: 0x1000, size: 0x100, name: "same range again" }, // covers all of "first" and part of the others
    { start: 0x0f00, size: 0x10, name: "before" },
    { start: 0x1050, size: 0x8, name: "inside the newest" },
    { start: 0x2000, size: 0x10, name: "alone" },
  ];
  const text = entries.map((e) => `${e.start.toString(16)} ${e.size.toString(16)} ${e.name}\n`).join("");
  const map = mapOf(text);
  for (const address of probes(entries)) {
    assert.equal(map.lookup(address), expectedName(entries, address), `at 0x${address.toString(16)}`);
  }
  assert.equal(map.lookup(0x1045), "same range again");
  assert.equal(map.lookup(0x1052), "inside the newest");
  assert.equal(map.lookup(0x1150), "straddles the end");
});

Deno.test("PerfMap: random overlapping entries, read in several appends, name as the last covering entry", () => {
  const random = prng(0x9e4f);
  for (let round = 0; round < 200; round++) {
    const entries: Entry[] = Array.from({ length: 1 + below(random, 60) }, (_, i) => ({
      start: 0x10000 + below(random, 64) * 0x10,
      size: 1 + below(random, 0x200),
      name: `f${i}`,
    }));
    const map = new PerfMap();
    let added = 0;
    // Several appends, each followed by lookups: the table is rebuilt after new entries.
    while (added < entries.length) {
      const batch = entries.slice(added, added + 1 + below(random, 20));
      added += batch.length;
      map.append(
        encoder.encode(
          batch.map((e) => `${e.start.toString(16)} ${e.size.toString(16)} ${e.name}\n`).join(""),
        ),
      );
      const known = entries.slice(0, added);
      for (const address of probes(known)) {
        assert.equal(
          map.lookup(address),
          expectedName(known, address),
          `round ${round}, 0x${address.toString(16)}`,
        );
      }
    }
  }
});

Deno.test("PerfMap.append() parses complete lines only, unless final", () => {
  const map = new PerfMap();
  const bytes = encoder.encode("1000 10 one\n2000 10 tw");
  assert.equal(map.append(bytes), 12, "up to the last newline");
  assert.equal(map.lookup(0x2000), null);
  assert.equal(map.append(encoder.encode("2000 10 two\n3000 10 three")), 12);
  assert.equal(map.lookup(0x2000), "two");
  assert.equal(map.append(encoder.encode("3000 10 three"), true), 13);
  assert.equal(map.lookup(0x3000), "three");
});

Deno.test("PerfMap skips a line longer than 64 KiB, even across appends, and reads on after it", () => {
  const map = new PerfMap();
  const long = `1000 10 ${"x".repeat(MAX_LINE_BYTES + 10)}`;
  assert.equal(map.append(encoder.encode(long.slice(0, MAX_LINE_BYTES + 5))), MAX_LINE_BYTES + 5);
  assert.equal(map.stats.malformedLines, 1);
  map.append(encoder.encode(`${long.slice(MAX_LINE_BYTES + 5)}\n2000 10 after\n`));
  assert.equal(map.lookup(0x1000), null);
  assert.equal(map.lookup(0x2000), "after");
  assert.deepEqual([map.stats.entries, map.stats.malformedLines], [1, 1]);
  const whole = mapOf(`${long}\n2000 10 after\n`);
  assert.deepEqual([whole.stats.entries, whole.stats.malformedLines], [1, 1]);
});

Deno.test("PerfMap keeps at most maxEntries entries and says it was truncated", () => {
  const text = Array.from({ length: 100 }, (_, i) => `${(0x1000 + i * 0x10).toString(16)} 10 f${i}\n`).join(
    "",
  );
  const map = mapOf(text, false, { maxEntries: 10 });
  assert.equal(map.stats.entries, 10);
  assert.equal(map.stats.truncated, true);
  assert.equal(map.lookup(0x1000 + 9 * 0x10), "f9");
  assert.equal(map.lookup(0x1000 + 10 * 0x10), null);
});

Deno.test("PerfMap reads at most maxBytes of its file and says it was truncated", async () => {
  await withDir((dir) => {
    const lines = Array.from({ length: 100 }, (_, i) => `${(0x1000 + i * 0x10).toString(16)} 10 f${i}\n`);
    Deno.writeTextFileSync(`${dir}/perf.map`, lines.join(""));
    const lineBytes = lines[0]!.length; // every line has the same length here
    using map = new PerfMap({ maxBytes: lineBytes * 5 + 3 });
    map.follow(() => RegularFile.open(`${dir}/perf.map`));
    assert.equal(map.stats.entries, 5);
    assert.equal(map.stats.bytesRead, lineBytes * 5);
    assert.equal(map.stats.truncated, true);
    assert.equal(map.lookup(0x1000 + 4 * 0x10), "f4");
    assert.equal(map.name(0x1000 + 5 * 0x10), null, "nothing past the bound is read, even on a miss");
  });
});

Deno.test("PerfMap.name() reads what was appended on a miss, at most every refreshIntervalMs", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/perf.map`;
    Deno.writeTextFileSync(path, "1000 10 first\n2000 10 half-writ");
    using map = new PerfMap({ refreshIntervalMs: 200 });
    map.follow(() => RegularFile.open(path));
    assert.equal(map.name(0x1000), "first");
    assert.equal(map.stats.bytesRead, 14, "the unterminated line waits for its end");
    Deno.writeTextFileSync(path, "ten\n3000 10 third\n", { append: true });
    assert.equal(map.name(0x3000), null, "no second look within the interval");
    await new Promise((resolve) => setTimeout(resolve, 250));
    assert.equal(map.name(0x3000), "third");
    assert.equal(map.lookup(0x2000), "half-written");
    assert.equal(map.stats.bytesRead, Deno.statSync(path).size);
  });
});

Deno.test("PerfMap looks again for a file that was not there, and finish() reads the last line", async () => {
  await withDir((dir) => {
    const path = `${dir}/perf.map`;
    let opens = 0;
    const open = () => {
      opens++;
      try {
        return RegularFile.open(path);
      } catch {
        return null;
      }
    };
    using map = new PerfMap({ refreshIntervalMs: 0 });
    map.follow(open);
    assert.equal(map.name(0x1000), null);
    Deno.writeTextFileSync(path, "1000 10 late\n2000 10 no newline");
    assert.equal(map.name(0x1000), "late");
    assert.equal(map.name(0x2000), null);
    // The process exits; its map may even be removed: the open file is read to its end.
    Deno.removeSync(path);
    map.finish();
    assert.equal(map.lookup(0x2000), "no newline");
    const before = opens;
    assert.equal(map.name(0x3000), null);
    assert.equal(opens, before, "a finished map is not looked for again");
  });
});

/** A random map: entries in one of the writers' styles, with the entries they state. */
function randomMap(random: () => number): { text: string; entries: Entry[] } {
  const entries: Entry[] = [];
  let text = "";
  for (let n = below(random, 40); n > 0; n--) {
    const entry = {
      start: below(random, 2 ** 20) * 0x10 + (random() < 0.5 ? 0x7f0000000000 : 0),
      size: 1 + below(random, 0x1000),
      name: pick(random, ["JS:*f /a.js:1:2", "py::g:/b.py", "[JIT] M::N(int)", "x", "a b  c"]),
    };
    entries.push(entry);
    const hex = (value: number) => {
      const digits = value.toString(16);
      return (random() < 0.2 ? "0x" : "") + (random() < 0.2 ? digits.toUpperCase() : digits);
    };
    text += `${hex(entry.start)}${pick(random, [" ", "\t", "  "])}${hex(entry.size)} ${entry.name}` +
      `${pick(random, ["\n", "\r\n", " \n"])}`;
  }
  return { text, entries };
}

registerFuzzTest(import.meta.url, {
  name: "PerfMap on damaged and random maps never throws; intact maps name as their last covering entry",
  cases: 2000,
  seed: 0x5e9f,
  expectRefusals: false,
  makeCase(random) {
    const { text, entries } = randomMap(random);
    const valid = encoder.encode(text);
    const choice = random();
    const { bytes, how } = choice < 0.15
      ? { bytes: garbage(random, 300), how: "garbage" }
      : choice < 0.35
      ? { bytes: valid, how: "valid" }
      : mutate(random, valid);
    return {
      kind: how,
      run() {
        const map = new PerfMap({ maxEntries: 30 });
        // Split anywhere: what one append leaves, the next gets again with more.
        const cut = below(random, bytes.length + 1);
        const used = map.append(bytes.subarray(0, cut));
        assert.ok(used >= 0 && used <= cut);
        map.append(bytes.subarray(used), true);
        const { entries: kept, malformedLines, truncated } = map.stats;
        assert.ok(kept <= 30 && malformedLines >= 0);
        const names = new Set(new TextDecoder().decode(bytes).split(/\r?\n/));
        for (let i = 0; i < 50; i++) {
          const address = below(random, 2 ** 24) + (random() < 0.5 ? 0x7f0000000000 : 0);
          const name = map.lookup(address);
          if (name !== null) assert.ok([...names].some((line) => line.includes(name)), name);
        }
        if (how === "valid") {
          const known = entries.slice(0, 30);
          assert.equal(kept, known.length);
          assert.equal(truncated, entries.length > 30);
          for (const address of probes(known)) {
            assert.equal(map.lookup(address), expectedName(known, address));
          }
        }
      },
    };
  },
  isOwnError: () => false,
});
