import assert from "node:assert/strict";
import { below, garbage, mutate, pick, registerFuzzTest } from "../testing/fuzz.ts";
import {
  concat,
  debugInfo,
  GrowingFile,
  header,
  load,
  move,
  record,
  Writer,
} from "../testing/jitdump_writer.ts";
import { JitDump, JitDumpFormatError, parseJitDumpHeader } from "./jitdump.ts";

function dumpOf(bytes: Uint8Array, options = {}): { dump: JitDump; file: GrowingFile } {
  const file = new GrowingFile(bytes);
  const dump = new JitDump({ refreshIntervalMs: 0, ...options });
  dump.follow(() => file);
  return { dump, file };
}

Deno.test("JitDump names code by its loads, start inclusive, end exclusive, the code itself skipped", () => {
  const { dump } = dumpOf(concat(
    header(),
    load(0x7f0000001000, 0x100, "work", 1),
    record(4, new Writer().u64(8).u64(0).u64(8).raw(new Uint8Array(8)).bytes), // unwinding info
    load(0x7f0000003000, 0x40, "main", 2),
  ));
  assert.deepEqual(dump.lookup(0x7f0000001000), { functionName: "work", sourceFile: "", line: 0 });
  assert.equal(dump.lookup(0x7f00000010ff)?.functionName, "work");
  assert.equal(dump.lookup(0x7f0000001100), null);
  assert.equal(dump.lookup(0x7f0000000fff), null);
  assert.equal(dump.lookup(0x7f000000303f)?.functionName, "main");
  const stats = dump.stats;
  assert.equal(stats.loads, 2);
  assert.equal(stats.rejected, null);
  assert.equal(stats.truncated, false);
});

Deno.test("JitDump gives the source file and line of the last line entry at or before the address", () => {
  const code = 0x7f0000010000;
  const { dump } = dumpOf(concat(
    header(),
    debugInfo(code, [
      { address: code, line: 10, file: "/app/a.js" },
      { address: code + 0x20, line: 11, file: null }, // "same file as before"
      { address: code + 0x50, line: 30, file: "/app/b.js" },
    ]),
    load(code, 0x80, "compute", 1),
  ));
  assert.deepEqual(dump.lookup(code), { functionName: "compute", sourceFile: "/app/a.js", line: 10 });
  assert.deepEqual(dump.lookup(code + 0x1f), { functionName: "compute", sourceFile: "/app/a.js", line: 10 });
  assert.deepEqual(dump.lookup(code + 0x20), { functionName: "compute", sourceFile: "/app/a.js", line: 11 });
  assert.deepEqual(dump.lookup(code + 0x7f), { functionName: "compute", sourceFile: "/app/b.js", line: 30 });
  assert.equal(dump.stats.lineEntries, 3);
});

Deno.test("JitDump takes V8's 0x40 off the addresses of its line entries", () => {
  const code = 0x7f0000020000;
  const { dump } = dumpOf(concat(
    header(),
    load(0x18c4000, 0x300, "Builtin:DeoptimizationEntry_Eager", 0),
    // V8 says code_start + pc_offset + 0x40 for pc_offsets 0 and 0x30.
    debugInfo(code, [
      { address: code + 0x40, line: 3, file: "/app/main.js" },
      { address: code + 0x70, line: 4, file: "/app/main.js" },
    ]),
    load(code, 0x100, "JS:*work /app/main.js:3:15", 1),
  ));
  assert.equal(dump.lookup(code + 0x2f)?.line, 3);
  assert.equal(dump.lookup(code + 0x30)?.line, 4);
  assert.equal(dump.lookup(0x18c4010)?.functionName, "Builtin:DeoptimizationEntry_Eager");
});

