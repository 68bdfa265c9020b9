/**
 * The one-line progress display on stderr: rewritten in place on a terminal, silent otherwise (logs and
 * CI output stay clean). Notes are printed on their own lines in both cases.
 *
 * @module
 */

const encoder = new TextEncoder();

/**
 * A status line on stderr. Once stderr cannot be written (the terminal hung up: EIO; a closed pipe), it
 * stays silent: a message that can no longer be shown must not stop the profile from being written.
 */
export class StatusLine {
  readonly #live: boolean;
  #shown = false;
  #gone = false;

  constructor(live = Deno.stderr.isTerminal()) {
    this.#live = live;
  }

  /** Replaces the status text (terminal only). */
  update(text: string): void {
    if (!this.#live) return;
    this.#write(`\r\x1b[2K${text}`);
    this.#shown = true;
  }

  /** Removes the status text. */
  clear(): void {
    if (!this.#shown) return;
    this.#write("\r\x1b[2K");
    this.#shown = false;
  }

  /** Prints a message on a line of its own. */
  note(text: string): void {
    this.clear();
    this.#write(`omniprof: ${text}\n`);
  }

  #write(text: string): void {
    if (this.#gone) return;
    const bytes = encoder.encode(text);
    try {
      for (let written = 0; written < bytes.length;) {
        written += Deno.stderr.writeSync(bytes.subarray(written));
      }
    } catch {
      this.#gone = true;
    }
  }
}

/**
 * A progress callback for a long step that shows `label: NN%` on the status line (terminal only), at most
 * ten times a second.
 *
 * @example
 * ```ts ignore
 * const status = new StatusLine();
 * formatFlamegraphHtml(profile, { onProgress: progressReporter(status, "writing profile.html") });
 * status.clear();
 * ```
 */
export function progressReporter(status: StatusLine, label: string): (done: number, total: number) => void {
  let last = 0;
  return (done, total) => {
    const now = performance.now();
    if (now - last < 100 && done < total) return;
    last = now;
    status.update(`${label}: ${total > 0 ? Math.floor((100 * done) / total) : 100}%`);
  };
}
