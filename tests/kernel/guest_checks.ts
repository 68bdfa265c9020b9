/**
 * The checks the guest suite runs inside each kernel, in order. A check has a one-word name and a body
 * that returns a one-line detail when it passes and throws {@linkcode CheckFailure} (with log lines, such
 * as the verifier's output) when it does not, or {@linkcode CheckSkipped} when it does not apply. To test
 * something new in every kernel, add an entry to {@linkcode guestChecks}; programs added to bpf/ get their
 * `load:NAME` check without any edit.
 *
 * @example
 * ```ts ignore
 * import { guestChecks } from "./guest_checks.ts";
 * for (const check of guestChecks(context)) console.log(check.name, await check.run(context));
 * ```
 *
 * @module
 */
import { BpfObject } from "../../lib/bpf/object.ts";
import { LibbpfError } from "../../lib/bpf/libbpf.ts";
import { BPF_F_NO_PREALLOC } from "../../lib/bpf/map.ts";
import { allocateOnDemand, ON_DEMAND_MAPS } from "../../lib/record/map_allocation.ts";
import { Tracer } from "../../lib/record/tracer.ts";
import { KERNEL_NAMES_PROGRAM, kernelNamesSupported } from "../../lib/symbolize/bpf_kernel_names.ts";
import { EventKind } from "../../support/types.ts";
import { countWhere, hasChain, parseFolded } from "../helpers.ts";
import { MAP_TYPE_LPM_TRIE, mapInfo, mapTypeName, programInfo, programTypeName } from "./bpf_info.ts";
import type { BpfObjectContents } from "./bpf_object_contents.ts";
import type { SamplingSession } from "./sampling_session.ts";

/** A check did not pass; `log` holds the lines that explain why. */
export class CheckFailure extends Error {
  readonly log: string[];
  constructor(message: string, log: string[] = []) {
    super(message);
    this.name = "CheckFailure";
    this.log = log;
  }
}

/** A check that does not apply here (the reason is the message). */
export class CheckSkipped extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CheckSkipped";
  }
}

/** Output of a CLI run. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** What the checks work with. */
export interface SuiteContext {
  /** The BPF object the program embeds. */
  objectBytes: Uint8Array;
  contents: BpfObjectContents;
  /** Folder with the compiled workloads (chain). */
  workloads: string;
  /** Runs the omniprof CLI (the bundle) with `args`; killed after `timeoutMs`. */
  runCli(args: string[], timeoutMs?: number): Promise<CliRun>;
  /** The shared tracer session over the chain workload, run on first use. */
  session(): Promise<SamplingSession>;
}

/** One named check. */
export interface GuestCheck {
  name: string;
  run(context: SuiteContext): Promise<string> | string;
}

/** Fails with `message` unless `condition` holds. */
function expect(condition: boolean, message: string, log: string[] = []): asserts condition {
  if (!condition) throw new CheckFailure(message, log);
}

/**
 * The lines of a log worth showing: from libbpf's report of a refused program (the verifier's log
 * follows it) to the end, or else the last lines; libbpf's debug chatter before it is left out.
 */
export function focusLog(lines: string[]): string[] {
  const kept = lines.filter((line) => line.trim().length > 0);
  const refused = kept.findIndex((line) => /BPF program load failed|BEGIN PROG LOAD LOG/.test(line));
  return refused >= 0 ? kept.slice(refused, refused + 150) : kept.slice(-40);
}

/** A CLI run's output for a failure report, without the log records that repeat libbpf's lines. */
function outputLog(run: CliRun): string[] {
  const lines = `${run.stdout}\n${run.stderr}`.split("\n");
  let inRecord = false;
  return focusLog(lines.filter((line) => {
    // A log record: "12:00:00.000 WRN omniprof·libbpf text", continued by lines indented two spaces.
    if (/^\d\d:\d\d:\d\d\.\d+ [A-Z]{3} /.test(line)) inRecord = true;
    else if (!/^ {2}/.test(line)) inRecord = false;
    return !inRecord;
  }));
}

/**
 * Opens the object with only `program` set to load (none: maps only). Its names are read from it, since a
 * variant may have programs the default build lacks.
 */
