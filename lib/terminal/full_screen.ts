/**
 * A full-screen terminal session for live views: switches to the alternate screen (so the shell's
 * scrollback is left as it was), hides the cursor and puts the keyboard in raw mode (keys arrive one by
 * one, unechoed, Ctrl-C as a byte), and undoes all of it on {@linkcode FullScreen.restore}. Restoring is
 * idempotent and also runs when the process exits through `Deno.exit` (the `unload` event), so a crash
 * path that skips the caller's `finally` still gives the terminal back.
 *
 * @example
 * ```ts ignore
 * import { FullScreen } from "./full_screen.ts";
 * using screen = FullScreen.enter();
 * screen.draw(["hello", "press q"]);
 * for await (const key of screen.keys()) if (key === "q") break;
 * ```
 *
 * @module
 */

const encoder = new TextEncoder();

/** Escape sequences (VT100/xterm) the session uses. */
export const ESC = {
  enterAlternateScreen: "\x1b[?1049h",
  leaveAlternateScreen: "\x1b[?1049l",
  hideCursor: "\x1b[?25l",
  showCursor: "\x1b[?25h",
  home: "\x1b[H",
  clearToEndOfLine: "\x1b[K",
  clearToEndOfScreen: "\x1b[J",
  reverse: "\x1b[7m",
  bold: "\x1b[1m",
  reset: "\x1b[0m",
} as const;

/** Where the session writes and reads; the real terminal by default. */
export interface TerminalStreams {
  output: { writeSync(bytes: Uint8Array): number };
  input: {
    setRaw(raw: boolean): void;
    isTerminal(): boolean;
    read(buffer: Uint8Array): Promise<number | null>;
  };
}

/** An active full-screen session. */
export class FullScreen implements Disposable {
  #streams: TerminalStreams;
  #raw: boolean;
  #restored = false;
  #onUnload = () => this.restore();

  private constructor(streams: TerminalStreams, raw: boolean) {
    this.#streams = streams;
    this.#raw = raw;
  }

  /**
   * Enters full-screen mode. The keyboard is put in raw mode only when standard input is a terminal;
   * otherwise Ctrl-C stays a signal.
   */
  static enter(streams: TerminalStreams = { output: Deno.stdout, input: Deno.stdin }): FullScreen {
    const raw = streams.input.isTerminal();
    const screen = new FullScreen(streams, raw);
    // Registered first, so that a failure half-way through entering is still undone.
    globalThis.addEventListener("unload", screen.#onUnload);
    try {
      const enter = ESC.enterAlternateScreen + ESC.hideCursor + ESC.home + ESC.clearToEndOfScreen;
      writeAll(streams.output, encoder.encode(enter));
      if (raw) streams.input.setRaw(true);
    } catch (error) {
      screen.restore();
      throw error;
    }
    return screen;
  }

  /** Whether keys arrive one by one (raw mode). */
  get raw(): boolean {
    return this.#raw;
  }

  /** Replaces the screen's content with `lines` (already cut to the screen's width and height). */
  draw(lines: readonly string[]): void {
    if (this.#restored) return;
    // Raw mode turns off output processing too: lines are separated by \r\n, not \n. None follows the
    // last line: on the bottom row it would scroll the screen up by one.
    const frame = ESC.home + lines.map((line) => line + ESC.clearToEndOfLine).join("\r\n") +
      ESC.clearToEndOfScreen;
    writeAll(this.#streams.output, encoder.encode(frame));
  }

  /** The keys pressed, as strings (one read each), until the session is restored or input ends. */
  async *keys(): AsyncGenerator<string> {
    const buffer = new Uint8Array(64);
    const decoder = new TextDecoder();
    while (!this.#restored) {
      const n = await this.#streams.input.read(buffer);
      if (n === null || this.#restored) return;
      yield decoder.decode(buffer.subarray(0, n));
    }
  }

  /** Leaves full-screen mode: cooked keyboard, visible cursor, the main screen. Safe to call twice. */
  restore(): void {
    if (this.#restored) return;
    this.#restored = true;
    globalThis.removeEventListener("unload", this.#onUnload);
    try {
      if (this.#raw) this.#streams.input.setRaw(false);
    } finally {
      writeAll(this.#streams.output, encoder.encode(ESC.reset + ESC.showCursor + ESC.leaveAlternateScreen));
    }
  }

  [Symbol.dispose](): void {
    this.restore();
  }
}

function writeAll(output: TerminalStreams["output"], bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.length) written += output.writeSync(bytes.subarray(written));
}
