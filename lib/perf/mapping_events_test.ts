import assert from "node:assert/strict";
import { buildWorkload, DENO_RUN_ENV } from "../../tests/helpers.ts";
import { processCpuSeconds } from "../../tests/bench/system_cpu.ts";
import { CAP_PERFMON, CAP_SETPCAP, CAP_SYS_ADMIN, currentCapabilities } from "../sys/capabilities.ts";
import { onlineCpus } from "../sys/cpus.ts";
import { libc } from "../sys/libc.ts";
import { AT_FDCWD } from "../sys/open_flags.ts";
import { monotonicNs } from "../sys/monotonic_clock.ts";
import { statx } from "../sys/statx.ts";
import { CollectingSink, type SeenEvent } from "../testing/perf_records.ts";
import { bootstrapped, optional, programs, type Requirement, requiring } from "../testing/requirements.ts";
import { type ExecutableMapping, MappingEvents } from "./mapping_events.ts";

/** Perf events of every process: root (CI runs as root), or CAP_PERFMON, or a permissive sysctl. */
function perfEvents(): Requirement {
  const caps = currentCapabilities();
  if (caps.has(CAP_PERFMON) || caps.has(CAP_SYS_ADMIN) || paranoia() <= -1) return bootstrapped(null);
  return bootstrapped("needs root, CAP_PERFMON or CAP_SYS_ADMIN for perf events of every process");
}

function paranoia(): number {
  return Number(Deno.readTextFileSync("/proc/sys/kernel/perf_event_paranoid").trim());
}

function kernelTest(name: string, fn: () => Promise<void>, ...more: Requirement[]): Deno.TestDefinition {
  return requiring([perfEvents(), ...more], { name, fn, sanitizeResources: false, sanitizeOps: false });
}

/** Runs `command`, waits for it, and returns its PID; it has exited (and been reaped) on return. */
async function run(command: string, ...args: string[]): Promise<number> {
  const child = new Deno.Command(command, { args, stdout: "null", stderr: "inherit" }).spawn();
  const status = await child.status;
  assert.ok(status.success, `${command} ${args.join(" ")}: exit ${status.code}`);
  return child.pid;
}

/** The GNU build ID readelf prints for `path`, or null. */
async function readelfBuildId(path: string): Promise<string | null> {
  const output = await new Deno.Command("readelf", { args: ["-n", path], stdout: "piped" }).output();
  assert.ok(output.success, `readelf -n ${path}`);
  return /Build ID: ([0-9a-f]+)/.exec(new TextDecoder().decode(output.stdout))?.[1] ?? null;
}

/**
 * Checks that `mapping` names the file at `path` by what the kernel sent: a build ID equal to the one
 * readelf reads from the file, or the device and inode statx gives it. Returns which one it was.
 */
async function assertIdentifies(mapping: ExecutableMapping, path: string): Promise<string> {
  assert.equal(mapping.path, path);
  assert.equal(mapping.anonymous, false);
  assert.equal(mapping.deleted, false);
  if (mapping.buildId !== null) {
    assert.equal(mapping.file, null);
    assert.equal(mapping.buildId, await readelfBuildId(path));
    return `build ID ${mapping.buildId}`;
  }
  const status = statx(AT_FDCWD, path, 0);
  assert.ok(status !== null);
  assert.deepEqual(mapping.file, { major: status.major, minor: status.minor, inode: status.inode });
  return `inode ${status.inode}`;
}

function mmapsOf(events: SeenEvent[]): ExecutableMapping[] {
  return events.flatMap((event) => event.kind === "mmap" ? [event.mapping] : []);
}

/** Times never go back among the events one drain delivered (`ends`: the event count after each drain). */
function assertOrderedWithinDrains(events: SeenEvent[], ends: number[]): void {
  let start = 0;
  for (const end of ends) {
    for (let i = start + 1; i < end; i++) {
      assert.ok(events[i - 1]!.timeNs <= events[i]!.timeNs, `event ${i} delivered before an earlier one`);
    }
    start = end;
  }
}

