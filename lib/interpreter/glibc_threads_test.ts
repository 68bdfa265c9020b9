import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { type Address, asPid } from "../types.ts";
import { findElfSymbols } from "./elf_symbols.ts";
import {
  readGlibcThreadLayout,
  readLinkMaps,
  readThreadId,
  readThreadSpecific,
  staticTlsOffset,
  verifyFirstBlock,
} from "./glibc_threads.ts";
import { findProcessLibraries, mappingBias } from "./process_libraries.ts";
import { openableMappings } from "../testing/process_mappings.ts";
import { RemoteMemory } from "./remote_memory.ts";
import { bootstrapped, requiring } from "../testing/requirements.ts";

const SYS_ARCH_PRCTL = 158;
const ARCH_GET_FS = 0x1003;
const SYS_GETTID = 186;

const lib = Deno.dlopen("libc.so.6", {
  pthread_self: { parameters: [], result: "u64" },
  pthread_key_create: { parameters: ["buffer", "pointer"], result: "i32" },
  pthread_key_delete: { parameters: ["u32"], result: "i32" },
  pthread_setspecific: { parameters: ["u32", "pointer"], result: "i32" },
  syscall: { parameters: ["i64", "i64", "buffer"], result: "i64" },
  __errno_location: { parameters: [], result: "pointer" },
});
globalThis.addEventListener("unload", () => lib.close());

const self = asPid(Deno.pid);
const libraries = findProcessLibraries(openableMappings(self));
const libcPath = libraries.libc?.path;
const isGlibc = (() => {
  if (libcPath === undefined) return false;
  using elf = ElfFile.open(libcPath);
  return readGlibcThreadLayout(elf) !== null;
})();
// Debian's C library; deno from npm is the glibc build.
const glibc = bootstrapped(isGlibc ? null : "this process's C library is not glibc");
const loader = bootstrapped(libraries.loader === null ? "this process maps no dynamic loader" : null);

function layout() {
  using elf = ElfFile.open(libcPath!);
  return readGlibcThreadLayout(elf)!;
}

function threadPointer(): Address {
  return Number(lib.symbols.pthread_self()) as Address;
}

Deno.test(requiring([glibc], {
  name: "pthread_self() is the thread pointer (the fs base BPF reads)",
  fn() {
    const out = new BigUint64Array(1);
    assert.equal(
      lib.symbols.syscall(BigInt(SYS_ARCH_PRCTL), BigInt(ARCH_GET_FS), new Uint8Array(out.buffer)),
      0n,
    );
    assert.equal(Number(out[0]), threadPointer());
  },
}));

Deno.test(requiring([glibc], {
  name: "readThreadId() reads the calling thread's kernel tid from struct pthread",
  fn() {
    using memory = RemoteMemory.open(self);
    const tid = Number(lib.symbols.syscall(BigInt(SYS_GETTID), 0n, new Uint8Array(8)));
    assert.equal(readThreadId(memory, layout(), threadPointer()), tid);
  },
}));

Deno.test(requiring([glibc], {
  name: "readThreadSpecific() and the flat TSD formula read what pthread_setspecific() stored",
  fn() {
    const threads = layout();
    using memory = RemoteMemory.open(self, { cachePages: 0 });
    const tp = threadPointer();
    assert.equal(verifyFirstBlock(memory, threads, tp), true);
    // Enough keys to need glibc's second-level blocks too.
    const keys: number[] = [];
    try {
      for (let i = 0; i < threads.keysPerBlock + 8; i++) {
        const key = new Uint32Array(1);
        assert.equal(lib.symbols.pthread_key_create(new Uint8Array(key.buffer), null), 0);
        keys.push(key[0] as number);
        const value = 0x5000_0000 + i * 16;
        assert.equal(
          lib.symbols.pthread_setspecific(key[0] as number, Deno.UnsafePointer.create(BigInt(value))),
          0,
        );
      }
      for (const [i, key] of keys.entries()) {
        const value = 0x5000_0000 + i * 16;
        assert.equal(readThreadSpecific(memory, threads, tp, key), value, `key ${key}`);
        if (key < threads.keysPerBlock) {
          assert.equal(memory.pointer(tp + threads.tsd.offset + key * threads.tsd.multiplier), value);
        }
      }
      assert.ok(keys.some((key) => key >= threads.keysPerBlock), "no key reached the second level");
    } finally {
      for (const key of keys) lib.symbols.pthread_key_delete(key);
    }
  },
}));

Deno.test(requiring([glibc, loader], {
  name: "staticTlsOffset() of libc's link map locates errno in the calling thread",
  fn() {
    const threads = layout();
    using memory = RemoteMemory.open(self);
    using loaderElf = ElfFile.fromFile(libraries.loader!.open(), libraries.loader!.path);
    const rDebug = findElfSymbols(loaderElf, ["_r_debug"]).get("_r_debug");
    assert.ok(rDebug !== undefined);
    const loaderBias = mappingBias(libraries.loader!.mapping, loaderElf.loadSegments);
    assert.ok(loaderBias !== null);
    const maps = readLinkMaps(memory, (loaderBias + rDebug.value) as Address);
    assert.ok(maps.length >= 3, "the program, libc and the loader at least");
    assert.equal(maps[0]?.name, "", "the main program comes first, without a name");

    using libcElf = ElfFile.open(libcPath!);
    const libcBias = mappingBias(libraries.libc!.mapping, libcElf.loadSegments);
    const libcMap = maps.find((entry) => entry.bias === libcBias);
    assert.ok(libcMap !== undefined, `no link map with libc's bias among ${maps.map((m) => m.name)}`);
    const blockOffset = staticTlsOffset(memory, threads, libcMap.address);
    assert.ok(blockOffset !== null);
    const errno = findElfSymbols(libcElf, ["errno"]).get("errno");
    assert.ok(errno !== undefined);
    const errnoAddress = Number(Deno.UnsafePointer.value(lib.symbols.__errno_location()));
    assert.equal(threadPointer() - blockOffset + errno.value, errnoAddress);
  },
}));

Deno.test(requiring([glibc], {
  name: "readGlibcThreadLayout() returns null for a file without libthread_db descriptors",
  fn() {
    using elf = ElfFile.open(libraries.loader?.path ?? "/bin/true");
    assert.equal(readGlibcThreadLayout(elf), null);
  },
}));
