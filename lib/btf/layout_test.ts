import assert from "node:assert/strict";
import { type Btf, BtfKind, type BtfTypeId, parseBtf } from "./btf.ts";
import {
  allEnumerators,
  enumeratorValue,
  enumValues,
  type MemberLayout,
  structLayout,
  structLayoutOf,
} from "./layout.ts";
import { VMLINUX_BTF_PATH } from "./kernel_btf.ts";
import { compileBtf, compileTools, kernelBtf, run, runHostProgram } from "./testdata/compile.ts";
import { hasTool } from "../testing/commands.ts";
import { optional, programs, requiring } from "../testing/requirements.ts";

const compiler = programs(...compileTools(), "gcc");
const linker = programs(...compileTools({ linkBitcode: true }));
const vmlinux = kernelBtf();

/** What the host C compiler printed about the fixture's types. */
interface HostFacts {
  sizes: Map<string, number>;
  /** "struct.member" -> { offset, size } or, for bitfields, bit position and width. */
  members: Map<string, { offset?: number; size?: number; bitOffset?: number; bitSize?: number }>;
  arrays: Map<string, { count: number; elementSize: number }>;
  enumerators: Map<string, number>;
}

async function hostFacts(): Promise<HostFacts> {
  const facts: HostFacts = {
    sizes: new Map(),
    members: new Map(),
    arrays: new Map(),
    enumerators: new Map(),
  };
  for (const line of (await runHostProgram("layout_fixture_host.c")).trim().split("\n")) {
    const [what, a, b, c, d] = line.split(" ");
    switch (what) {
      case "sizeof":
        facts.sizes.set(a!, Number(b));
        break;
      case "member":
        facts.members.set(`${a}.${b}`, { offset: Number(c), size: Number(d) });
        break;
      case "bitfield":
        facts.members.set(`${a}.${b}`, { bitOffset: Number(c), bitSize: Number(d) });
        break;
      case "array":
        facts.arrays.set(`${a}.${b}`, { count: Number(c), elementSize: Number(d) });
        break;
      case "enum":
        facts.enumerators.set(a!, Number(b));
        break;
      default:
        throw new Error(`unexpected host output: ${line}`);
    }
  }
  return facts;
}

Deno.test(requiring([compiler], {
  name: "structLayout() agrees with the C compiler on the fixture structs",
  fn: async () => {
    const [btf, facts] = await Promise.all([
      compileBtf(["layout_fixture.bpf.c"]).then(parseBtf),
      hostFacts(),
    ]);
    for (const [struct, size] of facts.sizes) {
      const layout = structLayout(btf, struct);
      assert.equal(layout.size, size, `sizeof(struct ${struct})`);
      assert.equal(layout.union, false);
      const expected = [...facts.members.keys()].filter((k) => k.startsWith(`${struct}.`));
      assert.deepEqual(layout.members.map((m) => `${struct}.${m.name}`), expected);
      for (const member of layout.members) {
        const key = `${struct}.${member.name}`;
        const fact = facts.members.get(key)!;
        if (fact.bitSize !== undefined) {
          assert.equal(member.bitOffset, fact.bitOffset, `${key} bit offset`);
          assert.equal(member.bitSize, fact.bitSize, `${key} bit size`);
          assert.equal(member.offset, Math.floor(fact.bitOffset! / 8), `${key} offset`);
          assert.equal(member.size, Math.ceil(((fact.bitOffset! % 8) + fact.bitSize) / 8), `${key} size`);
        } else {
          assert.equal(member.offset, fact.offset, `${key} offset`);
          assert.equal(member.size, fact.size, `${key} size`);
          assert.equal(member.bitOffset, fact.offset! * 8);
          assert.equal(member.bitSize, 0);
        }
        const array = facts.arrays.get(key);
        assert.equal(member.arrayLength, array?.count, `${key} count`);
        assert.equal(member.elementSize, array?.elementSize, `${key} element size`);
      }
    }
    const sample = structLayout(btf, "sample");
    const byName = (name: string) => sample.members.find((m) => m.name === name)!;
    assert.equal(byName("sample_kind").typeName, "sample_kind_t");
    assert.equal(byName("pair").typeName, "struct (anon)");
    assert.equal(byName("matrix").typeName, "u64[2][3]");
  },
}));

Deno.test(requiring([compiler], {
  name: "enumValues() agrees with the C compiler, also through a typedef of an anonymous enum",
  fn: async () => {
    const [btf, facts] = await Promise.all([
      compileBtf(["layout_fixture.bpf.c"]).then(parseBtf),
      hostFacts(),
    ]);
    const seen = new Map<string, number>();
    for (const name of ["frame_marker", "http_status", "sample_kind_t"]) {
      for (const [enumerator, value] of enumValues(btf, name)) seen.set(enumerator, value);
    }
    assert.deepEqual([...seen].sort(), [...facts.enumerators].sort());
    assert.deepEqual([...enumValues(btf, "frame_marker").keys()], [
      "FRAME_MARKER_UNKNOWN",
      "FRAME_MARKER_NATIVE",
      "FRAME_MARKER_INTERPRETED",
      "FRAME_MARKER_KERNEL_CODE",
    ]);
  },
}));