const TRUE = Deno.realPathSync("/bin/true");

/** A process start from the test's own: fork, exec of /bin/true, its executable first, ..., exit. */
async function assertTrueProcess(events: SeenEvent[], pid: number, parent: number): Promise<string> {
  const kinds = events.map((event) => event.kind);
  assert.equal(kinds[0], "fork", `process ${pid}: ${kinds}`);
  assert.equal(kinds[1], "exec", `process ${pid}: ${kinds}`);
  assert.equal(kinds.at(-1), "exit", `process ${pid}: ${kinds}`);
  assert.equal(kinds.filter((kind) => kind === "exec").length, 1);
  assert.equal(kinds.filter((kind) => kind === "exit").length, 1);
  const [fork, exec, first] = events;
  assert.ok(fork?.kind === "fork" && exec?.kind === "exec" && first?.kind === "mmap");
  assert.equal(fork.parentPid, parent);
  assert.equal(exec.comm, "true");
  assert.ok(first.mapping.start < first.mapping.end);
  assert.ok(first.mapping.prot & 4, "PROT_EXEC");
  return await assertIdentifies(first.mapping, TRUE);
}

Deno.test(kernelTest(
  "MappingEvents delivers a process that started after open() and exited before drain(): fork, exec, executable, exit",
  async () => {
    const events = MappingEvents.open();
    try {
      const pid = await run("/bin/true");
      assert.throws(() => Deno.statSync(`/proc/${pid}`), Deno.errors.NotFound, "the process is gone");
      const sink = new CollectingSink();
      events.drain(sink);
      const mine = sink.of(pid);
      const identity = await assertTrueProcess(mine, pid, Deno.pid);
      console.log(
        `/bin/true (${pid}) mapped ${TRUE} with ${identity}; build IDs requested: ${events.buildIds}`,
      );
      // The dynamic loader and the C library follow the executable.
      const paths = mmapsOf(mine).map((m) => m.path);
      assert.ok(paths.some((path) => /\/ld-linux-x86-64\.so\.2$/.test(path)), paths.join(", "));
      assert.ok(paths.some((path) => /\/libc\.so\.6$/.test(path)), paths.join(", "));
      assert.deepEqual(events.stats.lost, 0);
      assert.deepEqual(events.stats.malformed, 0);
    } finally {
      events.close();
      events.close();
    }
  },
  programs("readelf"),
));

Deno.test(kernelTest("MappingEvents without build IDs names each file by device and inode", async () => {
  using events = MappingEvents.open({ buildIds: false });
  assert.equal(events.buildIds, false);
  const pid = await run("/bin/true");
  const sink = new CollectingSink();
  events.drain(sink);
  const mappings = mmapsOf(sink.of(pid));
  assert.ok(mappings.length >= 3, `${mappings.length} mappings`);
  for (const mapping of mappings) {
    assert.equal(mapping.buildId, null);
    if (mapping.anonymous) assert.equal(mapping.file, null);
    else await assertIdentifies(mapping, mapping.path);
  }
  assert.match(await assertIdentifies(mappings[0]!, TRUE), /^inode /);
}));

Deno.test(
  kernelTest(
    "MappingEvents.drain() keeps the records stamped after its horizon for the next drain",
    async () => {
      using events = MappingEvents.open();
      const before = monotonicNs();
      const pid = await run("/bin/true");
      const sink = new CollectingSink();
      events.drain(sink, before);
      assert.deepEqual(sink.of(pid), []);
      events.drain(sink);
      assert.deepEqual(
        sink.of(pid).map((event) => event.kind).filter((kind) => kind !== "mmap"),
        [
          "fork",
          "exec",
          "exit",
        ],
      );
    },
  ),
);

const cpus = onlineCpus();