Deno.test("JitDump reads V8's file names damaged by its freed buffer, and takes the path from the code's name", () => {
  // What Node 20 writes for a script path held in a V8 cons string: its first 16 bytes overwritten by
  // the allocator (a free-list pointer with NULs, then a key), the rest intact, then the NUL.
  const garbage = [0x38, 0xf9, 0xd9, 0x26, 0, 0, 0, 0, 0x6b, 0x2d, 0x61, 0x93, 0x9d, 0xa7, 0xd8, 0xe9];
  const damaged = new Uint8Array([...garbage, ...new TextEncoder().encode("/main.js")]); // of /srv/project/app/main.js
  const code = 0x7f0000020000;
  const other = 0x7f0000030000;
  const { dump } = dumpOf(concat(
    header(),
    load(0x18c4000, 0x300, "Builtin:DeoptimizationEntry_Eager", 0),
    debugInfo(code, [
      { address: code + 0x40, line: 3, file: damaged },
      { address: code + 0x60, line: 4, file: damaged },
      { address: code + 0x70, line: 5, file: damaged },
    ]),
    load(code, 0x100, "JS:*work /srv/project/app/main.js:3:15", 1),
    // A damaged name whose base is not the code's script's: the file is unknown, the lines stay.
    debugInfo(other, [{ address: other + 0x40, line: 8, file: damaged }]),
    load(other, 0x100, "JS:*elsewhere /srv/project/app/other.js:8:1", 2),
  ));
  const path = "/srv/project/app/main.js";
  const name = "JS:*work /srv/project/app/main.js:3:15";
  assert.deepEqual(dump.lookup(code + 0x10), { functionName: name, sourceFile: path, line: 3 });
  assert.deepEqual(dump.lookup(code + 0x20), { functionName: name, sourceFile: path, line: 4 });
  assert.deepEqual(dump.lookup(code + 0x30), { functionName: name, sourceFile: path, line: 5 });
  assert.deepEqual(dump.lookup(other), {
    functionName: "JS:*elsewhere /srv/project/app/other.js:8:1",
    sourceFile: "",
    line: 8,
  });
  assert.equal(dump.stats.lineEntries, 4);
  assert.equal(dump.stats.malformedRecords, 0);
});

Deno.test("JitDump leaves a partial header or trailing record for the next read, then reads it", () => {
  const first = load(0x7f0000001000, 0x100, "first", 1);
  const second = load(0x7f0000002000, 0x100, "second", 2);
  const bytes = concat(header(), first, second);
  const file = new GrowingFile(bytes, 20); // half a header
  const dump = new JitDump({ refreshIntervalMs: 0 });
  dump.follow(() => file);
  assert.equal(dump.lookup(0x7f0000001000), null);
  assert.equal(dump.stats.rejected, null);
  // The header, the first record and part of the second (its prefix and name, not its code).
  file.visible = 40 + first.length + 70;
  dump.refresh();
  assert.equal(dump.lookup(0x7f0000001000)?.functionName, "first");
  assert.equal(dump.lookup(0x7f0000002000), null);
  assert.equal(dump.stats.bytesRead, 40 + first.length);
  file.visible = bytes.length;
  // A miss reads what was added.
  assert.equal(dump.frame(0x7f0000002000)?.functionName, "second");
  assert.equal(dump.stats.bytesRead, bytes.length);
  dump.finish();
  assert.equal(file.closed, true);
  assert.equal(dump.lookup(0x7f0000002000)?.functionName, "second", "names stay after finish");
});

Deno.test("JitDump moves code with its lines: the old range names nothing, the new one the function", () => {
  const from = 0x7f0000030000;
  const to = 0x7f0000050000;
  const { dump } = dumpOf(concat(
    header(),
    debugInfo(from, [{ address: from, line: 7, file: "/app/m.js" }, {
      address: from + 8,
      line: 8,
      file: null,
    }]),
    load(from, 0x20, "moved", 1),
    move(from, to, 0x20, 1),
  ));
  assert.equal(dump.lookup(from), null);
  assert.deepEqual(dump.lookup(to + 9), { functionName: "moved", sourceFile: "/app/m.js", line: 8 });
  assert.equal(dump.stats.moves, 1);
  // A move of code no load put there changes nothing.
  const other = dumpOf(concat(header(), load(from, 0x20, "kept", 1), move(from + 4, to, 0x20, 2))).dump;
  assert.equal(other.lookup(from + 4)?.functionName, "kept");
  assert.equal(other.lookup(to), null);
  assert.equal(other.stats.moves, 0);
  // Code moved away already moves no more: the second move neither names its target nor hides the load
  // made beside the old place since.
  const twice = dumpOf(concat(
    header(),
    load(from, 0x20, "once", 1),
    move(from, to, 0x20, 1),
    load(from + 0x20, 0x20, "beside", 2),
    move(from, to + 0x1000, 0x40, 1),
  )).dump;
  assert.equal(twice.lookup(to)?.functionName, "once");
  assert.equal(twice.lookup(to + 0x1000), null);
  assert.equal(twice.lookup(from + 0x20)?.functionName, "beside");
  assert.equal(twice.stats.moves, 1);
});