function openWithOnly(context: SuiteContext, program: string | null): BpfObject<string, string> {
  const object = BpfObject.open<string, string>(context.objectBytes, "omniprof.bpf.o");
  for (const other of context.contents.programs) {
    if (other.name !== program) object.program(other.name).setAutoload(false);
  }
  return object;
}

/** Turns a libbpf failure into a check failure carrying libbpf's log (the verifier's explanation). */
function loadFailure(error: unknown): never {
  if (error instanceof LibbpfError) {
    throw new CheckFailure(error.message.split("\n")[0]!, focusLog(error.log));
  }
  throw error;
}

const environment: GuestCheck = {
  name: "environment",
  run() {
    let btf: number;
    try {
      btf = Deno.statSync("/sys/kernel/btf/vmlinux").size;
    } catch {
      throw new CheckFailure("the kernel has no BTF (/sys/kernel/btf/vmlinux)");
    }
    const mounts = Deno.readTextFileSync("/proc/mounts");
    expect(/ \/sys\/fs\/bpf bpf /.test(mounts), "bpffs is not mounted on /sys/fs/bpf");
    return `Linux ${Deno.osRelease()}, BTF ${
      (btf / 1048576).toFixed(1)
    } MiB, ${navigator.hardwareConcurrency} CPUs`;
  },
};

const cliCheck: GuestCheck = {
  name: "cli-check",
  async run(context) {
    const run = await context.runCli(["check"]);
    expect(run.code === 0, `omniprof check exited with ${run.code}`, outputLog(run));
    const failed = run.stdout.split("\n").filter((line) => line.startsWith("FAIL"));
    return `omniprof check: all essential checks ok${
      failed.length > 0 ? ` (${failed.length} optional FAIL)` : ""
    }`;
  },
};

/** `load:NAME`: the verifier accepts the program on its own. */
function loadProgram(name: string, section: string): GuestCheck {
  return {
    name: `load:${name}`,
    run(context) {
      // The tracer leaves it out where it cannot load, and names kernel frames from /proc/kallsyms.
      if (name === KERNEL_NAMES_PROGRAM && !kernelNamesSupported()) {
        throw new CheckSkipped("needs syscall programs with bpf_snprintf (Linux 5.14+)");
      }
      using object = openWithOnly(context, name);
      try {
        object.load();
      } catch (error) {
        loadFailure(error);
      }
      const info = programInfo(object.program(name).fd);
      const processed = info.verifiedInstructions === null
        ? ""
        : ` (${info.verifiedInstructions} processed by the verifier)`;
      return `${
        programTypeName(info.type)
      } (SEC ${section}): ${info.instructions} instructions${processed}, ` +
        `JIT ${info.jitedBytes} bytes`;
    },
  };
}

const maps: GuestCheck = {
  name: "maps",
  run(context) {
    using object = openWithOnly(context, null);
    // As the tracer creates them: on 6.1 and later the large hash maps are not preallocated.
    const onDemand = allocateOnDemand(object);
    try {
      object.load();
    } catch (error) {
      loadFailure(error);
    }
    const empty = ON_DEMAND_MAPS.filter((name) =>
      (mapInfo(object.map(name).fd).flags & BPF_F_NO_PREALLOC) !== 0
    );
    expect(
      empty.length === (onDemand ? ON_DEMAND_MAPS.length : 0),
      `${empty.length} maps allocated on demand`,
    );
    const byType = new Map<string, number>();
    for (const name of context.contents.maps) {
      const type = mapTypeName(mapInfo(object.map(name).fd).type);
      byType.set(type, (byType.get(type) ?? 0) + 1);
    }
    return `${context.contents.maps.length} maps created: ` +
      [...byType].map(([type, count]) => `${type} x${count}`).join(", ") +
      `; ${
        onDemand ? `${empty.length} hash maps allocated on demand` : "hash maps preallocated (before 6.1)"
      }`;
  },
};

