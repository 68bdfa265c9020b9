/**
 * omniprof's logging: loggers named by category, four levels, messages with `{name}` placeholders filled
 * from a properties object, and one sink (stderr unless configured otherwise).
 *
 * It stands in for an npm logging library on purpose: importing one costs every run of omniprof about
 * 25 ms of CPU (the package resolution and Node compatibility layer it brings in), a tenth of a whole
 * 10-second record. What omniprof needs of logging fits here.
 *
 * @example
 * ```ts
 * import { configureLogging, getLogger } from "./logger.ts";
 * configureLogging({ level: "debug" });
 * const logger = getLogger(["omniprof", "unwind"]);
 * logger.debug("Loaded {path}: {count} rows", { path: "/usr/lib/libc.so.6", count: 552 });
 * // stderr: 21:05:07.123 DBG omniprof·unwind Loaded /usr/lib/libc.so.6: 552 rows
 * ```
 *
 * @module
 */

/** How much a message matters, least first. */
export type LogLevel = "debug" | "info" | "warning" | "error";

/** The levels, in order; also what OMNIPROF_LOG accepts. */
export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warning", "error"];

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warning: 2, error: 3 };
const ABBREVIATION: Record<LogLevel, string> = { debug: "DBG", info: "INF", warning: "WRN", error: "ERR" };

/** One message as a sink receives it. */
export interface LogRecord {
  readonly category: readonly string[];
  readonly level: LogLevel;
  /** The template with its placeholders filled. */
  readonly message: string;
  readonly template: string;
  readonly properties: Readonly<Record<string, unknown>>;
  /** Milliseconds since the epoch. */
  readonly timestamp: number;
}

/** Where records go. */
export type LogSink = (record: LogRecord) => void;

/** What {@linkcode configureLogging} sets; each field keeps its current value when absent. */
export interface LoggingOptions {
  /** The lowest level written (default "warning"). */
  level?: LogLevel;
  /** Receives every record at or above `level` (default: one line each on stderr). */
  sink?: LogSink;
}

let lowest = RANK.warning;
let sink: LogSink = stderrSink;

/** Sets the level and sink for every logger, those already made included. */
export function configureLogging(options: LoggingOptions): void {
  if (options.level !== undefined) lowest = RANK[options.level];
  if (options.sink !== undefined) sink = options.sink;
}

/** Back to warnings and errors on stderr. */
export function resetLogging(): void {
  lowest = RANK.warning;
  sink = stderrSink;
}

/** The level named by `text` (as in OMNIPROF_LOG; "warn" too), or null. */
export function parseLogLevel(text: string): LogLevel | null {
  const name = text.trim().toLowerCase();
  if (name === "warn") return "warning";
  return (LOG_LEVELS as readonly string[]).includes(name) ? name as LogLevel : null;
}

/** Writes the messages of one part of omniprof, named by its category. */
export class Logger {
  readonly category: readonly string[];

  constructor(category: readonly string[]) {
    this.category = category;
  }

  /** Whether a message at `level` would be written: lets a caller skip building an expensive one. */
  isEnabledFor(level: LogLevel): boolean {
    return RANK[level] >= lowest;
  }

  debug(template: string, properties: Record<string, unknown> = {}): void {
    this.#log("debug", template, properties);
  }

  info(template: string, properties: Record<string, unknown> = {}): void {
    this.#log("info", template, properties);
  }

  warn(template: string, properties: Record<string, unknown> = {}): void {
    this.#log("warning", template, properties);
  }

  error(template: string, properties: Record<string, unknown> = {}): void {
    this.#log("error", template, properties);
  }

  #log(level: LogLevel, template: string, properties: Record<string, unknown>): void {
    // The common case, a debug message in a normal run, costs one comparison.
    if (RANK[level] < lowest) return;
    sink({
      category: this.category,
      level,
      message: renderTemplate(template, properties),
      template,
      properties,
      timestamp: Date.now(),
    });
  }
}

/** A logger for `category`, e.g. `["omniprof", "unwind"]`. */
export function getLogger(category: readonly string[]): Logger {
  return new Logger(category);
}

/**
 * `template` with each `{name}` replaced by `properties[name]`: strings as they are, other values as
 * Deno.inspect shows them. `{{` and `}}` stand for braces; an unknown name stays as written.
 */
export function renderTemplate(template: string, properties: Readonly<Record<string, unknown>>): string {
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (match, name: string | undefined) => {
    if (name === undefined) return match[0]!;
    if (!Object.hasOwn(properties, name)) return match;
    const value = properties[name];
    return typeof value === "string" ? value : Deno.inspect(value, { colors: false, compact: true });
  });
}

/**
 * `HH:MM:SS.mmm LVL category message`, the form the default sink writes. A message of several lines (a
 * verifier log) continues on lines indented by two spaces, so a reader can tell where a record ends.
 */
export function formatLogRecord(record: LogRecord): string {
  const time = new Date(record.timestamp);
  const pad = (value: number, width = 2) => String(value).padStart(width, "0");
  const clock = `${pad(time.getHours())}:${pad(time.getMinutes())}:${pad(time.getSeconds())}.` +
    pad(time.getMilliseconds(), 3);
  const message = record.message.trimEnd().replaceAll("\n", "\n  ");
  return `${clock} ${ABBREVIATION[record.level]} ${record.category.join("·")} ${message}`;
}

function stderrSink(record: LogRecord): void {
  console.error(formatLogRecord(record));
}
