/**
 * The built-in demo workload (support/demo/demo.c), embedded at build time. It runs from an anonymous
 * in-memory file, so that `record --demo` writes nothing but its profile.
 *
 * @module
 */
import bytes from "../../.build/omniprof-demo" with { type: "bytes" };
import { cString, libc, SystemError } from "../../lib/sys/libc.ts";
import { CommandGroup } from "../../lib/process/command_group.ts";
import type { CommandGuard } from "../../lib/process/command_guard.ts";

/**
 * Starts the demo for `seconds` seconds, as `record -- COMMAND` starts a command. It runs
 * `/proc/self/fd/N`: an inherited memfd holding the program.
 */
export function spawnDemo(seconds: number, guard: CommandGuard | null = null): CommandGroup {
  const { fn, errno } = libc();
  const fd = fn.memfd_create(cString("omniprof-demo"), 0);
  if (fd < 0) throw new SystemError("create an in-memory file for the demo workload", errno());
  try {
    let written = 0;
    while (written < bytes.length) {
      const count = Number(fn.write(fd, bytes.subarray(written), BigInt(bytes.length - written)));
      if (count <= 0) throw new SystemError("write the demo workload", errno());
      written += count;
    }
    return CommandGroup.start(`/proc/self/fd/${fd}`, [String(Math.max(1, Math.ceil(seconds)))], {
      stdin: "null",
      stdout: "null",
      stderr: "inherit",
    }, guard);
  } finally {
    // The child holds its own copy of the descriptor (and then the mapping): ours can go.
    fn.close(fd);
  }
}