/** Longest-prefix matching in every LPM trie of the object, with keys of the trie's own size. */
const lpmTrie: GuestCheck = {
  name: "lpm-trie",
  run(context) {
    using object = openWithOnly(context, null);
    try {
      object.load();
    } catch (error) {
      loadFailure(error);
    }
    const tries = context.contents.maps.filter((name) =>
      mapInfo(object.map(name).fd).type === MAP_TYPE_LPM_TRIE
    );
    if (tries.length === 0) throw new CheckSkipped("the object has no LPM trie");
    for (const name of tries) {
      const map = object.map(name);
      const info = mapInfo(map.fd);
      // struct bpf_lpm_trie_key: a host-endian prefix length in bits, then the data.
      const key = (bits: number, ...data: number[]) => {
        const bytes = new Uint8Array(info.keySize);
        new DataView(bytes.buffer).setUint32(0, bits, true);
        bytes.set(data, 4);
        return bytes;
      };
      const full = (info.keySize - 4) * 8;
      const short = new Uint8Array(info.valueSize).fill(0x11);
      const long = new Uint8Array(info.valueSize).fill(0x22);
      map.update(key(8, 0xab), short);
      map.update(key(16, 0xab, 0xcd), long);
      const found = new Uint8Array(info.valueSize);
      const match = (probe: Uint8Array) => map.lookup(probe, found) ? found[0] : null;
      expect(match(key(full, 0xab, 0xcd, 0xef)) === 0x22, `${name}: the longest prefix did not match`);
      expect(match(key(full, 0xab, 0x00)) === 0x11, `${name}: the shorter prefix did not match`);
      expect(match(key(full, 0xac)) === null, `${name}: a key outside every prefix matched`);
      map.delete(key(8, 0xab));
      map.delete(key(16, 0xab, 0xcd));
    }
    return `longest-prefix lookups right in ${tries.join(", ")}`;
  },
};

const attach: GuestCheck = {
  name: "attach",
  async run() {
    using tracer = Tracer.start({ frequencyHz: 99 });
    let records = 0;
    const sink = { onRecord: () => void records++ };
    await new Promise((resolve) => setTimeout(resolve, 300));
    tracer.stopSampling();
    tracer.drain(sink);
    return `sampling program on cpu-clock perf events of ${tracer.cpus.length} CPUs, process-event ` +
      `tracepoints attached; ${records} records in 0.3 s`;
  },
};

const ringBuffer: GuestCheck = {
  name: "ring-buffer",
  async run(context) {
    const session = await context.session();
    const { traces, metrics } = session;
    expect(traces.length >= 20, `only ${traces.length} traces of the workload arrived`);
    expect(
      metrics.TracesLost === 0 && metrics.EventsLost === 0,
      `lost ${metrics.TracesLost} traces, ${metrics.EventsLost} events`,
    );
    expect(session.otherTraces === 0, `${session.otherTraces} traces of processes the filter excludes`);
    return `${traces.length} traces and ${session.events.length} process events of the workload, 0 lost, ` +
      `${metrics.Filtered} samples filtered out in BPF`;
  },
};

const tailCalls: GuestCheck = {
  name: "tail-calls",
  async run(context) {
    const { traces, metrics } = await context.session();
    expect(metrics.TailCallFailed === 0, `TailCallFailed = ${metrics.TailCallFailed}`);
    const unwound = traces.filter((trace) => trace.nativeFrames >= 1).length;
    expect(
      traces.length > 0 && unwound / traces.length >= 0.9,
      `${unwound}/${traces.length} traces have native frames`,
    );
    return `${unwound}/${traces.length} traces went sample_cpu -> unwind_native -> unwind_stop, TailCallFailed 0`;
  },
};

/** The workload's lifecycle events (fork, exec, exit), without the other kinds the programs may send. */
const LIFECYCLE: readonly number[] = [EventKind.ProcessFork, EventKind.ProcessExec, EventKind.ProcessExit];

const processEvents: GuestCheck = {
  name: "process-events",
  async run(context) {
    const { events, workloadExitCode } = await context.session();
    expect(workloadExitCode === 0, `the workload exited with ${workloadExitCode}`);
    const kinds = events.map((event) => event.kind).filter((kind) => LIFECYCLE.includes(kind));
    const names = Object.fromEntries(Object.entries(EventKind).map(([name, value]) => [value, name]));
    expect(
      JSON.stringify(kinds) === JSON.stringify(LIFECYCLE),
      `events ${kinds.map((kind) => names[kind]).join(", ") || "none"}, expected fork, exec, exit`,
    );
    const others = events.length - kinds.length;
    return `fork, exec, exit of the workload arrived in order${
      others > 0 ? ` (and ${others} other events)` : ""
    }`;
  },
};

