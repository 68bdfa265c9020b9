import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { optional, programs, requiring } from "../../testing/requirements.ts";
import { RemoteMemory } from "../remote_memory.ts";
import { asPid } from "../../types.ts";
import { clhsdb, installedJdks, startJvm, type TestJdk } from "./test_jvm.ts";
import {
  MAX_ENTRIES,
  VmStructs,
  VmStructsError,
  type VmStructsSymbols,
  vmStructsSymbols,
} from "./vm_structs.ts";

/** What `jhsdb clhsdb`'s `vmstructsdump` lists: types with their sizes, and non-static fields. */
interface Dump {
  sizes: Map<string, number>;
  fields: Map<string, { typeString: string | null; offset: number }>;
}

/**
 * Runs the JDK's own debugger (the Serviceability Agent, which reads the same tables by ptrace) on `pid`:
 * `type NAME SUPERCLASS OOP? INTEGER? UNSIGNED? SIZE` and `field TYPE NAME TYPESTRING STATIC? OFFSET ADDRESS`.
 */
async function vmStructsDump(jdk: TestJdk, pid: number): Promise<Dump> {
  const text = await clhsdb(jdk, pid, ["vmstructsdump"]);
  const sizes = new Map<string, number>();
  const fields = new Map<string, { typeString: string | null; offset: number }>();
  for (const raw of text.split("\n")) {
    const line = raw.replace(/^hsdb> /, "");
    // A type's name may have spaces (`"unsigned int"`, quoted); what follows it does not.
    const type = /^type (.+) \S+ (?:true|false) (?:true|false) (?:true|false) (-?\d+)$/.exec(line);
    if (type) sizes.set(type[1]!.replace(/^"(.*)"$/, "$1"), Number(type[2]));
    const field = /^field (\S+) (\S+) (.+) false (\d+) 0x0$/.exec(line);
    if (field) {
      // jhsdb names a field the tables give no type `<opaque>`.
      const typeString = field[3] === "<opaque>" ? null : field[3]!.replace(/^"(.*)"$/, "$1");
      fields.set(`${field[1]}.${field[2]}`, { typeString, offset: Number(field[4]) });
    }
  }
  assert.ok(sizes.size > 100 && fields.size > 100, `jhsdb listed ${sizes.size} types, ${fields.size} fields`);
  return { sizes, fields };
}

const jdks = installedJdks();

for (const jdk of jdks) {
  Deno.test(requiring([programs("javac")], {
    name:
      `VmStructs reads every type size and field offset of a JDK ${jdk.release} JVM as its own debugger does`,
    fn: () => checkAgainstDebugger(jdk),
  }));
}
if (jdks.length === 0) {
  Deno.test(requiring([optional("no JDK with java and jhsdb under /usr/lib/jvm")], {
    name: "VmStructs reads every type size and field offset of a JVM as its own debugger does",
    fn: () => {
      throw new Error("unreachable: ignored without a JDK");
    },
  }));
}