Deno.test(requiring([compiler], {
  name: "allEnumerators() finds constants of an anonymous enum the compiler emitted",
  fn: async () => {
    const btf = parseBtf(await compileBtf(["layout_fixture.bpf.c"]));
    const all = allEnumerators(btf);
    assert.deepEqual(all.get("FIXTURE_MAX_FRAMES"), [4]);
    assert.deepEqual(all.get("FIXTURE_COMM_LEN"), [16]);
    assert.equal(enumeratorValue(btf, "FRAME_MARKER_NATIVE"), 3);
    // Declared, but nothing refers to it, so clang leaves it out.
    assert.equal(all.has("UNREFERENCED_CONSTANT"), false);
    assert.throws(
      () => enumeratorValue(btf, "UNREFERENCED_CONSTANT"),
      /Cannot find enumerator UNREFERENCED_CONSTANT/,
    );
  },
}));

Deno.test(requiring([compiler], {
  name: "structLayout() and enumValues() name the type they cannot find or trust",
  fn: async () => {
    const btf = parseBtf(await compileBtf(["layout_fixture.bpf.c"]));
    assert.throws(
      () => structLayout(btf, "no_such_struct"),
      /^Error: Cannot find struct no_such_struct in the BTF/,
    );
    assert.throws(() => enumValues(btf, "no_such_enum"), /^Error: Cannot find enum no_such_enum in the BTF/);
    assert.throws(() => structLayout(btf, "frame_marker"), /Cannot find struct frame_marker/);
    const probe = parseBtf(await compileBtf(["emission_probe.bpf.c"]));
    const [wide] = probe.findByName("wide", BtfKind.Enum, BtfKind.Enum64);
    if (probe.kind(wide!) === BtfKind.Enum) {
      assert.throws(() => enumValues(probe, "wide"), /Cannot use enum wide: it is an 8-byte ENUM/);
    } else {
      assert.equal(enumValues(probe, "wide").get("WIDE_BIG"), 0x100000002);
    }
  },
}));

Deno.test(requiring([linker], {
  name: "bitcode linking keeps the BTF of every unit and structLayout() sees through duplicates",
  fn: async () => {
    const btf = parseBtf(await compileBtf(["link_a.bpf.c", "link_b.bpf.c"], { linkBitcode: true }));
    assert.deepEqual([...enumValues(btf, "only_in_a")], [["ONLY_IN_A_VALUE", 1]]);
    assert.deepEqual([...enumValues(btf, "only_in_b")], [["ONLY_IN_B_VALUE", 2]]);
    for (const func of ["prog_a", "prog_b", "from_b"]) {
      assert.equal(btf.findByName(func, BtfKind.Func).length, 1, func);
    }
    // Each unit brings its own copy of the shared types.
    assert.equal(btf.findByName("shared_s", BtfKind.Struct).length, 2);
    const shared = structLayout(btf, "shared_s");
    assert.equal(shared.size, 16);
    assert.deepEqual(shared.members.map((m) => [m.name, m.offset, m.size]), [["kind", 0, 4], [
      "value",
      8,
      8,
    ]]);
    assert.deepEqual([...enumValues(btf, "shared_kind").values()], [1, 2]);
    assert.throws(
      () => structLayout(btf, "clash_s"),
      /Cannot choose between the 2 different definitions of struct clash_s/,
    );
  },
}));

Deno.test(requiring([compiler], {
  name: "structLayoutOf() on damaged BTF throws nothing but Errors that say Cannot",
  fn: async () => {
    const good = await compileBtf(["layout_fixture.bpf.c"]);
    let laidOut = 0;
    for (let offset = 0; offset < good.length; offset++) {
      for (const value of [0x00, 0x01, 0x7f, 0xff]) {
        const copy = good.slice();
        copy[offset] = value;
        let btf: Btf;
        try {
          btf = parseBtf(copy);
        } catch {
          continue;
        }
        for (const id of btf.idsOfKind(BtfKind.Struct, BtfKind.Union)) {
          try {
            structLayoutOf(btf, id);
            laidOut++;
          } catch (e) {
            assert(e instanceof Error && e.message.startsWith("Cannot "), String(e));
          }
        }
        for (const id of btf.idsOfKind(BtfKind.Enum, BtfKind.Enum64)) {
          const name = btf.name(id);
          if (name === "") continue;
          try {
            enumValues(btf, name);
          } catch (e) {
            assert(e instanceof Error && e.message.startsWith("Cannot "), String(e));
          }
        }
      }
    }
    assert(laidOut > 0);
  },
}));