/**
 * The fork event reads the child's task_struct at offsets the host found in this kernel's BTF, and the
 * exit event decides through signal_struct that the process is gone: their values must be right.
 */
const kernelFields: GuestCheck = {
  name: "kernel-fields",
  async run(context) {
    const session = await context.session();
    const find = (kind: number) => session.events.find((event) => event.kind === kind);
    const fork = find(EventKind.ProcessFork);
    const exec = find(EventKind.ProcessExec);
    const exit = find(EventKind.ProcessExit);
    expect(
      fork !== undefined && exec !== undefined && exit !== undefined,
      "no fork/exec/exit events to check",
    );
    const pid = session.workloadPid;
    const problems: string[] = [];
    if (fork.pid !== pid || fork.tid !== pid) {
      problems.push(`fork pid/tid ${fork.pid}/${fork.tid}, expected ${pid}`);
    }
    if (fork.parentPid !== Deno.pid) problems.push(`fork parent ${fork.parentPid}, expected ${Deno.pid}`);
    if (exec.pid !== pid || exec.tid !== pid) problems.push(`exec pid/tid ${exec.pid}/${exec.tid}`);
    if (exec.comm !== "chain") problems.push(`exec comm ${JSON.stringify(exec.comm)}, expected "chain"`);
    if (exit.pid !== pid || exit.comm !== "chain") {
      problems.push(`exit pid ${exit.pid} comm ${JSON.stringify(exit.comm)}`);
    }
    expect(problems.length === 0, problems.join("; "));
    return `the child's tgid and pid, comm and the parent's tgid read right (pid ${pid}, parent ${Deno.pid})`;
  },
};

/**
 * Resolves once `workload` has printed "ready" on its piped stdout, and `settleMs` more have passed (for
 * a runtime that compiles its code after saying so); fails if it exits first. `name` says which workload.
 */
async function printedReady(workload: Deno.ChildProcess, name: string, settleMs = 0): Promise<void> {
  const reader = workload.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let printed = "";
  while (!printed.includes("ready")) {
    const { value, done } = await reader.read();
    if (done) throw new CheckFailure(`${name} exited before it was ready`);
    printed += value;
  }
  reader.releaseLock();
  if (settleMs > 0) await new Promise((resolve) => setTimeout(resolve, settleMs));
}

/**
 * `record -p PID -d 2` of a running workload once `ready` resolves, writing folded stacks and counters;
 * the workload is killed afterwards, and a failed recording fails the check with its output.
 */
async function recordRunning(
  context: SuiteContext,
  workload: Deno.ChildProcess,
  ready: () => Promise<unknown>,
  folded: string,
  stats: string,
  target: "pid" | "system" = "pid",
  seconds = 2,
  options: string[] = [],
): Promise<CliRun> {
  let run: CliRun;
  try {
    await ready();
    run = await context.runCli([
      "record",
      ...options,
      ...(target === "pid" ? ["-p", String(workload.pid)] : []),
      "-d",
      String(seconds),
      "-o",
      folded,
      "--stats",
      stats,
    ]);
  } finally {
    workload.kill("SIGKILL");
    await workload.status;
  }
  expect(run.code === 0, `omniprof record exited with ${run.code}`, outputLog(run));
  return run;
}

/**
 * A 2-second `record -p` of the chain workload, already past its start-up: under emulation the dynamic
 * loader's work at start-up is slow enough to take a tenth of a short run, which is not what this
 * measures (the sampling session covers following a command from its first instruction).
 */
