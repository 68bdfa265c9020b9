/**
 * Command-line options: `-d 5`, `-d5`, `--duration 5`, `--duration=5`, flags, repeated options and
 * positional words, with an error for anything not declared. It reads like `node:util`'s parseArgs, which
 * omniprof used before: importing any `node:` module costs a run about 15 ms of CPU (Deno starts its Node
 * compatibility layer), and `record` and `top` need nothing else from it.
 *
 * @example
 * ```ts
 * import { parseOptions } from "./options.ts";
 * const { values, positionals } = parseOptions(["-d", "5", "--stats=s.json", "out.pb.gz"], {
 *   duration: { type: "string", short: "d" },
 *   stats: { type: "string" },
 *   pid: { type: "string", short: "p", multiple: true },
 *   help: { type: "boolean", short: "h" },
 * }, { allowPositionals: true });
 * // values: { duration: "5", stats: "s.json" }; positionals: ["out.pb.gz"]
 * ```
 *
 * @module
 */

/** One option: a flag ("boolean") or one that takes a value ("string"), perhaps given more than once. */
export interface OptionSpec {
  readonly type: "string" | "boolean";
  /** A one-letter alias, used as `-x`. */
  readonly short?: string;
  /** Collect every occurrence into an array (else the last one wins). */
  readonly multiple?: boolean;
}

/** The value each declared option gets; absent when not given. */
export type OptionValues<T extends Record<string, OptionSpec>> = {
  -readonly [K in keyof T]?: T[K]["type"] extends "boolean" ? boolean
    : T[K]["multiple"] extends true ? string[]
    : string;
};

/**
 * Thrown for an undeclared option, a missing value (or an option where a value should be), a value given
 * to a flag, or a stray word.
 */
export class OptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OptionError";
  }
}

/**
 * Parses `args` against `options`. `--` ends the options: the words after it are positionals (refused,
 * like any other, without `allowPositionals`). A value that looks like an option is refused unless given
 * inline (`--output=-x`, `-o-x`). Throws OptionError with a message meant for the user.
 */
export function parseOptions<const T extends Record<string, OptionSpec>>(
  args: readonly string[],
  options: T,
  settings: { allowPositionals?: boolean } = {},
): { values: OptionValues<T>; positionals: string[] } {
  const byShort = new Map<string, string>();
  for (const [name, spec] of Object.entries(options)) {
    if (spec.short !== undefined) byShort.set(spec.short, name);
  }
  const values: Record<string, string | boolean | string[]> = {};
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      const rest = args.slice(i + 1);
      if (rest.length > 0 && !settings.allowPositionals) {
        throw new OptionError(`Unexpected argument '${rest[0]}'`);
      }
      positionals.push(...rest);
      break;
    }
    let name: string | undefined;
    let inline: string | undefined;
    let shown: string;
    if (arg.startsWith("--")) {
      const equals = arg.indexOf("=");
      name = arg.slice(2, equals < 0 ? undefined : equals);
      inline = equals < 0 ? undefined : arg.slice(equals + 1);
      shown = `--${name}`;
      if (!Object.hasOwn(options, name)) throw new OptionError(`Unknown option '${shown}'`);
    } else if (arg.length > 1 && arg.startsWith("-")) {
      shown = arg.slice(0, 2);
      name = byShort.get(arg[1]!);
      if (name === undefined) throw new OptionError(`Unknown option '${shown}'`);
      if (arg.length > 2) inline = arg.slice(2);
    } else {
      if (!settings.allowPositionals) throw new OptionError(`Unexpected argument '${arg}'`);
      positionals.push(arg);
      continue;
    }
    const spec = options[name]!;
    if (spec.type === "boolean") {
      if (inline !== undefined) throw new OptionError(`Option '${shown}' does not take a value`);
      values[name] = true;
      continue;
    }
    let value = inline;
    if (value === undefined) {
      if (i + 1 >= args.length) throw new OptionError(`Option '${shown}' needs a value`);
      value = args[++i]!;
      // `-o --demo` is far more likely a forgotten value than a file named "--demo".
      if (value.length > 1 && value.startsWith("-")) {
        const inlineForm = shown.startsWith("--") ? `${shown}=${value}` : `${shown}${value}`;
        throw new OptionError(
          `Option '${shown}' needs a value, not '${value}' (write ${inlineForm} if that is the value)`,
        );
      }
    }
    if (spec.multiple) {
      const list = values[name];
      if (Array.isArray(list)) list.push(value);
      else values[name] = [value];
    } else values[name] = value;
  }
  return { values: values as OptionValues<T>, positionals };
}