/** Offsets and sizes of `members` of `struct` as pahole prints them from the kernel BTF. */
async function paholeMembers(struct: string, members: string[]): Promise<Map<string, [number, number]>> {
  const text = await run("pahole", ["-F", "btf", "-C", struct, VMLINUX_BTF_PATH]);
  const result = new Map<string, [number, number]>();
  for (const line of text.split("\n")) {
    // e.g. "	pid_t                      pid;                  /*  1264     4 */"
    const match = /[\s*](\w+)(?:\[\d+\])*;\s*\/\*\s*(\d+)\s+(\d+)\s*\*\//.exec(line);
    if (match !== null && members.includes(match[1]!)) {
      result.set(match[1]!, [Number(match[2]), Number(match[3])]);
    }
  }
  return result;
}

/** Offsets of the direct `members` of `struct` as bpftool prints them from the kernel BTF. */
async function bpftoolMembers(struct: string, members: string[]): Promise<Map<string, [number, number]>> {
  const text = await run("bpftool", ["btf", "dump", "file", VMLINUX_BTF_PATH, "format", "raw"]);
  const start = text.indexOf(`] STRUCT '${struct}' `);
  assert(start >= 0, `bpftool lists no struct ${struct}`);
  const result = new Map<string, [number, number]>();
  for (const line of text.slice(start).split("\n").slice(1)) {
    const match = /^\t'(\w+)' type_id=\d+ bits_offset=(\d+)$/.exec(line);
    if (match === null) {
      if (!line.startsWith("\t")) break;
      continue;
    }
    // bpftool gives no member sizes; -1 marks "not compared".
    if (members.includes(match[1]!)) result.set(match[1]!, [Number(match[2]) / 8, -1]);
  }
  return result;
}

/** The members of the running kernel's structs that omniprof reads. */
const KERNEL_MEMBERS: Record<string, string[]> = {
  task_struct: ["pid", "tgid", "stack"],
  pt_regs: ["ip", "sp", "bp"],
};

Deno.test(requiring([vmlinux], {
  name: "structLayout() lays out task_struct and pt_regs of the running kernel",
  fn: async () => {
    const btf = parseBtf(await Deno.readFile(VMLINUX_BTF_PATH));
    for (const [struct, names] of Object.entries(KERNEL_MEMBERS)) {
      const layout = structLayout(btf, struct);
      const members = new Map<string, MemberLayout>(layout.members.map((m) => [m.name, m]));
      for (const name of names) {
        const member = members.get(name);
        assert(member !== undefined, `${struct}.${name}`);
        assert(member.offset + member.size <= layout.size);
        assert.equal(member.size, 8 - (name === "pid" || name === "tgid" ? 4 : 0), `${struct}.${name} size`);
      }
    }
  },
}));

// pahole (which bootstrap installs for the tests) or bpftool reads the same BTF with code of its own.
const reference = hasTool("pahole") ? "pahole" : hasTool("bpftool") ? "bpftool" : undefined;

Deno.test(requiring([vmlinux, reference ? optional(null) : programs("pahole")], {
  name: `structLayout() of the running kernel's task_struct and pt_regs agrees with ${reference ?? "pahole"}`,
  fn: async () => {
    const btf = parseBtf(await Deno.readFile(VMLINUX_BTF_PATH));
    for (const [struct, names] of Object.entries(KERNEL_MEMBERS)) {
      const layout = structLayout(btf, struct);
      const members = new Map<string, MemberLayout>(layout.members.map((m) => [m.name, m]));
      const expected = reference === "pahole"
        ? await paholeMembers(struct, names)
        : await bpftoolMembers(struct, names);
      for (const name of names) {
        const fact = expected.get(name);
        assert(fact !== undefined, `${reference} shows no ${struct}.${name}`);
        const member = members.get(name);
        assert(member !== undefined, `${struct}.${name}`);
        assert.equal(member.offset, fact[0], `${struct}.${name} offset per ${reference}`);
        if (fact[1] >= 0) assert.equal(member.size, fact[1], `${struct}.${name} size per ${reference}`);
      }
    }
  },
}));

Deno.test(requiring([vmlinux], {
  name: "structLayout() flattens the kernel's anonymous unions as C code names them",
  fn: async () => {
    const btf = parseBtf(await Deno.readFile(VMLINUX_BTF_PATH));
    const regs = structLayout(btf, "pt_regs");
    const [id] = btf.findByName("pt_regs", BtfKind.Struct);
    const direct = btf.type(id as BtfTypeId);
    assert(direct.kind === BtfKind.Struct);
    // Every named direct member appears, and no anonymous one does.
    for (const m of direct.members) {
      if (m.name !== "") assert(regs.members.some((r) => r.name === m.name), m.name);
    }
    assert(regs.members.every((m) => m.name !== ""));
    assert(regs.members.length >= direct.members.length);
  },
}));