Deno.test(kernelTest(
  "MappingEvents delivers a fork on one CPU before the child's exec on another",
  async () => {
    // The shell runs on CPU 1 and forks there; each child moves itself to CPU 0 and execs /bin/true
    // there. Read ring by ring in CPU order, the exec would come before the fork.
    const [first, second] = [cpus[0]!, cpus[1]!];
    using events = MappingEvents.open();
    const script = `for i in $(seq 20); do taskset -c ${first} /bin/true; done`;
    const shell = await run("taskset", "-c", String(second), "sh", "-c", script);
    const sink = new CollectingSink();
    const ends = [events.drain(sink)];
    assertOrderedWithinDrains(sink.events, ends);
    const children = sink.events.flatMap((e) => e.kind === "fork" && e.parentPid === shell ? [e.pid] : []);
    const starts = children.filter((pid) => sink.of(pid).some((e) => e.kind === "exec" && e.comm === "true"));
    assert.equal(starts.length, 20);
    for (const pid of starts) {
      const kinds = sink.of(pid).map((e) => e.kind === "exec" ? e.comm : e.kind);
      assert.deepEqual(kinds.slice(0, 2), ["fork", "taskset"], `${pid}: ${kinds}`);
      assert.equal(kinds.indexOf("true") > 1, true, `${pid}: ${kinds}`);
      assert.equal(kinds.at(-1), "exit");
    }
    assert.equal(events.stats.lost, 0);
  },
  programs("taskset"),
  optional(cpus.length >= 2 ? null : `needs two online CPUs (${cpus.length} online)`),
));

const CLOCK_THREAD_CPUTIME_ID = 3;
const timespec = new BigInt64Array(2);

/** CPU time of the calling thread, ms: what a drain costs, however often the machine preempts it. */
function threadCpuMs(): number {
  assert.equal(libc().fn.clock_gettime(CLOCK_THREAD_CPUTIME_ID, timespec), 0);
  return Number(timespec[0]!) * 1e3 + Number(timespec[1]!) / 1e6;
}

/** Drains, adding up their wall and CPU time. */
class TimedDrains {
  wallMs = 0;
  cpuMs = 0;
  drain(events: MappingEvents, sink: CollectingSink): void {
    const wall = performance.now();
    const cpu = threadCpuMs();
    events.drain(sink);
    this.cpuMs += threadCpuMs() - cpu;
    this.wallMs += performance.now() - wall;
  }
}

/** What the storm tests print: the cost of the drains and this process's CPU, per 1,000 process starts. */
function report(
  label: string,
  starts: number,
  events: MappingEvents,
  drains: TimedDrains,
  processCpuS: number,
  read: { records: number; bytes: number } = events.stats,
) {
  const perThousand = (value: number) => (value * 1000 / starts).toFixed(1);
  console.log([
    `${label}: ${starts} process starts (execs on the machine), ${read.records} records, ${read.bytes} bytes`,
    `(${(read.bytes / starts).toFixed(0)} per start), ${events.stats.lost} lost;`,
    `drains ${drains.cpuMs.toFixed(1)} ms CPU, ${drains.wallMs.toFixed(1)} ms wall`,
    `(${perThousand(drains.cpuMs)} ms CPU per 1,000 starts);`,
    `this process ${(processCpuS * 1000).toFixed(0)} ms CPU (${perThousand(processCpuS * 1000)} ms per 1,000`,
    `starts; /proc/self/stat, 10 ms ticks); rings ${events.ringBytes >> 10} KiB x ${events.cpus.length} CPUs`,
  ].join(" "));
}

/** Process starts in the events: execs of any process on the machine (others run too). */
function execCount(events: SeenEvent[]): number {
  return events.filter((event) => event.kind === "exec").length;
}

