/**
 * Fuzzes the parsers of /proc files: maps (`parseProcMaps`), status (`parseCapabilities`), stat
 * (`statFields`) and cgroup (`containerIdFromCgroup`), on this machine's own files and written examples
 * (a deleted library, a path with spaces, a container's cgroups), truncated, bit-flipped, cut, repeated and
 * spliced with garbage, plus lines with numbers too long for any machine. Each must give well-formed values
 * or refuse with the parser's own error; see `lib/testing/fuzz.ts` for what fails a test.
 *
 * @module
 */
import assert from "node:assert/strict";
import { containerIdFromCgroup } from "../lib/agent/container_id.ts";
import { parseProcMaps } from "../lib/process/proc_maps.ts";
import { statFields } from "../lib/process/proc_stat.ts";
import { parseCapabilities } from "../lib/sys/capabilities.ts";
import { below, garbage, mutate, pick, registerFuzzTest } from "../lib/testing/fuzz.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** This process's file, or "" where it cannot be read. */
function own(name: string): string {
  try {
    return Deno.readTextFileSync(`/proc/self/${name}`);
  } catch {
    return "";
  }
}

const MAPS = [
  own("maps"),
  `55a4c8e02000-55a4c8e07000 r-xp 00002000 fd:01 131090                     /usr/bin/cat
7f1c2e3c0000-7f1c2e3c1000 r-xp 00000000 00:00 0 
7f1c2e3d0000-7f1c2e3d2000 r-xp 00001000 fd:01 999                        /tmp/my lib.so (deleted)
7ffd4c9f1000-7ffd4c9f3000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`,
].filter((text) => text !== "");

const STATUS = [own("status"), "Name:\tx\nCapEff:\t000001ffffffffff\n"].filter((text) => text !== "");

const STAT = [
  own("stat"),
  "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 12345 1000 10",
].filter((text) => text !== "");

const CGROUP = [
  own("cgroup"),
  "0::/system.slice/docker-4a2c0d9e1f6b8a7c5d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d.scope\n",
  "12:memory:/kubepods/burstable/pod1/4a2c0d9e1f6b8a7c5d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d\n0::/\n",
  "0::/ecs/8e2d6c3f5a7b4e1d9c0b2a3f4e5d6c7b-1234567890\n",
].filter((text) => text !== "");

/** A damaged copy of one of `bases`, or a line of numbers no kernel writes, or garbage. */
function damagedText(
  random: () => number,
  bases: string[],
  hostileLine: () => string,
): { kind: string; text: string } {
  switch (below(random, 6)) {
    case 0:
      return { kind: "intact", text: pick(random, bases) };
    case 1:
      return { kind: "hostile line", text: `${pick(random, bases)}${hostileLine()}\n` };
    case 2:
      return { kind: "garbage", text: decoder.decode(garbage(random, 400)) };
    default: {
      let bytes: Uint8Array = encoder.encode(pick(random, bases));
      let how = "";
      for (let n = 1 + below(random, 3); n > 0; n--) {
        const damaged = mutate(random, bytes);
        bytes = damaged.bytes;
        how = damaged.how;
      }
      return { kind: how, text: decoder.decode(bytes) };
    }
  }
}

/** A hex number of 1 to 40 digits: the kernel's are at most 16. */
function hexNumber(random: () => number): string {
  return Array.from({ length: 1 + below(random, 40) }, () => pick(random, [..."0123456789abcdef"])).join("");
}

function hostileMapsLine(random: () => number): string {
  const start = hexNumber(random);
  const end = random() < 0.5 ? hexNumber(random) : start;
  const inode = pick(random, ["0", "1", "99999999999999999999999", "18446744073709551615"]);
  return `${start}-${end} r-xp ${hexNumber(random)} ${hexNumber(random)}:${hexNumber(random)} ${inode} /x`;
}

registerFuzzTest(import.meta.url, {
  name: "parseProcMaps() on damaged maps files: well-formed mappings or Cannot parse maps line",
  cases: 6000,
  seed: 0x3a95,
  makeCase(random) {
    const { kind, text } = damagedText(random, MAPS, () => hostileMapsLine(random));
    return {
      kind,
      run: () => {
        const mappings = parseProcMaps(text);
        let previous = -1;
        for (const m of mappings) {
          const what = JSON.stringify(m);
          // Numbers of at most 64 bits (2^64 itself is how the largest rounds as a double).
          assert.ok(m.start >= 0 && m.start < m.end && m.end <= 2 ** 64, `0 <= start < end <= 2^64: ${what}`);
          assert.ok(m.fileOffset >= 0 && m.fileOffset <= 2 ** 64, what);
          assert.ok(Number.isInteger(m.inode) && m.inode >= 0 && m.inode <= 2 ** 64, what);
          assert.match(m.device, /^[0-9a-f]{1,8}:[0-9a-f]{1,8}$/);
          assert.ok(!m.path.includes("\n"), what);
          assert.ok(m.start >= previous, "sorted by start");
          previous = m.start;
        }
      },
    };
  },
  isOwnError: (error) => error instanceof RangeError && error.message.startsWith("Cannot parse maps line: "),
});

registerFuzzTest(import.meta.url, {
  name: "parseCapabilities() on damaged status files: a capability set or Cannot read capabilities",
  cases: 4000,
  seed: 0x57a7,
  makeCase(random) {
    const { kind, text } = damagedText(random, STATUS, () => `CapEff:\t${hexNumber(random)}`);
    return {
      kind,
      run: () => {
        const capabilities = parseCapabilities(text);
        for (let capability = 0; capability < 64; capability++) {
          assert.equal(typeof capabilities.has(capability), "boolean");
        }
      },
    };
  },
  isOwnError: (error) =>
    error instanceof RangeError && error.message.startsWith("Cannot read capabilities: "),
});

registerFuzzTest(import.meta.url, {
  name: "statFields() and containerIdFromCgroup() on damaged stat and cgroup files never throw",
  cases: 6000,
  seed: 0xc9f0,
  makeCase(random) {
    if (random() < 0.5) {
      const { kind, text } = damagedText(
        random,
        STAT,
        () => `1 (${decoder.decode(garbage(random, 40))}) S 1`,
      );
      return {
        kind: `stat ${kind}`,
        run: () => {
          const fields = statFields(text);
          if (fields === null) return assert.ok(!text.includes(")"));
          for (const field of fields) assert.equal(typeof field, "string");
        },
      };
    }
    const { kind, text } = damagedText(random, CGROUP, () => `0::/${decoder.decode(garbage(random, 100))}`);
    return {
      kind: `cgroup ${kind}`,
      run: () => {
        const id = containerIdFromCgroup(text);
        if (id !== null) assert.match(id, /^(?:[0-9a-f]{64}|[0-9a-f]{32}-[0-9]{10})$/);
      },
    };
  },
  isOwnError: () => false,
  expectRefusals: false,
});
