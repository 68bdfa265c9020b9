import assert from "node:assert/strict";
import { type Btf, BtfKind, type BtfType, type BtfTypeId, kindName, parseBtf } from "./btf.ts";
import { allEnumerators } from "./layout.ts";
import { VMLINUX_BTF_PATH } from "./kernel_btf.ts";
import {
  clangMajorVersion,
  compileBtf,
  compileTools,
  kernelBtf,
  run,
  TESTDATA_DIR,
  withTempFile,
} from "./testdata/compile.ts";
import { programs, requiring } from "../testing/requirements.ts";

const vmlinux = kernelBtf();
const compiler = programs(...compileTools());
const bpftool = programs("bpftool");

/** Renders type `id` the way `bpftool btf dump ... format raw` does, to compare decoders line by line. */
function formatLikeBpftool(btf: Btf, t: BtfType): string {
  const q = (name: string) => `'${name === "" ? "(anon)" : name}'`;
  const linkage = (l: number) => ["static", "global", "extern"][l] ?? "(unknown)";
  let text = `[${t.id}] ${kindName(t.kind)} ${q(t.name)}`;
  switch (t.kind) {
    case BtfKind.Int: {
      const flags = (t.signed ? 1 : 0) + (t.char ? 2 : 0) + (t.bool ? 4 : 0);
      const encoding = ["(none)", "SIGNED", "CHAR", "UNKN", "BOOL"][flags] ?? "UNKN";
      return `${text} size=${t.size} bits_offset=${t.bitOffset} nr_bits=${t.bits} encoding=${encoding}`;
    }
    case BtfKind.Ptr:
    case BtfKind.Typedef:
    case BtfKind.Volatile:
    case BtfKind.Const:
    case BtfKind.Restrict:
    case BtfKind.TypeTag:
      return `${text} type_id=${t.type}`;
    case BtfKind.Array:
      return `${text} type_id=${t.elementType} index_type_id=${t.indexType} nr_elems=${t.count}`;
    case BtfKind.Struct:
    case BtfKind.Union:
      text += ` size=${t.size} vlen=${t.members.length}`;
      for (const m of t.members) {
        text += `\n\t${q(m.name)} type_id=${m.type} bits_offset=${m.bitOffset}`;
        if (m.bitSize !== 0) text += ` bitfield_size=${m.bitSize}`;
      }
      return text;
    case BtfKind.Enum:
    case BtfKind.Enum64: {
      text += ` encoding=${t.signed ? "SIGNED" : "UNSIGNED"} size=${t.size} vlen=${t.enumerators.length}`;
      const suffix = t.kind === BtfKind.Enum ? "" : t.signed ? "LL" : "ULL";
      for (const e of t.enumerators) text += `\n\t${q(e.name)} val=${e.value}${suffix}`;
      return text;
    }
    case BtfKind.Fwd:
      return `${text} fwd_kind=${t.union ? "union" : "struct"}`;
    case BtfKind.Func:
      return `${text} type_id=${t.type} linkage=${linkage(t.linkage)}`;
    case BtfKind.FuncProto:
      text += ` ret_type_id=${t.returnType} vlen=${t.params.length}`;
      for (const p of t.params) text += `\n\t${q(p.name)} type_id=${p.type}`;
      return text;
    case BtfKind.Var:
      return `${text} type_id=${t.type}, linkage=${linkage(t.linkage)}`;
    case BtfKind.Datasec:
      text += ` size=${t.size} vlen=${t.vars.length}`;
      for (const v of t.vars) {
        text += `\n\ttype_id=${v.type} offset=${v.offset} size=${v.size} ` +
          `(${kindName(btf.kind(v.type))} ${q(btf.name(v.type))})`;
      }
      return text;
    case BtfKind.Float:
      return `${text} size=${t.size}`;
    case BtfKind.DeclTag:
      return `${text} type_id=${t.type} component_idx=${t.componentIndex}`;
    case BtfKind.Void:
      return text;
  }
}

/** Asserts that our decoding of every type of `btf` prints exactly as bpftool prints the blob in `file`. */
async function assertMatchesBpftool(btf: Btf, file: string): Promise<void> {
  const expected = (await run("bpftool", ["btf", "dump", "file", file, "format", "raw"])).trimEnd().split(
    "\n",
  );
  const actual: string[] = [];
  for (let id = 1; id < btf.typeCount; id++) {
    actual.push(...formatLikeBpftool(btf, btf.type(id as BtfTypeId)).split("\n"));
  }
  for (let i = 0; i < Math.max(expected.length, actual.length); i++) {
    if (expected[i] !== actual[i]) assert.equal(actual[i], expected[i], `line ${i + 1} of the dump differs`);
  }
}