const recordChain: GuestCheck = {
  name: "record-chain",
  async run(context) {
    const { stacks, total, counters, details } = await recordChainWorkload(context, "chain", "pid", 2);
    const complete = countWhere(stacks, (stack) => hasChain(stack.frames, ["main", "a", "b", "c"]));
    expect(total >= 20, `only ${total} samples of chain in 2 s`, details);
    expect(complete / total >= 0.9, `${complete}/${total} samples show main;a;b;c (90% needed)`, details);
    expect(counters.lost === 0, `${counters.lost} samples lost`);
    // The chain keeps frame pointers, so the fallback alone would pass: the tables must have been used.
    expect(
      (counters.bpf.UnwindNativeFrames ?? 0) > 0,
      `no frame was unwound from stack deltas (UnwindNoInfo ${counters.bpf.UnwindNoInfo})`,
      details,
    );
    expect(counters.bpf.TailCallFailed === 0, `TailCallFailed = ${counters.bpf.TailCallFailed}`);
    return `record -p -d 2: ${complete}/${total} samples of chain show main;a;b;c ` +
      `(${
        (100 * complete / total).toFixed(0)
      }%), ${counters.bpf.UnwindNativeFrames} frames from stack deltas, ` +
      `0 lost, TailCallFailed 0`;
  },
};

/**
 * Records the chain workload, already past its start-up, for `seconds` (`-p` or the whole system), and
 * reads back its stacks and the session's counters. `details` holds the top stacks, the counters (they
 * say how stacks were unwound: tables or frame pointers) and omniprof's warnings, for a failing check.
 */
async function recordChainWorkload(
  context: SuiteContext,
  name: string,
  target: "pid" | "system",
  seconds: number,
) {
  const folded = `/tmp/omniprof-${name}.folded`;
  const stats = `/tmp/omniprof-${name}.json`;
  const workload = new Deno.Command(`${context.workloads}/chain`, { args: ["600"], stdout: "null" }).spawn();
  const run = await recordRunning(
    context,
    workload,
    () => new Promise((resolve) => setTimeout(resolve, 1000)),
    folded,
    stats,
    target,
    seconds,
  );
  const stacks = parseFolded(Deno.readTextFileSync(folded)).filter((stack) => stack.comm === "chain");
  const counters = JSON.parse(Deno.readTextFileSync(stats)) as {
    lost: number;
    bpf: Record<string, number>;
    unwinding: Record<string, number>;
  };
  const details = [
    ...[...stacks].sort((a, b) => b.count - a.count).slice(0, 15)
      .map((stack) => `${stack.count} ${stack.frames.join(";")}`),
    `BPF counters: ${JSON.stringify(counters.bpf)}`,
    `unwinding: ${JSON.stringify(counters.unwinding)}`,
    ...`${run.stderr}`.split("\n").filter((line) => /WRN|ERR/.test(line)).slice(0, 10),
  ];
  return { stacks, total: countWhere(stacks, () => true), counters, details };
}

/**
 * A 4-second whole-system record of the chain workload: files are then loaded as their code first runs,
 * libc a page at a time (the file-needed event carries the address, a page's rows get an array of their
 * own). Stacks rooted at `_start` need libc's tables for `__libc_start_call_main`, which keeps no frame
 * pointer: with the page's rows unusable, none would be. Under emulation the host takes a second or more
 * to read the process and load its tables, and samples until then stop early, so the check asks for 20
 * rooted samples rather than a share.
 */
const recordSystem: GuestCheck = {
  name: "record-system",
  async run(context) {
    const { stacks, total, counters, details } = await recordChainWorkload(context, "system", "system", 4);
    const rooted = countWhere(
      stacks,
      (stack) => stack.frames[0] === "_start" && hasChain(stack.frames, ["main", "a", "b", "c"]),
    );
    expect(
      (counters.unwinding.pagesLoaded ?? 0) >= 1,
      "no page of a large library was loaded alone",
      details,
    );
    expect(rooted >= 20, `${rooted}/${total} samples show _start;...;main;a;b;c (20 needed)`, details);
    return `record -d 4 (whole system): ${rooted}/${total} samples of chain from _start to c, ` +
      `${counters.unwinding.pagesLoaded} pages of large libraries loaded alone`;
  },
};

/** The Python interpreter the image holds (`/usr/bin/python3.X`), or null. */
function guestPython(): string | null {
  try {
    for (const entry of Deno.readDirSync("/usr/bin")) {
      if (/^python3\.\d+$/.test(entry.name)) return `/usr/bin/${entry.name}`;
    }
  } catch {
    // no /usr/bin
  }
  return null;
}

