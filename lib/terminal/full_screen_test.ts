import assert from "node:assert/strict";
import { ESC, FullScreen, type TerminalStreams } from "./full_screen.ts";

/** A terminal that records what is written to it and the raw-mode switches. */
class RecordingTerminal implements TerminalStreams {
  written = "";
  rawCalls: boolean[] = [];
  keys: string[] = [];
  #decoder = new TextDecoder();
  #encoder = new TextEncoder();

  constructor(readonly tty: boolean, readonly chunk = Infinity) {}

  output = {
    // Writes at most `chunk` bytes at a time, as a busy terminal may.
    writeSync: (bytes: Uint8Array): number => {
      const n = Math.min(bytes.length, this.chunk);
      this.written += this.#decoder.decode(bytes.subarray(0, n), { stream: true });
      return n;
    },
  };

  input = {
    setRaw: (raw: boolean) => void this.rawCalls.push(raw),
    isTerminal: () => this.tty,
    read: (buffer: Uint8Array): Promise<number | null> => {
      const key = this.keys.shift();
      if (key === undefined) return Promise.resolve(null);
      const bytes = this.#encoder.encode(key);
      buffer.set(bytes);
      return Promise.resolve(bytes.length);
    },
  };
}

Deno.test("FullScreen takes the alternate screen in raw mode and gives everything back once", () => {
  const terminal = new RecordingTerminal(true, 7);
  const screen = FullScreen.enter(terminal);
  assert.ok(screen.raw);
  assert.deepEqual(terminal.rawCalls, [true]);
  assert.ok(terminal.written.startsWith(ESC.enterAlternateScreen + ESC.hideCursor));
  terminal.written = "";
  screen.draw(["line one", "line two"]);
  assert.equal(
    terminal.written,
    `${ESC.home}line one${ESC.clearToEndOfLine}\r\nline two${ESC.clearToEndOfLine}${ESC.clearToEndOfScreen}`,
    "every byte is written even when the terminal takes few at a time; \\r\\n between lines, none after the last",
  );
  terminal.written = "";
  screen.restore();
  screen.restore();
  screen[Symbol.dispose]();
  assert.deepEqual(terminal.rawCalls, [true, false]);
  assert.equal(terminal.written, ESC.reset + ESC.showCursor + ESC.leaveAlternateScreen);
  terminal.written = "";
  screen.draw(["after"]);
  assert.equal(terminal.written, "", "nothing is drawn after restoring");
});

Deno.test("FullScreen leaves the keyboard alone when input is not a terminal, and restores on unload", () => {
  const terminal = new RecordingTerminal(false);
  const screen = FullScreen.enter(terminal);
  assert.equal(screen.raw, false);
  // Deno.exit dispatches "unload": the screen is given back even if the caller's finally never runs.
  globalThis.dispatchEvent(new Event("unload"));
  assert.ok(terminal.written.endsWith(ESC.showCursor + ESC.leaveAlternateScreen));
  assert.deepEqual(terminal.rawCalls, []);
  const length = terminal.written.length;
  screen.restore();
  assert.equal(terminal.written.length, length);
});

Deno.test("FullScreen.keys() yields what is typed until input ends or the screen is restored", async () => {
  const terminal = new RecordingTerminal(true);
  terminal.keys = ["j", "\x03", "q"];
  const screen = FullScreen.enter(terminal);
  const seen: string[] = [];
  for await (const key of screen.keys()) {
    seen.push(key);
    if (key === "\x03") screen.restore();
  }
  assert.deepEqual(seen, ["j", "\x03"]);
  terminal.keys = [];
  const again = FullScreen.enter(terminal);
  const none: string[] = [];
  for await (const key of again.keys()) none.push(key);
  assert.deepEqual(none, []);
  again.restore();
});