Deno.test("JitDump: a later load of the same address wins, and only where it covers", () => {
  const code = 0x7f0000060000;
  const { dump } = dumpOf(concat(
    header(),
    load(code, 0x100, "old", 1),
    load(code, 0x40, "new", 2),
  ));
  assert.equal(dump.lookup(code + 0x3f)?.functionName, "new");
  assert.equal(dump.lookup(code + 0x40)?.functionName, "old");
});

Deno.test("JitDump refuses what is not a version-1 jitdump with a message that says why", () => {
  assert.throws(() => parseJitDumpHeader(header(true, { magic: 0x464c457f })), (error) => {
    assert.ok(error instanceof JitDumpFormatError);
    assert.match(error.message, /not a jitdump: the magic is 0x464c457f, not "JiTD"/);
    return true;
  });
  assert.throws(
    () => parseJitDumpHeader(header(true, { version: 2 })),
    /jitdump version 2 is not supported \(only 1\)/,
  );
  assert.throws(() => parseJitDumpHeader(header(true, { size: 16 })), /says it has 16 bytes, fewer than 40/);

  const { dump, file } = dumpOf(concat(header(true, { version: 7 }), load(0x1000, 0x10, "never", 1)));
  assert.equal(dump.stats.rejected, "jitdump version 7 is not supported (only 1)");
  assert.equal(dump.lookup(0x1000), null);
  assert.equal(file.closed, true, "a rejected dump is let go");

  // A record whose size cannot be right stops the reading after what came before it.
  const bad = new Writer().u32(0).u32(8).u64(0).bytes;
  const stopped = dumpOf(concat(header(), load(0x1000, 0x10, "before", 1), bad)).dump;
  assert.equal(stopped.lookup(0x1000)?.functionName, "before");
  assert.match(stopped.stats.rejected ?? "", /record at offset \d+ says it has 8 bytes/);
});

Deno.test("JitDump reads a big-endian writer's dump", () => {
  const { dump } = dumpOf(concat(header(false), load(0x7f0000001000, 0x10, "big", 1, false)));
  assert.equal(dump.lookup(0x7f0000001008)?.functionName, "big");
});

Deno.test("JitDump stops at CODE_CLOSE, skips malformed loads and stops at its bounds", () => {
  const closed = dumpOf(
    concat(header(), load(0x1000, 0x10, "a", 1), record(3, new Uint8Array()), load(0x2000, 0x10, "b", 2)),
  );
  assert.equal(closed.dump.lookup(0x1000)?.functionName, "a");
  assert.equal(closed.dump.lookup(0x2000), null);
  assert.equal(closed.file.closed, true);

  // A name without its NUL, and a load of no code.
  const noEnd = record(
    0,
    new Writer().u32(1).u32(1).u64(0x3000).u64(0x3000).u64(0x10).u64(1).raw([0x61, 0x62]).bytes,
  );
  const malformed = dumpOf(
    concat(header(), noEnd, load(0x4000, 0, "empty", 2), load(0x5000, 0x10, "good", 3)),
  );
  assert.equal(malformed.dump.stats.malformedRecords, 2);
  assert.equal(malformed.dump.lookup(0x5000)?.functionName, "good");

  const first = load(0x1000, 0x10, "a", 1);
  const bounded = dumpOf(concat(header(), first, load(0x2000, 0x10, "b", 2)), {
    maxBytes: 40 + first.length + 20,
  });
  assert.equal(bounded.dump.lookup(0x1000)?.functionName, "a");
  assert.equal(bounded.dump.lookup(0x2000), null);
  assert.equal(bounded.dump.stats.truncated, true);

  const fewEntries = dumpOf(concat(header(), first, load(0x2000, 0x10, "b", 2)), { maxEntries: 1 });
  assert.equal(fewEntries.dump.stats.loads, 1);
  assert.equal(fewEntries.dump.stats.truncated, true);
});