Deno.test(requiring([vmlinux], {
  name: "parseBtf() parses the kernel's BTF fast",
  fn: async () => {
    const bytes = await Deno.readFile(VMLINUX_BTF_PATH);
    const times: number[] = [];
    let btf: Btf | undefined;
    for (let i = 0; i < 5; i++) {
      const start = performance.now();
      btf = parseBtf(bytes);
      times.push(performance.now() - start);
    }
    assert(btf !== undefined);
    console.log(
      `Parsed ${bytes.length} bytes of kernel BTF (${btf.typeCount - 1} types): ` +
        `first ${times[0]!.toFixed(1)} ms, best ${Math.min(...times).toFixed(1)} ms`,
    );
    assert(btf.typeCount > 10_000, `only ${btf.typeCount} types`);
    assert(btf.littleEndian);
    // Generous bound: the target is well under 300 ms even on a loaded 2-core machine.
    assert(times[0]! < 1000, `parsing took ${times[0]} ms`);
    const [taskStruct] = btf.findByName("task_struct", BtfKind.Struct);
    assert(taskStruct !== undefined);
    assert.equal(btf.typeName(taskStruct), "struct task_struct");
  },
}));

Deno.test(requiring([vmlinux, bpftool], {
  name: "type() decodes every kernel type as bpftool does",
  fn: async () => {
    await assertMatchesBpftool(parseBtf(await Deno.readFile(VMLINUX_BTF_PATH)), VMLINUX_BTF_PATH);
  },
}));

Deno.test(requiring([compiler, bpftool], {
  name: "type() decodes every type of compiled BPF objects as bpftool does",
  fn: async () => {
    for (const source of ["layout_fixture.bpf.c", "emission_probe.bpf.c"]) {
      const bytes = await compileBtf([source]);
      await withTempFile(bytes, (file) => assertMatchesBpftool(parseBtf(bytes), file));
    }
  },
}));

Deno.test(requiring([compiler], {
  name: "parseBtf() reads big-endian BTF as it reads little-endian BTF",
  fn: async () => {
    const little = parseBtf(await compileBtf(["layout_fixture.bpf.c"]));
    const big = parseBtf(await compileBtf(["layout_fixture.bpf.c"], { target: "bpfeb" }));
    assert.equal(little.littleEndian, true);
    assert.equal(big.littleEndian, false);
    assert.equal(big.typeCount, little.typeCount);
    for (let id = 0; id < little.typeCount; id++) {
      assert.deepEqual(big.type(id as BtfTypeId), little.type(id as BtfTypeId));
    }
  },
}));

Deno.test(requiring([compiler], {
  name: "findByName(), resolve(), sizeOf() and typeName() answer for a compiled struct",
  fn: async () => {
    const btf = parseBtf(await compileBtf(["layout_fixture.bpf.c"]));
    const [sample] = btf.findByName("sample", BtfKind.Struct);
    assert(sample !== undefined);
    assert.deepEqual(btf.findByName("sample", BtfKind.Union), []);
    assert.deepEqual(btf.findByName("no_such_type"), []);
    const t = btf.type(sample);
    assert(t.kind === BtfKind.Struct);
    const member = (name: string) => {
      const found = t.members.find((m) => m.name === name);
      assert(found !== undefined, name);
      return found.type;
    };
    assert.equal(btf.typeName(member("comm")), "char[16]");
    assert.equal(btf.typeName(member("matrix")), "u64[2][3]");
    assert.equal(btf.typeName(member("context")), "void *");
    assert.equal(btf.typeName(member("generation")), "const volatile u32");
    assert.equal(btf.typeName(member("frames")), "struct frame[4]");
    assert.equal(btf.sizeOf(member("matrix")), 48);
    assert.equal(btf.sizeOf(member("generation")), 4);
    assert.equal(btf.kind(btf.resolve(member("generation"))), BtfKind.Int);
    assert.equal(btf.name(btf.resolve(member("sample_kind"))), "");
    assert.throws(() => btf.sizeOf(0 as BtfTypeId), RangeError);
    assert.throws(() => btf.type(btf.typeCount as BtfTypeId), /Cannot read BTF type/);
  },
}));

Deno.test(requiring([compiler], {
  name: "clang emits into .BTF exactly the probe's types marked emitted",
  fn: async () => {
    const source = await Deno.readTextFile(TESTDATA_DIR + "emission_probe.bpf.c");
    const btf = parseBtf(await compileBtf(["emission_probe.bpf.c"]));
    const kinds = { enum: [BtfKind.Enum, BtfKind.Enum64], struct: [BtfKind.Struct] };
    const probes = new Map<string, "enum" | "struct">();
    for (const match of source.matchAll(/\b(enum|struct) ((?:emitted|dropped)_\w+)/g)) {
      probes.set(match[2]!, match[1] as "enum" | "struct");
    }
    assert(probes.size >= 15, `only ${probes.size} probes found`);
    for (const [name, keyword] of probes) {
      const found = btf.findByName(name, ...kinds[keyword]).length > 0;
      assert.equal(found, name.startsWith("emitted_"), `${keyword} ${name}`);
    }
    const enumerators = allEnumerators(btf);
    const constants = new Set([...source.matchAll(/\b(?:EMITTED|DROPPED)_\w+/g)].map((m) => m[0]));
    assert(constants.size >= 5);
    for (const name of constants) {
      assert.equal(
        enumerators.has(name) || btf.findByName(name).length > 0,
        name.startsWith("EMITTED_"),
        name,
      );
    }
  },
}));