/**
 * `record -p` on a CPython process running main -> pa -> pb -> pc: the native unwinder hands the eval
 * loop to the Python unwinder, which must load, be tail-called and find the thread's frames on this
 * kernel (fsbase at its offset in this kernel's BTF, the thread-specific data through user memory reads).
 */
const recordPython: GuestCheck = {
  name: "record-python",
  async run(context) {
    const python = guestPython();
    if (python === null) throw new CheckSkipped("the image has no python3 (the host had none)");
    const folded = "/tmp/omniprof-python.folded";
    const stats = "/tmp/omniprof-python.json";
    const workload = new Deno.Command(python, {
      args: ["-S", "-u", `${context.workloads}/chain.py`],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    // The script prints "ready" once its frames are in place.
    const ready = () => printedReady(workload, python);
    const run = await recordRunning(context, workload, ready, folded, stats);
    const stacks = parseFolded(Deno.readTextFileSync(folded));
    const total = countWhere(stacks, () => true);
    const complete = countWhere(
      stacks,
      (stack) => hasChain(stack.frames, ["<module>", "main", "pa", "pb", "pc"]),
    );
    const counters = JSON.parse(Deno.readTextFileSync(stats)) as { bpf: Record<string, number> };
    const pythonCounters = Object.fromEntries(
      Object.entries(counters.bpf).filter(([key]) => key.startsWith("Python")),
    );
    const details = [
      ...[...stacks].sort((a, b) => b.count - a.count).slice(0, 10).map((s) =>
        `${s.count} ${s.frames.join(";")}`
      ),
      `Python counters: ${JSON.stringify(pythonCounters)}`,
      ...`${run.stderr}`.split("\n").filter((line) => /WRN|ERR/.test(line)).slice(0, 10),
    ];
    expect(total >= 20, `only ${total} samples of ${python} in 2 s`, details);
    expect(complete / total >= 0.9, `${complete}/${total} samples show <module>;main;pa;pb;pc`, details);
    return `${python.slice("/usr/bin/".length)}: ${complete}/${total} samples show <module>;main;pa;pb;pc ` +
      `(${(100 * complete / total).toFixed(0)}%), ${counters.bpf.PythonFrames} Python frames from BPF`;
  },
};

/**
 * `record -p` on a node process running jsOuter -> jsMiddle -> jsInner -> jsLeaf: the native unwinder hands
 * V8's builtins and JIT code to the V8 unwinder, which must load, be tail-called and walk V8's frames on
 * this kernel; the host names them from the process's memory.
 */
const recordNode: GuestCheck = {
  name: "record-node",
  async run(context) {
    const node = "/usr/bin/node";
    try {
      Deno.statSync(node);
    } catch {
      throw new CheckSkipped("the image has no node (the host had none)");
    }
    const folded = "/tmp/omniprof-node.folded";
    const stats = "/tmp/omniprof-node.json";
    const workload = new Deno.Command(node, {
      args: [`${context.workloads}/v8_chain.js`, "600"],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    // The script prints "ready PID" once its loop is about to start; V8 then needs a moment, under
    // emulation, to compile the chain.
    const ready = () => printedReady(workload, node, 1000);
    const run = await recordRunning(context, workload, ready, folded, stats, "pid", 3);
    const stacks = parseFolded(Deno.readTextFileSync(folded));
    const total = countWhere(stacks, () => true);
    const chain = ["jsOuter", "jsMiddle", "jsInner", "jsLeaf"];
    const complete = countWhere(stacks, (stack) => hasChain(stack.frames, chain));
    const counters = JSON.parse(Deno.readTextFileSync(stats)) as { bpf: Record<string, number> };
    const v8Counters = Object.fromEntries(
      Object.entries(counters.bpf).filter(([key]) => key.startsWith("V8")),
    );
    const details = [
      ...[...stacks].sort((a, b) => b.count - a.count).slice(0, 10).map((s) =>
        `${s.count} ${s.frames.join(";")}`
      ),
      `V8 counters: ${JSON.stringify(v8Counters)}`,
      ...`${run.stderr}`.split("\n").filter((line) => /WRN|ERR/.test(line)).slice(0, 10),
    ];
    expect(total >= 20, `only ${total} samples of node in 3 s`, details);
    expect(complete / total >= 0.9, `${complete}/${total} samples show ${chain.join(";")}`, details);
    return `node: ${complete}/${total} samples show ${chain.join(";")} ` +
      `(${(100 * complete / total).toFixed(0)}%), ${counters.bpf.V8Frames} V8 frames from BPF`;
  },
};

/**
 * `record -p` on a JVM running Chain (main -> a -> b -> c): the native unwinder hands the code cache to the
 * HotSpot unwinder, which must load, be tail-called and walk interpreted and compiled frames on this
 * kernel; the host reads the JVM's tables and names methods from its memory. The runtime is a jlink image
 * of the host's JDK (kernels/test_kernel.ts).
 */
const recordJava: GuestCheck = {
  name: "record-java",
  async run(context) {
    const java = "/opt/jre/bin/java";
    try {
      Deno.statSync(java);
    } catch {
      throw new CheckSkipped("the image has no Java runtime (the host had no JDK)");
    }
    const folded = "/tmp/omniprof-java.folded";
    const stats = "/tmp/omniprof-java.json";
    const workload = new Deno.Command(java, {
      args: ["-Xmx64m", "-cp", `${context.workloads}/java`, "Chain", "600"],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    // Chain prints "ready" from main, once the JVM has started; under emulation its first calls of c take a
    // moment more.
    const ready = () => printedReady(workload, java, 1000);
    const run = await recordRunning(context, workload, ready, folded, stats, "pid", 3);
    // The main thread keeps the launcher's name; the JVM names its own threads.
    const stacks = parseFolded(Deno.readTextFileSync(folded)).filter((stack) => stack.comm === "java");
    const total = countWhere(stacks, () => true);
    const chain = ["Chain.main", "Chain.a", "Chain.b", "Chain.c"];
    const complete = countWhere(stacks, (stack) => hasChain(stack.frames, chain));
    const counters = JSON.parse(Deno.readTextFileSync(stats)) as { bpf: Record<string, number> };
    const hotspotCounters = Object.fromEntries(
      Object.entries(counters.bpf).filter(([key]) => key.startsWith("Hotspot")),
    );
    const details = [
      ...[...stacks].sort((a, b) => b.count - a.count).slice(0, 10).map((s) =>
        `${s.count} ${s.frames.join(";")}`
      ),
      `HotSpot counters: ${JSON.stringify(hotspotCounters)}`,
      ...`${run.stderr}`.split("\n").filter((line) => /WRN|ERR/.test(line)).slice(0, 10),
    ];
    expect(total >= 20, `only ${total} samples of the JVM's main thread in 3 s`, details);
    expect(complete / total >= 0.9, `${complete}/${total} samples show ${chain.join(";")}`, details);
    return `java: ${complete}/${total} samples of the main thread show ${chain.join(";")} ` +
      `(${(100 * complete / total).toFixed(0)}%), ${counters.bpf.HotspotFrames} HotSpot frames from BPF`;
  },
};

/**
 * A 3-second `record --off-cpu -p` of the sleeper workload (main;wait_a;wait_b;wait_c, 10 ms sleeps, no
 * frame pointers): the context-switches event, the kept traces and the sched_switch tracepoint work in
 * this kernel. The sleeper is off the CPU nearly all of its wall time, so its waits add up to most of the
 * recording; emulation slows only its short runs between sleeps.
 */
const recordOffCpu: GuestCheck = {
  name: "record-off-cpu",
  async run(context) {
    const folded = "/tmp/omniprof-off-cpu.folded";
    const stats = "/tmp/omniprof-off-cpu.json";
    const seconds = 3;
    const workload = new Deno.Command(`${context.workloads}/sleeper`, {
      args: ["600"],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const ready = () => printedReady(workload, "the sleeper", 500);
    const run = await recordRunning(context, workload, ready, folded, stats, "pid", seconds, ["--off-cpu"]);
    const stacks = parseFolded(Deno.readTextFileSync(folded)).filter((stack) => stack.comm === "sleeper");
    const total = countWhere(stacks, () => true);
    const chain = ["main", "wait_a", "wait_b", "wait_c"];
    const underChain = countWhere(stacks, (stack) => hasChain(stack.frames, chain));
    const counters = JSON.parse(Deno.readTextFileSync(stats)) as {
      offCpu: { waits: number; ns: number };
      durationNs: number;
      bpf: Record<string, number>;
    };
    const details = [
      ...[...stacks].sort((a, b) => b.count - a.count).slice(0, 10).map((s) =>
        `${s.count} ${s.frames.join(";")}`
      ),
      `counters: ${JSON.stringify(counters.offCpu)} ${JSON.stringify(counters.bpf)}`,
      ...`${run.stderr}`.split("\n").filter((line) => /WRN|ERR/.test(line)).slice(0, 10),
    ];
    // The sampled window, from the first switch-out the programs could see to their detaching: longer than
    // -d under emulation, where stopping takes a while.
    const wallUs = counters.durationNs / 1000;
    expect(
      total >= 0.8 * wallUs && total <= 1.02 * wallUs,
      `${total} µs of waits in a window of ${wallUs.toFixed(0)} µs`,
      details,
    );
    expect(underChain >= 0.9 * total, `${underChain} of ${total} µs under ${chain.join(";")}`, details);
    return `record --off-cpu -p -d ${seconds}: ${(total / 1e6).toFixed(2)} s of waits in ` +
      `${(wallUs / 1e6).toFixed(2)} s, ` +
      `${(100 * underChain / total).toFixed(0)}% under ${chain.join(";")}, ${counters.offCpu.waits} waits`;
  },
};

/**
 * `record -e` with one probe of each kind in one session, kprobes included (the guests have them): the
 * calls workload calls target() and getpgid exactly COUNT times each under main;caller_a;caller_b, so each
 * event counts exactly COUNT hits, each with that chain. Folded lines start with the event.
 */
const recordProbes: GuestCheck = {
  name: "record-probes",
  async run(context) {
    const count = 300;
    const calls = `${context.workloads}/calls`;
    const events = [
      `uprobe:${calls}:target`,
      `uretprobe:${calls}:target`,
      "tracepoint:syscalls:sys_enter_getpgid",
      "kprobe:__x64_sys_getpgid",
    ];
    const folded = "/tmp/omniprof-probes.folded";
    // The workload waits 2 s before its calls: under emulation omniprof reads it in that time.
    const run = await context.runCli([
      "record",
      ...events.flatMap((event) => ["-e", event]),
      "-o",
      folded,
      "--",
      calls,
      String(count),
      "2000",
    ]);
    expect(run.code === 0, `omniprof record exited with ${run.code}`, outputLog(run));
    const stacks = parseFolded(Deno.readTextFileSync(folded)).filter((stack) => stack.comm === "calls");
    const chain = ["main", "caller_a", "caller_b"];
    const counted: string[] = [];
    for (const event of events) {
      const of = stacks.filter((stack) => stack.frames[0] === event);
      const hits = countWhere(of, () => true);
      const chained = countWhere(of, (stack) => hasChain(stack.frames, chain));
      const details = [...of].sort((a, b) => b.count - a.count).slice(0, 5).map((s) =>
        `${s.count} ${s.frames.join(";")}`
      );
      expect(hits === count, `${event}: ${hits} hits, ${count} calls`, details);
      expect(chained === count, `${event}: ${chained} of ${hits} hits under ${chain.join(";")}`, details);
      counted.push(`${event.split(":")[0]} ${hits}`);
    }
    return `record -e x${events.length}: ${counted.join(", ")} hits of ${count} calls, each under ${
      chain.join(";")
    }`;
  },
};

/** Every check, in the order the suite runs them. */
export function guestChecks(context: SuiteContext): GuestCheck[] {
  return [
    environment,
    cliCheck,
    ...context.contents.programs.map((program) => loadProgram(program.name, program.section)),
    maps,
    lpmTrie,
    attach,
    ringBuffer,
    tailCalls,
    processEvents,
    kernelFields,
    recordChain,
    recordSystem,
    recordPython,
    recordNode,
    recordJava,
    recordOffCpu,
    recordProbes,
  ];
}