async function checkAgainstDebugger(jdk: TestJdk): Promise<void> {
  {
    await using jvm = await startJvm("Chain", ["30"], { jdk });
    using elf = ElfFile.open(jvm.libjvm);
    const symbols = vmStructsSymbols(elf);
    assert.ok(symbols, `${jvm.libjvm} exports the tables`);
    using memory = RemoteMemory.open(jvm.pid, { cachePages: 256 });
    const started = performance.now();
    const vm = VmStructs.read(memory, symbols, jvm.bias);
    const ms = performance.now() - started;
    const counts = vm.counts;
    console.log(
      `${counts.fields} fields of ${counts.fieldTypes} types, ${counts.types} sizes, ${counts.constants} ` +
        `constants in ${ms.toFixed(1)} ms, ${memory.stats.syscalls} reads`,
    );

    const dump = await vmStructsDump(jdk, jvm.pid);
    // jhsdb adds types of its own for those the tables only name: pointers (`Method*`, size 8),
    // qualified ones (`volatile signed char`, the size of `signed char`) and declared-only types (size
    // -1). Every other type it lists is in the tables, with the same size.
    let same = 0;
    for (const [type, size] of dump.sizes) {
      const read = vm.size(type);
      if (read === null) {
        const unqualified = vm.size(type.replace(/^volatile /, "").replace(/ ?const$/, ""));
        assert.ok(/\*/.test(type) || size === -1 || unqualified === size, `${type} (size ${size}) not read`);
        continue;
      }
      assert.equal(read, size, `size of ${type}`);
      same++;
    }
    assert.equal(same, counts.types, "every type read is one jhsdb lists");
    for (const [key, expected] of dump.fields) {
      const dot = key.indexOf(".");
      const type = key.slice(0, dot);
      // The fields of a template class jhsdb made up for a pointer type (`GrowableArray<InlineTree*>`).
      if (vm.size(type) === null && /\*/.test(type)) continue;
      const field = vm.field(type, key.slice(dot + 1));
      assert.ok(field, `${key} read`);
      // jhsdb prints a field's type without `const` (`const size_t`, `JVMState* const`).
      const typeString = field.typeString?.replace(/^const /, "").replace(/ const$/, "") ?? null;
      assert.deepEqual({ ...field, typeString }, { ...expected, address: null }, key);
    }
    // Static fields, which jhsdb does not list: these classes have only static ones, in libjvm.so's data.
    for (const type of ["CodeCache", "Universe", "Abstract_VM_Version"]) {
      const fields = vm.fieldsOf(type);
      assert.ok(fields.size > 0, `${type} has fields`);
      for (const [name, field] of fields) {
        assert.ok(field.address !== null, `${type}.${name} is static`);
        const inData = elf.loadSegments.some((s) =>
          field.address! >= s.vaddr && field.address! < s.vaddr + s.memsz && (s.flags & 2) !== 0
        );
        assert.ok(inData, `${type}.${name} at 0x${field.address.toString(16)} is in a writable segment`);
      }
    }
    // Constants whose values the class file format fixes (JVMS 4.4: constant pool tags; T_INT is
    // the newarray code 10), and the identity hash's 31-bit mask.
    assert.equal(vm.intConstant("JVM_CONSTANT_Utf8"), 1);
    assert.equal(vm.intConstant("JVM_CONSTANT_Methodref"), 10);
    assert.equal(vm.intConstant("T_INT"), 10);
    assert.equal(vm.longConstant("markWord::hash_mask"), 0x7fffffffn);
  }
}

Deno.test("vmStructsSymbols passes over a file that exports none of the tables", () => {
  using elf = ElfFile.open(Deno.execPath());
  assert.equal(vmStructsSymbols(elf), null);
});

/**
 * Tables laid out as libjvm.so lays them out, in this process's own memory (read through /proc/self/mem,
 * bias 0): a field table with `fields` entries (TYPE, FIELD, TYPESTRING, STATIC, OFFSET, ADDRESS), a type
 * table, one int and one long constant. `edit` changes the words before they are read.
 */
class SyntheticTables {
  readonly memory = new Uint8Array(new ArrayBuffer(4 << 20));
  readonly view = new DataView(this.memory.buffer);
  readonly base = Number(Deno.UnsafePointer.value(Deno.UnsafePointer.of(this.memory)!));
  readonly symbols = new Map<string, number>();
  #next = 0;

  constructor(fields: [string, string, string | null, boolean, number, number][], entries = fields.length) {
    const variable = (name: string, value: number) => {
      const at = this.#alloc(8);
      this.view.setBigUint64(at - this.base, BigInt(value), true);
      this.symbols.set(name, at);
    };
    const table = (prefix: string, array: string, stride: number, columns: Record<string, number>) => {
      variable(`${prefix}ArrayStride`, stride);
      for (const [column, offset] of Object.entries(columns)) variable(`${prefix}${column}Offset`, offset);
      return (count: number, fill: (entry: number, i: number) => void) => {
        const start = this.#alloc(stride * (count + 1));
        for (let i = 0; i < count; i++) fill(start + i * stride - this.base, i);
        variable(array, start);
      };
    };
    const fieldRows = table("gHotSpotVMStructEntry", "gHotSpotVMStructs", 48, {
      TypeName: 0,
      FieldName: 8,
      TypeString: 16,
      IsStatic: 24,
      Offset: 32,
      Address: 40,
    });
    fieldRows(entries, (at, i) => {
      const [type, field, typeString, isStatic, offset, address] = fields[i % fields.length]!;
      this.#pointer(at, this.string(type));
      this.#pointer(at + 8, this.string(field));
      this.#pointer(at + 16, typeString === null ? 0 : this.string(typeString));
      this.view.setUint32(at + 24, isStatic ? 1 : 0, true);
      this.view.setBigUint64(at + 32, BigInt(offset), true);
      this.#pointer(at + 40, address);
    });
    table("gHotSpotVMTypeEntry", "gHotSpotVMTypes", 48, {
      TypeName: 0,
      SuperclassName: 8,
      IsOopType: 16,
      IsIntegerType: 20,
      IsUnsigned: 24,
      Size: 32,
    })(2, (at, i) => {
      this.#pointer(at, this.string(["Base", "Derived"][i]!));
      this.#pointer(at + 8, i === 0 ? 0 : this.string("Base"));
      this.view.setBigUint64(at + 32, BigInt([16, 24][i]!), true);
    });
    table("gHotSpotVMIntConstantEntry", "gHotSpotVMIntConstants", 16, { Name: 0, Value: 8 })(1, (at) => {
      this.#pointer(at, this.string("answer"));
      this.view.setInt32(at + 8, -42, true);
    });
    table("gHotSpotVMLongConstantEntry", "gHotSpotVMLongConstants", 16, { Name: 0, Value: 8 })(1, (at) => {
      this.#pointer(at, this.string("mask"));
      this.view.setBigUint64(at + 8, 0xffffffffffffffffn, true);
    });
  }

