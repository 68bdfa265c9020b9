import assert from "node:assert/strict";
import { tempDir } from "../helpers.ts";
import { bootstrapped, programs, requiring } from "../../lib/testing/requirements.ts";
import { writeCProject } from "./c_project.ts";
import { buildProcessStarts, gccPlanStarts, makeCommands } from "./process_starts.ts";

// What `gcc -### -O2 -c mod00.c -o mod00.o` printed on Debian 12 (long lines shortened): two programs.
const COMPILE = `Using built-in specs.
COLLECT_GCC=gcc
Target: x86_64-linux-gnu
Configured with: ../src/configure -v --with-pkgversion='Debian 12.2.0-14+deb12u1'
Thread model: posix
gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) 
COLLECT_GCC_OPTIONS='-O2' '-c' '-o' 'mod00.o' '-mtune=generic' '-march=x86-64'
 /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet -imultiarch x86_64-linux-gnu mod00.c -quiet -dumpbase mod00.c
COLLECT_GCC_OPTIONS='-O2' '-c' '-o' 'mod00.o' '-mtune=generic' '-march=x86-64'
 as --64 -o mod00.o /tmp/ccyBXz0e.s
COMPILER_PATH=/usr/lib/gcc/x86_64-linux-gnu/12/
LIBRARY_PATH=/usr/lib/gcc/x86_64-linux-gnu/12/
COLLECT_GCC_OPTIONS='-O2' '-c' '-o' 'mod00.o' '-mtune=generic' '-march=x86-64' '-dumpdir' 'mod00.'
`;

// And for `gcc -### -o project main.o mod00.o`: collect2, which starts ld.
const LINK = `Using built-in specs.
COLLECT_GCC=gcc
COLLECT_LTO_WRAPPER=/usr/lib/gcc/x86_64-linux-gnu/12/lto-wrapper
gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) 
COMPILER_PATH=/usr/lib/gcc/x86_64-linux-gnu/12/
COLLECT_GCC_OPTIONS='-o' 'project' '-mtune=generic' '-march=x86-64' '-dumpdir' 'project.'
 "/usr/lib/gcc/x86_64-linux-gnu/12/collect2" -plugin /usr/lib/gcc/x86_64-linux-gnu/12/liblto_plugin.so
COLLECT_GCC_OPTIONS='-o' 'project' '-mtune=generic' '-march=x86-64' '-dumpdir' 'project.'
`;

Deno.test("gccPlanStarts() counts the driver, cc1 and as for a compile; the driver, collect2 and ld for a link", () => {
  assert.equal(gccPlanStarts(COMPILE), 3);
  assert.equal(gccPlanStarts(LINK), 3);
  assert.equal(gccPlanStarts("gcc version 12.2.0\n"), 1);
});

Deno.test("makeCommands() splits make -n's lines and leaves out make's own messages", () => {
  const printout = "gcc -O2 -c main.c -o main.o\ngcc -o project main.o\nmake: 'x' is up to date.\n";
  assert.deepEqual(makeCommands(printout), [
    ["gcc", "-O2", "-c", "main.c", "-o", "main.o"],
    ["gcc", "-o", "project", "main.o"],
  ]);
});

// The kernel's count: in a new PID namespace every process gets the next PID, so the PID of a process
// started after the build says how many the build started (its processes run no threads).
Deno.test(
  requiring([bootstrapped(Deno.uid() !== 0 ? "needs root" : null), programs("gcc", "make", "unshare")], {
    name: "buildProcessStarts() agrees with the PIDs a real build takes in a PID namespace of its own",
    fn: async () => {
      const dir = tempDir();
      try {
        writeCProject(dir, { modules: 3, functionsPerModule: 2 });
        const planned = await buildProcessStarts(dir);
        // main.c and three modules compiled, then linked.
        assert.equal(planned.commands, 5);
        // PID 1 is sh, make is 2, the build's other processes follow, and the last sh comes after them.
        const built = await new Deno.Command("unshare", {
          args: ["--pid", "--fork", "sh", "-c", 'make -j2 > /dev/null && sh -c "echo \\$\\$"'],
          cwd: dir,
          stdout: "piped",
          stderr: "piped",
        }).output();
        assert.ok(built.success, new TextDecoder().decode(built.stderr));
        const lastPid = Number(new TextDecoder().decode(built.stdout).trim());
        assert.equal(planned.starts, lastPid - 2);
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
  }),
);
