import assert from "node:assert/strict";
import type { Profile } from "../profile/profile.ts";
import { ResourceAttributes } from "./resource_attributes.ts";

function profileOf(samples: Array<{ pid: number; tid: number; comm: string }>): Profile {
  return {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 1e7,
    mappings: [],
    locations: [],
    samples: samples.map((s) => ({ ...s, locations: [], count: 1 })),
  };
}

Deno.test("ResourceAttributes describes a running process by its executable, and remembers it after exit", async () => {
  const sleep = new Deno.Command("sleep", { args: ["30"] }).spawn();
  const path = Deno.realPathSync(Deno.readLinkSync(`/proc/${sleep.pid}/exe`));
  const resources = new ResourceAttributes({ hostName: "node-7" });
  try {
    resources.update(profileOf([{ pid: sleep.pid, tid: sleep.pid, comm: "sleep" }]));
    const attributes = new Map(resources.of(sleep.pid));
    assert.equal(attributes.get("host.name"), "node-7");
    assert.equal(attributes.get("os.type"), "linux");
    assert.equal(
      attributes.get("host.arch"),
      Deno.build.arch === "x86_64" ? "amd64" : attributes.get("host.arch"),
    );
    assert.equal(attributes.get("process.pid"), sleep.pid);
    assert.equal(attributes.get("process.executable.path"), path);
    assert.equal(attributes.get("process.executable.name"), path.split("/").at(-1));
    assert.ok(resources.info(sleep.pid)!.startTicks > 0);
  } finally {
    sleep.kill();
    await sleep.status;
  }
  // Exited since: what was read is kept.
  resources.update(profileOf([{ pid: sleep.pid, tid: sleep.pid, comm: "sleep" }]));
  assert.equal(new Map(resources.of(sleep.pid)).get("process.executable.path"), path);
  // Never read while it ran: only the name from the samples is left.
  const late = new ResourceAttributes({ hostName: "node-7" });
  late.update(profileOf([{ pid: sleep.pid, tid: sleep.pid, comm: "sleep" }]));
  const gone = new Map(late.of(sleep.pid));
  assert.equal(gone.get("process.executable.path"), undefined);
  assert.equal(gone.get("process.executable.name"), "sleep");
});

Deno.test("ResourceAttributes keeps what it read while the process lives, and forgets absent processes", () => {
  const resources = new ResourceAttributes();
  resources.update(profileOf([{ pid: Deno.pid, tid: Deno.pid + 1_000_000, comm: "worker" }]));
  const first = resources.info(Deno.pid)!;
  assert.equal(first.executablePath, Deno.execPath());
  resources.update(profileOf([{ pid: Deno.pid, tid: Deno.pid, comm: "deno" }]));
  assert.equal(resources.info(Deno.pid), first, "same start time: not read again");
  resources.update(profileOf([]));
  assert.equal(resources.info(Deno.pid), undefined);
});
