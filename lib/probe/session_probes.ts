/**
 * A session's probes (`record -e`), resolved on this machine, and the tracefs mount they may need: the
 * one owner of both, so that tracefs is unmounted (when the session mounted it) however the session ends.
 *
 * @example
 * ```ts ignore
 * import { SessionProbes } from "./session_probes.ts";
 * using probes = SessionProbes.resolve([parseProbe("tracepoint:syscalls:sys_enter_write")]);
 * record({ probes: probes.probes });
 * ```
 *
 * @module
 */
import {
  kernelFunction,
  kprobesSupported,
  type ProbeSpec,
  type ResolvedProbe,
  resolveProbe,
} from "./probe_spec.ts";
import { Tracefs } from "./tracefs.ts";

/** Resolved probes, and the tracefs mounted for them. */
export class SessionProbes implements Disposable {
  readonly probes: readonly ResolvedProbe[];
  #tracefs: Tracefs | null;

  private constructor(probes: readonly ResolvedProbe[], tracefs: Tracefs | null) {
    this.probes = probes;
    this.#tracefs = tracefs;
  }

  /**
   * Resolves `specs`, mounting tracefs first if a tracepoint is among them and it is not mounted.
   *
   * @throws {ProbeError} from {@linkcode resolveProbe}; tracefs is then left as it was.
   */
  static resolve(specs: readonly ProbeSpec[]): SessionProbes {
    let tracefs: Tracefs | null = null;
    const machine = {
      tracefs: () => tracefs ??= Tracefs.mount(),
      kprobesSupported,
      kernelFunction,
    };
    try {
      const probes = specs.map((spec) => resolveProbe(spec, machine));
      return new SessionProbes(probes, tracefs);
    } catch (error) {
      // The closure assigned it: TypeScript cannot see that here.
      (tracefs as Tracefs | null)?.close();
      throw error;
    }
  }

  /** Unmounts tracefs if this session mounted it. Safe to call twice. */
  close(): void {
    this.#tracefs?.close();
    this.#tracefs = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