Deno.test(kernelTest(
  "MappingEvents, drained every 100 ms, delivers 200 short processes each with its executable, nothing lost",
  async () => {
    using events = MappingEvents.open();
    const sink = new CollectingSink();
    const ends: number[] = [];
    const drains = new TimedDrains();
    const drain = () => {
      drains.drain(events, sink);
      ends.push(sink.events.length);
    };
    const cpuBefore = processCpuSeconds(Deno.pid)!;
    const timer = setInterval(drain, 100);
    let shell: number;
    try {
      shell = await run("sh", "-c", "for i in $(seq 200); do /bin/true; done");
    } finally {
      clearInterval(timer);
    }
    drain();
    const cpuSeconds = processCpuSeconds(Deno.pid)! - cpuBefore;
    assertOrderedWithinDrains(sink.events, ends);
    const children = sink.events.flatMap((e) => e.kind === "fork" && e.parentPid === shell ? [e.pid] : []);
    const starts = children.filter((pid) => sink.of(pid).some((e) => e.kind === "exec" && e.comm === "true"));
    assert.equal(starts.length, 200, `${children.length} children of the shell`);
    const identities = new Set<string>();
    for (const pid of starts) identities.add(await assertTrueProcess(sink.of(pid), pid, shell));
    assert.equal(events.stats.lost, 0);
    assert.equal(events.stats.malformed, 0);
    console.log(`${ends.length} drains; /bin/true named by ${[...identities].join(", ")}`);
    report("200 /bin/true", execCount(sink.events), events, drains, cpuSeconds);
  },
  programs("readelf"),
));

Deno.test(kernelTest(
  "MappingEvents keeps a burst of 1,000 process starts on one CPU between two drains without losing a record",
  async () => {
    // All on one CPU, so one ring takes the whole burst: the worst case for the ring size. Twice: the
    // first drain runs code not yet compiled, the second as a long session's drains do.
    const cpu = String(cpus[0]!);
    using events = MappingEvents.open();
    for (const label of ["first drain", "second drain"]) {
      const before = { ...events.stats };
      const cpuBefore = processCpuSeconds(Deno.pid)!;
      const shell = await run("taskset", "-c", cpu, "sh", "-c", "for i in $(seq 1000); do /bin/true; done");
      const sink = new CollectingSink();
      const drains = new TimedDrains();
      drains.drain(events, sink);
      const cpuSeconds = processCpuSeconds(Deno.pid)! - cpuBefore;
      const children = sink.events.flatMap((e) => e.kind === "fork" && e.parentPid === shell ? [e.pid] : []);
      const starts = children.filter((pid) =>
        sink.of(pid).some((e) => e.kind === "exec" && e.comm === "true")
      );
      assert.equal(events.stats.lost, 0);
      assert.equal(starts.length, 1000);
      const bytes = events.stats.bytes - before.bytes;
      report(`1,000 /bin/true on CPU ${cpu}, ${label}`, execCount(sink.events), events, drains, cpuSeconds, {
        records: events.stats.records - before.records,
        bytes,
      });
      // What the one ring held at once, at most: the burst's records were all there when it was drained.
      console.log(`  the ring was at most ${(100 * bytes / events.ringBytes).toFixed(0)}% full`);
    }
  },
  programs("taskset"),
));

Deno.test(kernelTest(
  "MappingEvents counts the records the kernel drops when a ring is full",
  async () => {
    const cpu = String(cpus[0]!);
    using events = MappingEvents.open({ ringBytes: 4096 });
    await run("taskset", "-c", cpu, "sh", "-c", "for i in $(seq 50); do /bin/true; done");
    const sink = new CollectingSink();
    events.drain(sink);
    // The kernel writes its LOST record once there is room again, before the next record.
    await run("taskset", "-c", cpu, "/bin/true");
    events.drain(sink);
    // 50 starts write about 30 KB of records into a 4 KiB ring.
    assert.ok(events.stats.lost > 0, `${events.stats.lost} lost`);
    assert.equal(events.stats.malformed, 0);
    console.log(`${events.stats.lost} records lost, ${events.stats.records} read`);
  },
  programs("taskset"),
));