  /** The address of a NUL-terminated copy of `text`. */
  string(text: string): number {
    const bytes = new TextEncoder().encode(`${text}\0`);
    const at = this.#alloc(bytes.length);
    this.memory.set(bytes, at - this.base);
    return at;
  }

  setWord(symbol: string, value: number): void {
    this.view.setBigUint64(this.symbols.get(symbol)! - this.base, BigInt(value), true);
  }

  read(): VmStructs {
    using memory = RemoteMemory.open(asPid(Deno.pid), { cachePages: 0 });
    return VmStructs.read(memory, this.symbols as VmStructsSymbols, 0);
  }

  #pointer(at: number, address: number): void {
    this.view.setBigUint64(at, BigInt(address), true);
  }

  #alloc(bytes: number): number {
    const at = this.base + this.#next;
    this.#next += Math.ceil(bytes / 8) * 8;
    if (this.#next > this.memory.length) throw new Error("synthetic tables too large");
    return at;
  }
}

const FIELDS: [string, string, string | null, boolean, number, number][] = [
  ["Base", "_first", "int", false, 8, 0],
  ["Derived", "_second", null, false, 16, 0],
  ["Base", "_global", "Base*", true, 0, 0x1234000],
];

Deno.test("VmStructs reads fields, sizes, superclasses and constants as libjvm.so lays them out", () => {
  const tables = new SyntheticTables(FIELDS);
  const vm = tables.read();
  assert.deepEqual(vm.field("Base", "_first"), { typeString: "int", offset: 8, address: null });
  assert.deepEqual(vm.field("Derived", "_second"), { typeString: null, offset: 16, address: null });
  // Inherited through the superclass the type table names; statics keep their address (less the bias).
  assert.deepEqual(vm.field("Derived", "_first"), { typeString: "int", offset: 8, address: null });
  assert.deepEqual(vm.field("Base", "_global"), { typeString: "Base*", offset: 0, address: 0x1234000 });
  assert.equal(vm.field("Base", "_second"), null);
  assert.equal(vm.size("Derived"), 24);
  assert.equal(vm.superclass("Derived"), "Base");
  assert.equal(vm.intConstant("answer"), -42);
  assert.equal(vm.longConstant("mask"), 0xffffffffffffffffn);
  assert.deepEqual(vm.counts, { fieldTypes: 2, fields: 3, types: 2, constants: 2 });
});

Deno.test("VmStructs refuses a stride not yet set, a column outside it, a bad pointer and a table without end", () => {
  const unset = new SyntheticTables(FIELDS);
  unset.setWord("gHotSpotVMStructEntryArrayStride", 0);
  assert.throws(() => unset.read(), /gHotSpotVMStructEntryArrayStride is 0 \(has the JVM started\?\)/);

  const outside = new SyntheticTables(FIELDS);
  outside.setWord("gHotSpotVMStructEntryAddressOffset", 44);
  assert.throws(() => outside.read(), VmStructsError);

  const kernel = new SyntheticTables(FIELDS);
  kernel.setWord("gHotSpotVMTypes", 0xffffffff81000000);
  assert.throws(() => kernel.read(), VmStructsError);

  const endless = new SyntheticTables(FIELDS, MAX_ENTRIES + 1);
  assert.throws(() => endless.read(), /does not end within 32768 entries/);
});

Deno.test("VmStructs follows a loop of superclasses no further than its bound", () => {
  const tables = new SyntheticTables(FIELDS);
  // Base's superclass becomes Derived: Derived -> Base -> Derived -> ...
  const types = tables.symbols.get("gHotSpotVMTypes")!;
  const array = Number(tables.view.getBigUint64(types - tables.base, true));
  tables.view.setBigUint64(array - tables.base + 8, BigInt(tables.string("Derived")), true);
  const vm = tables.read();
  assert.equal(vm.field("Derived", "_missing"), null);
  assert.deepEqual(vm.field("Derived", "_first"), { typeString: "int", offset: 8, address: null });
});