/** What a lookup must give after a dump's loads and moves: the latest range covering the address. */
interface ModelRange {
  start: number;
  end: number;
  name: string | null;
}

function modelName(ranges: readonly ModelRange[], address: number): string | null | undefined {
  for (let i = ranges.length - 1; i >= 0; i--) {
    const range = ranges[i]!;
    if (address >= range.start && address < range.end) return range.name;
  }
  return undefined;
}

/** A random valid dump of loads (overlapping at times) and moves, and the model of what it names. */
function randomDump(random: () => number): { bytes: Uint8Array; ranges: ModelRange[] } {
  const base = 0x7f0000000000;
  const parts = [header()];
  const ranges: ModelRange[] = [];
  const count = 1 + below(random, 12);
  for (let i = 0; i < count; i++) {
    if (ranges.length > 0 && random() < 0.2) {
      const from = pick(random, ranges).start;
      const to = base + 0x100000 + below(random, 64) * 0x40;
      const size = 0x10 + below(random, 8) * 0x10;
      parts.push(move(from, to, size, i));
      const latest = ranges.findLast((range) => from >= range.start && from < range.end);
      if (latest !== undefined && latest.start === from && latest.name !== null) {
        ranges.push({ start: from, end: from + size, name: null }, {
          start: to,
          end: to + size,
          name: latest.name,
        });
      }
      continue;
    }
    const start = base + below(random, 64) * 0x20;
    const size = 0x10 + below(random, 16) * 0x10;
    const name = `f${i}`;
    if (random() < 0.5) parts.push(debugInfo(start, [{ address: start, line: i + 1, file: "/app.js" }]));
    parts.push(load(start, size, name, i));
    ranges.push({ start, end: start + size, name });
  }
  return { bytes: concat(...parts), ranges };
}

registerFuzzTest(import.meta.url, {
  name: "JitDump on damaged and random dumps never throws; intact dumps name as their latest range",
  cases: 2000,
  seed: 0x71d0,
  expectRefusals: false,
  makeCase(random) {
    const { bytes: valid, ranges } = randomDump(random);
    const choice = random();
    const { bytes, how } = choice < 0.1
      ? { bytes: garbage(random, 300), how: "garbage" }
      : choice < 0.4
      ? { bytes: valid, how: "valid" }
      : mutate(random, valid);
    return {
      kind: how,
      run() {
        // Written in two steps: what the first read leaves, the second gets with the rest.
        const file = new GrowingFile(bytes, below(random, bytes.length + 1));
        const dump = new JitDump({ refreshIntervalMs: 0 });
        dump.follow(() => file);
        file.visible = bytes.length;
        dump.refresh();
        dump.finish();
        const names = new Set(ranges.flatMap((range) => range.name === null ? [] : [range.name]));
        const probes = ranges.flatMap(({ start, end }) => [start - 1, start, start + 1, end - 1, end]);
        for (const address of probes) {
          const found = dump.lookup(address);
          if (how === "valid") {
            assert.equal(found?.functionName ?? null, modelName(ranges, address) ?? null, `at ${address}`);
            assert.equal(dump.stats.rejected, null);
          } else if (found !== null && how !== "garbage") {
            // A damaged dump names nothing it does not hold (a mutation may make up a name, not a type).
            assert.equal(typeof found.functionName, "string");
          }
        }
        if (how === "valid") assert.ok(names.size === 0 || dump.stats.loads > 0);
      },
    };
  },
  isOwnError: () => false,
});
