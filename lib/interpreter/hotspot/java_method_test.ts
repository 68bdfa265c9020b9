import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { optional, programs, requiring } from "../../testing/requirements.ts";
import { RemoteMemory } from "../remote_memory.ts";
import { readJdkVersion } from "./jdk_version.ts";
import { javaMethodLayout, lineAt, readJavaMethod } from "./java_method.ts";
import { clhsdb, compileJava, installedJdks, startJvm, type TestJdk } from "./test_jvm.ts";
import { VmStructs, vmStructsSymbols } from "./vm_structs.ts";

/** A method as `javap -l -s -p` lists it: name, descriptor and LineNumberTable (in the file's order). */
interface JavapMethod {
  name: string;
  signature: string;
  lines: { bci: number; line: number }[];
}

/** The methods of class `name` in `classes`, and its source file, by the JDK's class file disassembler. */
async function javap(classes: string, name: string): Promise<{ sourceFile: string; methods: JavapMethod[] }> {
  const result = await new Deno.Command("javap", { args: ["-l", "-s", "-p", "-cp", classes, name] }).output();
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
  const text = new TextDecoder().decode(result.stdout);
  const methods: JavapMethod[] = [];
  let current: JavapMethod | null = null;
  for (const line of text.split("\n")) {
    // `  static void c(double);` or `  public Chain();` (a constructor: <init>).
    const declaration = /^ {2}\S.*?([\w$]+)\(.*\);$/.exec(line);
    if (declaration) {
      current = { name: declaration[1] === name ? "<init>" : declaration[1]!, signature: "", lines: [] };
      methods.push(current);
    }
    const descriptor = /^ {4}descriptor: (\(.*)$/.exec(line);
    if (descriptor && current) current.signature = descriptor[1]!;
    const entry = /^ {6}line (\d+): (\d+)$/.exec(line);
    if (entry && current) current.lines.push({ bci: Number(entry[2]), line: Number(entry[1]) });
  }
  const source = /^Compiled from "(.*)"$/m.exec(text);
  assert.ok(source && methods.length > 0, text);
  return { sourceFile: source[1]!, methods };
}

/** The address of class `name`'s InstanceKlass in `pid`, as the JDK's debugger finds it. */
async function klassAddress(jdk: TestJdk, pid: number, name: string): Promise<number> {
  const text = await clhsdb(jdk, pid, [`class ${name}`]);
  const found = new RegExp(`${name} @(0x[0-9a-f]+)`).exec(text);
  assert.ok(found, text);
  return Number(found[1]);
}

const jdks = installedJdks();

for (const jdk of jdks) {
  Deno.test(requiring([programs("javac", "javap")], {
    name:
      `readJavaMethod names a JDK ${jdk.release} JVM's methods with the descriptors and line tables javap lists`,
    async fn() {
      const classes = await compileJava("Chain");
      const expected = await javap(classes, "Chain");
      await using jvm = await startJvm("Chain", ["30"], { jdk });
      using elf = ElfFile.open(jvm.libjvm);
      using memory = RemoteMemory.open(jvm.pid, { cachePages: 256 });
      const vm = VmStructs.read(memory, vmStructsSymbols(elf)!, jvm.bias);
      const version = readJdkVersion(memory, vm, jvm.bias);
      // The release file of the JDK says the same version: JAVA_VERSION="17.0.15".
      const release = /^JAVA_VERSION="(\d+)(?:\.(\d+))?(?:\.(\d+))?/m.exec(
        Deno.readTextFileSync(`${jdk.home}/release`),
      )!;
      assert.deepEqual(
        [version.major, version.minor, version.security],
        [Number(release[1]), Number(release[2] ?? 0), Number(release[3] ?? 0)],
      );
      assert.ok(version.release.startsWith(release[1]!), version.release);
      const layout = javaMethodLayout(vm, version);

      // The class's methods: InstanceKlass._methods, an Array<Method*> (an int length, then the data).
      const klass = await klassAddress(jdk, jvm.pid, "Chain");
      const array = memory.pointer(klass + vm.field("InstanceKlass", "_methods")!.offset);
      const count = memory.i32(array);
      const data = vm.field("Array<Method*>", "_data")!.offset;
      assert.equal(count, expected.methods.length);
      const read = new Map<string, ReturnType<typeof readJavaMethod>>();
      for (let i = 0; i < count; i++) {
        const method = readJavaMethod(memory, layout, memory.pointer(array + data + 8 * i));
        read.set(method.name, method);
      }
      for (const method of expected.methods) {
        const got = read.get(method.name);
        assert.ok(got, `${method.name} read`);
        assert.equal(got.className, "Chain");
        assert.equal(got.signature, method.signature, method.name);
        assert.equal(got.sourceFile, expected.sourceFile);
        assert.deepEqual(got.lines, method.lines, `${method.name}'s line table`);
        // A bci takes the line of the last entry that starts at or before it (JVMS 4.7.12).
        const starts = [...method.lines].sort((a, b) => a.bci - b.bci);
        for (let bci = 0; bci < got.bytecodeSize; bci++) {
          const entry = starts.filter((e) => e.bci <= bci).at(-1);
          assert.equal(lineAt(got, bci), entry?.line ?? 0, `${method.name} bci ${bci}`);
        }
      }
      console.log(
        `JDK ${version.major}.${version.minor}.${version.security}+${version.build} (${version.release}): ` +
          `${count} methods of Chain as javap lists them`,
      );
    },
  }));
}
if (jdks.length === 0) {
  Deno.test(requiring([optional("no JDK with java and jhsdb under /usr/lib/jvm")], {
    name: "readJavaMethod names a JVM's methods with the descriptors and line tables javap lists",
    fn: () => {
      throw new Error("unreachable: ignored without a JDK");
    },
  }));
}
