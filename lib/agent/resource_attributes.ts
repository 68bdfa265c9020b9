/**
 * The OpenTelemetry resource of each profiled process: the host's attributes (`host.name`, `host.arch`,
 * `os.type`) and the process's (`process.pid`, `process.executable.path` and `.name` from `/proc/PID/exe`,
 * `container.id` from `/proc/PID/cgroup`), named as the semantic conventions name them.
 *
 * Processes are read when a profile that mentions them is exported, and remembered while they keep the
 * same start time (a reused pid is read again). A process that has already exited by then is described by
 * what was read before, or else by its main thread's name: short-lived processes lose their path and
 * container, never their samples.
 *
 * @example
 * ```ts ignore
 * import { ResourceAttributes } from "./resource_attributes.ts";
 * const resources = new ResourceAttributes();
 * resources.update(profile);
 * encodeOtlpProfiles(profile, { resourceAttributes: (pid) => resources.of(pid), scope });
 * ```
 *
 * @module
 */
import { basename } from "node:path";
import type { OtlpAttributes, OtlpValue } from "../output/otlp.ts";
import type { Profile } from "../profile/profile.ts";
import { processNames } from "../profile/process_names.ts";
import { readContainerId } from "./container_id.ts";
import { readProcessKey } from "../process/process_key.ts";
import type { Pid } from "../types.ts";

/** What was read about one process. */
export interface ProcessInfo {
  pid: number;
  /** Start time in clock ticks since boot (field 22 of /proc/PID/stat), -1 if unknown. */
  startTicks: number;
  /** Target of /proc/PID/exe without " (deleted)", or "" (kernel threads, exited processes). */
  executablePath: string;
  /** Base name of the executable, or the process's name (`comm`) when there is no executable. */
  executableName: string;
  containerId: string | null;
}

/** Options of {@linkcode ResourceAttributes}. */
export interface ResourceAttributesOptions {
  /** Where procfs is mounted (default /proc). */
  procRoot?: string;
  /** The host's name (default: the system's host name). */
  hostName?: string;
}

/** `host.arch` values of the semantic conventions, by the architecture Deno reports. */
const HOST_ARCH: Readonly<Record<string, string>> = { x86_64: "amd64", aarch64: "arm64" };

/** Reads and remembers process resources. */
export class ResourceAttributes {
  readonly host: OtlpAttributes;
  #procRoot: string;
  #processes = new Map<number, ProcessInfo>();

  constructor(options: ResourceAttributesOptions = {}) {
    this.#procRoot = options.procRoot ?? "/proc";
    const arch = HOST_ARCH[Deno.build.arch] ?? Deno.build.arch;
    this.host = [["host.name", options.hostName ?? Deno.hostname()], ["host.arch", arch], [
      "os.type",
      "linux",
    ]];
  }

  /**
   * Reads the processes that have samples in `profile` (those not known yet, or whose pid was reused) and
   * forgets those that have none.
   */
  update(profile: Profile): void {
    const names = processNames(profile);
    const next = new Map<number, ProcessInfo>();
    for (const [pid, comm] of names) {
      const known = this.#processes.get(pid);
      const startTicks = readProcessKey(pid as Pid, this.#procRoot)?.startTicks ?? -1;
      if (known && (startTicks === -1 || startTicks === known.startTicks)) {
        next.set(pid, known);
        continue;
      }
      next.set(pid, this.#read(pid, startTicks, comm));
    }
    this.#processes = next;
  }

  /** What is known of process `pid` (after {@linkcode update}), or undefined. */
  info(pid: number): ProcessInfo | undefined {
    return this.#processes.get(pid);
  }

  /** The resource attributes of process `pid`: the host's, then the process's. */
  of(pid: number): OtlpAttributes {
    const info = this.#processes.get(pid);
    const attributes: Array<readonly [string, OtlpValue]> = [...this.host, ["process.pid", pid]];
    if (info) {
      if (info.executablePath !== "") attributes.push(["process.executable.path", info.executablePath]);
      if (info.executableName !== "") attributes.push(["process.executable.name", info.executableName]);
      if (info.containerId !== null) attributes.push(["container.id", info.containerId]);
    }
    return attributes;
  }

  #read(pid: number, startTicks: number, comm: string): ProcessInfo {
    let executablePath = "";
    try {
      executablePath = Deno.readLinkSync(`${this.#procRoot}/${pid}/exe`).replace(/ \(deleted\)$/, "");
    } catch {
      // a kernel thread, or gone
    }
    return {
      pid,
      startTicks,
      executablePath,
      executableName: executablePath !== "" ? basename(executablePath) : comm,
      containerId: readContainerId(pid, this.#procRoot),
    };
  }
}
