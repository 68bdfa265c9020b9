/**
 * Extra request headers of the OTLP exporter (authentication, tenant ids), from the three places they may
 * come from: `--header NAME=VALUE`, a header file of such lines, and the OpenTelemetry environment
 * variables `OTEL_EXPORTER_OTLP_HEADERS` / `OTEL_EXPORTER_OTLP_PROFILES_HEADERS`, whose format is that of
 * the W3C Baggage header without properties: `key1=value1,key2=value2`, values percent-encoded. Secrets
 * belong in the file or the environment: a command line is readable by every user of the machine.
 *
 * Every name must be an HTTP token and every value a valid header value (no line breaks): a bad one is
 * refused here, before sampling starts, rather than failing each request.
 *
 * @example
 * ```ts
 * import { parseHeaderFile, parseOtlpHeadersVariable } from "./otlp_headers.ts";
 * parseOtlpHeadersVariable("api-key=s%3Dcret,x-tenant=a", "OTEL_EXPORTER_OTLP_HEADERS");
 * // { "api-key": "s=cret", "x-tenant": "a" }
 * parseHeaderFile("# the collector's token\nAuthorization=Bearer abc\n", "/etc/omniprof/headers");
 * // { authorization: "Bearer abc" }
 * ```
 *
 * @module
 */

/** The environment variables of the OpenTelemetry specification, general first: the later one wins. */
export const OTLP_HEADER_VARIABLES = [
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_EXPORTER_OTLP_PROFILES_HEADERS",
] as const;

/** An HTTP field name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** An HTTP field value: visible ASCII, spaces and tabs, and obsolete text bytes; no CR, LF or NUL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** A header given in a form omniprof cannot send. */
export class HeaderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HeaderError";
  }
}

/** Parses one `NAME=VALUE` (as `--header` takes it); the name lowercased. `where` names it for errors. */
export function parseHeaderAssignment(text: string, where: string): [string, string] {
  const equals = text.indexOf("=");
  if (equals <= 0) throw new HeaderError(`${where}: expected NAME=VALUE`);
  return checkedHeader(text.slice(0, equals), text.slice(equals + 1), where);
}

/**
 * Parses a header file: one `NAME=VALUE` per line; blank lines and lines starting with `#` are skipped,
 * and spaces around the name and the value are not part of them (HTTP drops them from values too).
 */
export function parseHeaderFile(text: string, path: string): Record<string, string> {
  const headers: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "" || line.startsWith("#")) continue;
    const where = `${path} line ${i + 1}`;
    const equals = line.indexOf("=");
    if (equals <= 0) throw new HeaderError(`${where}: expected NAME=VALUE`);
    const [name, value] = checkedHeader(line.slice(0, equals).trim(), line.slice(equals + 1), where);
    headers[name] = value;
  }
  return headers;
}

/**
 * Parses the value of `OTEL_EXPORTER_OTLP_HEADERS` (or its profiles variant): comma-separated
 * `key=value` pairs, optional spaces around each part, values percent-decoded. `variable` names it for
 * errors. An empty value means no headers, as the specification says of every variable.
 */
export function parseOtlpHeadersVariable(value: string, variable: string): Record<string, string> {
  const headers: Record<string, string> = {};
  if (value.trim() === "") return headers;
  for (const [index, member] of value.split(",").entries()) {
    const where = `${variable} entry ${index + 1}`;
    const equals = member.indexOf("=");
    if (equals < 0) throw new HeaderError(`${where}: expected key=value`);
    let decoded: string;
    try {
      decoded = decodeURIComponent(member.slice(equals + 1).trim());
    } catch {
      throw new HeaderError(`${where}: the value is not valid percent-encoding`);
    }
    const [name, headerValue] = checkedHeader(member.slice(0, equals).trim(), decoded, where);
    headers[name] = headerValue;
  }
  return headers;
}

function checkedHeader(name: string, value: string, where: string): [string, string] {
  if (!TOKEN.test(name)) throw new HeaderError(`${where}: "${name}" is not a valid header name`);
  const trimmed = value.trim();
  // The value is a secret more often than not: never echoed.
  if (!FIELD_VALUE.test(trimmed)) {
    throw new HeaderError(
      `${where}: the value of ${name} holds a line break or a character HTTP cannot carry`,
    );
  }
  return [name.toLowerCase(), trimmed];
}
