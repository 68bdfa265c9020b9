import assert from "node:assert/strict";
import type { Profile, ProfileLocation } from "../profile/profile.ts";
import { holdsKernelAddresses, UNNAMED_KERNEL_FRAME, withoutKernelAddresses } from "./kernel_addresses.ts";
import { encodePprof } from "./pprof.ts";
import { formatFolded } from "./folded.ts";
import { decodePprofBySchema, pprofAddresses } from "../../tests/pprof_schema.ts";

function location(kind: ProfileLocation["kind"], address: number, functionName: string, mapping = -1) {
  return { kind, mapping, address, functionName, sourceFile: "", line: 0 };
}

/** A recorded profile as the profile builder makes it: kernel addresses as their low 32 bits. */
function recorded(): Profile {
  return {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 1e7,
    mappings: [{
      start: 0,
      end: 0x800000000000,
      fileOffset: 0,
      fileName: "/bin/app",
      buildId: "ab",
      hasFunctions: true,
    }],
    locations: [
      location("kernel", 0x8123_4567, "vfs_read"),
      location("kernel", 0x8123_4590, "vfs_read"), // another instruction of the same function
      location("kernel", 0xc0a0_1234, "xfs_file_read_iter [xfs]"),
      location("kernel", 0x8200_0001, "[kernel+0xffffffff82000001]"), // no symbol
      location("native", 0x1234, "main", 0),
    ],
    samples: [
      { locations: [0, 4], count: 3, pid: 7, tid: 7, comm: "app" },
      { locations: [1, 2, 4], count: 2, pid: 7, tid: 8, comm: "app" },
      { locations: [3, 4], count: 1, pid: 7, tid: 7, comm: "app" },
    ],
  };
}

Deno.test("withoutKernelAddresses() keeps kernel frames as function names, one location each", () => {
  const before = recorded();
  const after = withoutKernelAddresses(before);
  const names = (profile: Profile, i: number) =>
    profile.samples[i]!.locations.map((index) => profile.locations[index]!.functionName);
  assert.deepEqual(names(after, 0), ["vfs_read", "main"]);
  assert.deepEqual(names(after, 1), ["vfs_read", "xfs_file_read_iter [xfs]", "main"]);
  assert.deepEqual(names(after, 2), [UNNAMED_KERNEL_FRAME, "main"]);
  assert.equal(after.samples[0]!.locations[0], after.samples[1]!.locations[0], "one vfs_read location");
  for (const kernel of after.locations.filter((l) => l.kind === "kernel")) assert.equal(kernel.address, 0);
  assert.equal(
    after.locations.find((l) => l.functionName === "main")!.address,
    0x1234,
    "user addresses stay",
  );
  assert.deepEqual(after.samples.map((s) => s.count), [3, 2, 1]);
  assert.equal(before.locations[0]!.address, 0x8123_4567, "the input is left as it was");
});

Deno.test("holdsKernelAddresses() finds them in addresses and names, and none once removed", () => {
  const profile = recorded();
  assert.ok(holdsKernelAddresses(profile));
  assert.ok(holdsKernelAddresses(profile, { namesOnly: true }), "the unnamed frame's name is an address");
  const named = {
    ...profile,
    locations: profile.locations.map((l, i) => i === 3 ? { ...l, functionName: "x" } : l),
  };
  assert.ok(holdsKernelAddresses(named));
  assert.ok(!holdsKernelAddresses(named, { namesOnly: true }), "folded stacks of it hold none");
  assert.ok(!holdsKernelAddresses(withoutKernelAddresses(profile)));
  // A kernel mapping's range (a profile converted from perf) is an address too.
  const mapped: Profile = {
    ...profile,
    mappings: [{
      start: 0xffffffff81000000,
      end: 0xffffffff82000000,
      fileOffset: 0,
      fileName: "[kernel.kallsyms]_text",
      buildId: "",
      hasFunctions: true,
    }],
    locations: [location("native", 0, "main")],
    samples: [{ locations: [0], count: 1, pid: 1, tid: 1, comm: "x" }],
  };
  assert.ok(holdsKernelAddresses(mapped));
  assert.deepEqual(withoutKernelAddresses(mapped).mappings.map((m) => [m.start, m.end]), [[0, 0]]);
});

Deno.test("a pprof file and folded stacks of a profile without kernel addresses hold none", () => {
  const isKernel = (address: bigint) => address >= 0xffffffff80000000n;
  const full = pprofAddresses(decodePprofBySchema(encodePprof(recorded())));
  assert.ok(full.some(isKernel), "the encoder writes kernel addresses when they are there");
  const hidden = pprofAddresses(decodePprofBySchema(encodePprof(withoutKernelAddresses(recorded()))));
  assert.ok(hidden.includes(0x1234n), "user addresses are written");
  assert.deepEqual(hidden.filter(isKernel), []);
  assert.doesNotMatch(formatFolded(withoutKernelAddresses(recorded())), /ffffffff/);
});
