/**
 * The signals that ask a command-line program to stop (SIGINT from Ctrl-C, SIGTERM from `kill` or a
 * service manager, SIGHUP when the terminal goes away), caught for the whole run of a command so that none
 * of them kills it halfway through (a temporary file left, a child left running). Each phase asks for an
 * AbortSignal that aborts at the next one: the first ends a recording, another one during the stop of its
 * command kills the command at once, another one while symbolizing writes the profile without names.
 *
 * Listeners run when the event loop turns: a signal that comes during synchronous work (loading BPF
 * programs, writing a file) is acted on once that work ends.
 *
 * @example
 * ```ts ignore
 * import { Interrupts } from "./interrupts.ts";
 * using interrupts = Interrupts.listen();
 * await work(interrupts.next()); // aborts at the next Ctrl-C
 * ```
 *
 * @module
 */

/** The signals caught, in the order a program is usually asked with them. */
export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/** A signal that asks the program to stop. */
export type StopSignal = typeof STOP_SIGNALS[number];

/** Exit status of a program that a stop signal ended, as a shell reports it: 128 + the signal's number. */
export function exitCodeOf(signal: StopSignal): number {
  return 128 + { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }[signal];
}

/** Thrown when a stop signal ends a command before it did anything worth keeping. */
export class InterruptedError extends Error {
  readonly signal: StopSignal;
  constructor(signal: StopSignal, what: string) {
    super(`${signal === "SIGINT" ? "Interrupted" : `Stopped by ${signal}`} ${what}`);
    this.name = "InterruptedError";
    this.signal = signal;
  }
}

/** The stop signals received since {@linkcode Interrupts.listen}, until disposed. */
export class Interrupts implements Disposable {
  #received: StopSignal[] = [];
  #waiting: { after: number; controller: AbortController }[] = [];
  #listeners: [StopSignal, () => void][] = [];

  private constructor() {}

  /** Catches the stop signals from now on, until disposed. */
  static listen(): Interrupts {
    const interrupts = new Interrupts();
    for (const signal of STOP_SIGNALS) {
      const listener = () => interrupts.#receive(signal);
      Deno.addSignalListener(signal, listener);
      interrupts.#listeners.push([signal, listener]);
    }
    return interrupts;
  }

  /** The signals received so far, first first. */
  get received(): readonly StopSignal[] {
    return this.#received;
  }

  /** The last signal received, or null. */
  get last(): StopSignal | null {
    return this.#received.at(-1) ?? null;
  }

  /**
   * An AbortSignal that aborts once a signal comes after the `seen` first ones (by default: after those
   * received so far), its reason the StopSignal's name.
   */
  next(seen = this.#received.length): AbortSignal {
    const controller = new AbortController();
    if (this.#received.length > seen) controller.abort(this.#received[seen]);
    else this.#waiting.push({ after: seen, controller });
    return controller.signal;
  }

  /** Stands in for a signal received (tests, and callers that stop for reasons of their own). */
  receive(signal: StopSignal): void {
    this.#receive(signal);
  }

  #receive(signal: StopSignal): void {
    this.#received.push(signal);
    const ready = this.#waiting.filter((waiting) => this.#received.length > waiting.after);
    this.#waiting = this.#waiting.filter((waiting) => !ready.includes(waiting));
    for (const { controller } of ready) controller.abort(signal);
  }

  /** Stops catching: the signals act as they would without it again. */
  [Symbol.dispose](): void {
    for (const [signal, listener] of this.#listeners) Deno.removeSignalListener(signal, listener);
    this.#listeners = [];
  }
}
