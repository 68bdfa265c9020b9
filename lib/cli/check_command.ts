/**
 * `omniprof check`: what works on this machine and what does not, each with the reason and the fix.
 * Every check is real: it loads the tracer and opens a perf event, rather than guessing from versions.
 *
 * @module
 */
import { libbpf } from "../bpf/libbpf.ts";
import { closePerfEvent, openCpuClock } from "../perf/perf_event.ts";
import { Tracer } from "../record/tracer.ts";
import type { KernelAddress } from "../types.ts";
import { RUNTIMES } from "../interpreter/runtimes.ts";
import { currentCapabilities, missingTracingCapabilities } from "../sys/capabilities.ts";

/** The outcome of one check. */
export interface CheckResult {
  name: string;
  ok: boolean;
  detail: string;
  /** A failed essential check means `record` cannot work. */
  essential: boolean;
}

function attempt(name: string, essential: boolean, body: () => string): CheckResult {
  try {
    return { name, ok: true, detail: body(), essential };
  } catch (error) {
    return { name, ok: false, detail: error instanceof Error ? error.message : String(error), essential };
  }
}

function readText(path: string): string | null {
  try {
    return Deno.readTextFileSync(path).trim();
  } catch {
    return null;
  }
}

/** The first kernel text symbol's address in /proc/kallsyms (its first lines), or null when hidden. */
function firstKernelTextAddress(): KernelAddress | null {
  using file = Deno.openSync("/proc/kallsyms");
  const buffer = new Uint8Array(4096);
  const text = new TextDecoder().decode(buffer.subarray(0, file.readSync(buffer) ?? 0));
  const match = /^ffffffff([0-9a-f]{8}) [tT] /m.exec(text);
  return match ? parseInt(match[1]!, 16) as KernelAddress : null;
}

/** Runs every check. */
export function runChecks(): CheckResult[] {
  const results: CheckResult[] = [];
  results.push({
    name: "kernel",
    ok: true,
    detail: `Linux ${Deno.osRelease()} ${Deno.build.arch}`,
    essential: false,
  });
  results.push(attempt("privileges", true, () => {
    const missing = missingTracingCapabilities(currentCapabilities());
    if (missing.length > 0) throw new Error(`missing ${missing.join(", ")}: run as root`);
    return "CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN) present";
  }));
  results.push(attempt("libbpf", true, () => `libbpf ${libbpf().version} loaded`));
  results.push(attempt("BTF", true, () => {
    const size = Deno.statSync("/sys/kernel/btf/vmlinux").size;
    return `/sys/kernel/btf/vmlinux present (${(size / 1048576).toFixed(1)} MiB)`;
  }));
  const paranoid = readText("/proc/sys/kernel/perf_event_paranoid");
  results.push(attempt("perf events", true, () => {
    const fd = openCpuClock(0, 1e9);
    closePerfEvent(fd);
    return `cpu-clock sampling works (perf_event_paranoid ${paranoid ?? "?"})`;
  }));
  // Whether the kernel names kernel frames itself (a BPF program), learnt while the tracer is up.
  let kernelNames: string | null = null;
  results.push(attempt("BPF tracer", true, () => {
    // Every runtime's program too: a session loads one only when it meets the runtime, and a program this
    // kernel's verifier refuses must show here.
    const tracer = Tracer.start({ frequencyHz: 1, allUnwinders: true });
    const cpus = tracer.cpus.length;
    const unwinders = tracer.unwinders.filled().length;
    try {
      // A kernel text address every kernel has: where the names of kernel frames come from. A failure
      // here is not the tracer's: the kernel symbols check below then reports /proc/kallsyms.
      const names = tracer.kernelNames;
      const start = names === null ? null : firstKernelTextAddress();
      if (names !== null && start !== null) {
        names.name([start]);
        const symbol = names.lookup(start);
        kernelNames = symbol ? `named by the kernel through BPF (e.g. ${symbol.name})` : null;
      }
    } catch {
      kernelNames = null;
    } finally {
      tracer.close();
    }
    return `programs load and attach on ${cpus} CPUs (perf_event, raw tracepoints, ring buffer, tail calls ` +
      `to ${unwinders} programs, every runtime's included)`;
  }));
  results.push(attempt("kernel symbols", false, () => {
    if (kernelNames !== null) return kernelNames;
    const head = readText("/proc/kallsyms")?.slice(0, 16) ?? "";
    if (/^0+ /.test(head) || head === "") {
      throw new Error(
        "/proc/kallsyms shows zero addresses (kernel.kptr_restrict): kernel frames stay unnamed",
      );
    }
    return "/proc/kallsyms readable";
  }));
  for (const runtime of RUNTIMES) {
    if (runtime.check !== null) results.push(attempt(runtime.check.name, false, () => runtime.check!.run()));
  }
  return results;
}

/** Prints the checks; exit code 0 when every essential check passed. */
export function checkCommand(): number {
  const results = runChecks();
  const width = Math.max(...results.map((result) => result.name.length));
  for (const result of results) {
    console.log(`${result.ok ? "ok  " : "FAIL"}  ${result.name.padEnd(width)}  ${result.detail}`);
  }
  const failed = results.filter((result) => !result.ok && result.essential);
  console.log(failed.length === 0 ? "omniprof can record here." : "omniprof cannot record here.");
  return failed.length === 0 ? 0 : 1;
}