Deno.test(kernelTest(
  "MappingEvents shows a library loaded with dlopen, with its build ID",
  async () => {
    const main = await buildWorkload("dlopen_main", ["-O2", "-fomit-frame-pointer"]);
    const plugin = await buildWorkload(
      "dlopen_plugin",
      ["-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-Wl,--build-id=sha1"],
      ".so",
    );
    using events = MappingEvents.open();
    const pid = await run(main, plugin, "0", "0");
    const sink = new CollectingSink();
    events.drain(sink);
    const mine = sink.of(pid);
    const mappings = mmapsOf(mine);
    const library = mappings.find((mapping) => mapping.path === Deno.realPathSync(plugin));
    assert.ok(library !== undefined, mappings.map((m) => m.path).join(", "));
    console.log(`${plugin} named by ${await assertIdentifies(library, Deno.realPathSync(plugin))}`);
    // After the program and the libraries it was linked with, and before its exit.
    assert.equal(mappings[0]?.path, Deno.realPathSync(main));
    assert.ok(mappings.indexOf(library) > 2);
    assert.equal(mine.at(-1)?.kind, "exit");
  },
  programs("gcc", "readelf"),
));

Deno.test(requiring(
  [
    bootstrapped(
      currentCapabilities().has(CAP_SETPCAP) ? null : "needs CAP_SETPCAP (root) to drop capabilities",
    ),
    optional(
      paranoia() <= -1 ? "kernel.perf_event_paranoid is -1: perf events need no capability here" : null,
    ),
  ],
  {
    name: "MappingEvents.open() without CAP_PERFMON and CAP_SYS_ADMIN says what it needs",
    async fn() {
      const code = `
        import { MappingEvents } from ${JSON.stringify(new URL("./mapping_events.ts", import.meta.url).href)};
        try { MappingEvents.open(); console.log("opened"); } catch (error) { console.log(String(error)); }`;
      const drop = "-perfmon,-sys_admin";
      const output = await new Deno.Command("setpriv", {
        args: [
          `--inh-caps=${drop}`,
          `--ambient-caps=${drop}`,
          `--bounding-set=${drop}`,
          Deno.execPath(),
          "eval",
          code,
        ],
        env: DENO_RUN_ENV,
        stdout: "piped",
        stderr: "inherit",
      }).output();
      const text = new TextDecoder().decode(output.stdout).trim();
      assert.ok(output.success, text);
      assert.match(
        text,
        /^SystemError: Cannot open the kernel's mapping records \(a perf dummy event\) on CPU \d+: .* \(errno 13\): perf events of every process need root, CAP_PERFMON or CAP_SYS_ADMIN \(kernel\.perf_event_paranoid is \d+\)$/,
      );
    },
  },
));

Deno.test("MappingEvents.open() refuses a ring that is not a power-of-two number of pages", () => {
  for (const ringBytes of [0, 1000, 3 * 4096, 2 ** 31]) {
    assert.throws(
      () => MappingEvents.open({ ringBytes }),
      /^RangeError: Cannot open mapping events: a ring of/,
    );
  }
});

Deno.test(
  kernelTest("a ring holding its wake-up watermark of records makes its descriptor readable", async () => {
    // One page of records: a few process starts write more. Each CPU's descriptor is watched.
    using events = MappingEvents.open({ ringBytes: 64 << 10, wakeupBytes: 4096 });
    const epoll = libc().fn.epoll_create1(0);
    assert.ok(epoll >= 0, "epoll_create1");
    try {
      const event = new Uint8Array(12);
      new DataView(event.buffer).setUint32(0, 1, /* EPOLLIN */ true);
      for (const fd of events.descriptors) assert.equal(libc().fn.epoll_ctl(epoll, 1, fd, event), 0);
      const ready = new Uint8Array(12 * events.descriptors.length);
      // About 600 bytes of records per start of /bin/true: a few starts cross the watermark of a CPU.
      let readable = 0;
      for (let i = 0; i < 40 && readable === 0; i++) {
        for (let j = 0; j < 10; j++) await run("/bin/true");
        readable = await libc().fn.epoll_wait(epoll, ready, events.descriptors.length, 0);
      }
      assert.ok(readable > 0, "no descriptor became readable after 400 process starts");
      assert.ok(events.drain(new CollectingSink()) > 0);
    } finally {
      libc().fn.close(epoll);
    }
  }),
);