Deno.test(requiring([compiler], {
  name: "clang stores negative and 64-bit enumerators as the BTF of its version allows",
  fn: async () => {
    const btf = parseBtf(await compileBtf(["emission_probe.bpf.c"]));
    const decode = (name: string) => {
      const [id] = btf.findByName(name, BtfKind.Enum, BtfKind.Enum64);
      assert(id !== undefined, name);
      const t = btf.type(id);
      assert(t.kind === BtfKind.Enum || t.kind === BtfKind.Enum64);
      return t;
    };
    const negative = decode("negative");
    const wide = decode("wide");
    if (await clangMajorVersion() < 15) {
      // No signed enums and no ENUM64: values are reduced to unsigned 32 bits.
      assert.deepEqual(negative.enumerators.map((e) => e.value), [0xffffffff, 2]);
      assert.equal(wide.kind, BtfKind.Enum);
      assert.equal(wide.size, 8);
      assert.deepEqual(wide.enumerators.map((e) => e.value), [1, 2]);
    } else {
      assert.deepEqual(negative.enumerators.map((e) => e.value), [-1, 2]);
      assert.equal(wide.kind, BtfKind.Enum64);
      assert.deepEqual(wide.enumerators.map((e) => e.value), [1, 0x100000002]);
    }
  },
}));

Deno.test(requiring([compiler], {
  name: "parseBtf() explains what is wrong with a damaged blob",
  fn: async () => {
    const good = await compileBtf(["layout_fixture.bpf.c"]);
    const damaged = (offset: number, value: number) => {
      const copy = good.slice();
      copy[offset] = value;
      return copy;
    };
    const view = new DataView(good.buffer, good.byteOffset, good.byteLength);
    const strEnd = view.getUint32(4, true) + view.getUint32(16, true) + view.getUint32(20, true);
    assert.throws(() => parseBtf(good.subarray(0, 10)), /^RangeError: Cannot parse BTF: 10 bytes is shorter/);
    assert.throws(() => parseBtf(damaged(0, 0)), /Cannot parse BTF: bad magic/);
    assert.throws(() => parseBtf(damaged(2, 2)), /Cannot parse BTF: unsupported version 2/);
    assert.throws(() => parseBtf(good.subarray(0, good.length - 1)), /Cannot parse BTF: .*section/);
    assert.throws(() => parseBtf(damaged(strEnd - 1, 0x41)), /does not end with NUL/);
  },
}));

Deno.test(requiring([compiler], {
  name: "parseBtf() gives a Btf or a RangeError for truncated and bit-flipped blobs",
  fn: async () => {
    const good = await compileBtf(["layout_fixture.bpf.c"]);
    let parsed = 0;
    let rejected = 0;
    const attempt = (bytes: Uint8Array) => {
      let btf: Btf;
      try {
        btf = parseBtf(bytes);
      } catch (e) {
        assert(e instanceof RangeError && e.message.startsWith("Cannot parse BTF: "), String(e));
        rejected++;
        return;
      }
      parsed++;
      // Whatever parsed must answer every query, or refuse with a RangeError of our own.
      for (let id = 0; id < btf.typeCount; id++) {
        const typeId = id as BtfTypeId;
        btf.type(typeId);
        btf.typeName(typeId);
        for (const query of [() => btf.sizeOf(typeId), () => btf.resolve(typeId)]) {
          try {
            query();
          } catch (e) {
            assert(e instanceof RangeError && e.message.startsWith("Cannot "), String(e));
          }
        }
      }
      btf.findByName("sample");
    };
    for (let length = 0; length < good.length; length++) attempt(good.subarray(0, length));
    for (let offset = 0; offset < good.length; offset++) {
      for (let bit = 0; bit < 8; bit++) {
        const copy = good.slice();
        copy[offset]! ^= 1 << bit;
        attempt(copy);
      }
      const copy = good.slice();
      copy[offset] = 0xff;
      attempt(copy);
    }
    console.log(`Damaged BTF: ${parsed} blobs parsed, ${rejected} rejected`);
    assert(parsed > 0 && rejected > 0);
  },
}));
