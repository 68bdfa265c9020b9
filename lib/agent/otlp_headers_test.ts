import assert from "node:assert/strict";
import {
  HeaderError,
  parseHeaderAssignment,
  parseHeaderFile,
  parseOtlpHeadersVariable,
} from "./otlp_headers.ts";

const VARIABLE = "OTEL_EXPORTER_OTLP_HEADERS";

function assertHeaderError(fn: () => unknown, expected: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof HeaderError, String(error));
    assert.match(error.message, expected);
    assert.doesNotMatch(error.message, /s3cret/, "a value is never repeated");
    return true;
  });
}

Deno.test("parseOtlpHeadersVariable() reads the specification's format: key=value pairs, percent-encoded", () => {
  assert.deepEqual(parseOtlpHeadersVariable("api-key=abc,X-Tenant=t1", VARIABLE), {
    "api-key": "abc",
    "x-tenant": "t1",
  });
  // Spaces around members, keys and values are optional whitespace; %20 is a space, + stays a plus.
  assert.deepEqual(
    parseOtlpHeadersVariable(" authorization = Basic%20dXNlcjpwYXNz , x-a=1+1%3D2 ", VARIABLE),
    { authorization: "Basic dXNlcjpwYXNz", "x-a": "1+1=2" },
  );
  // An empty variable is an unset one; the later of two equal keys wins.
  assert.deepEqual(parseOtlpHeadersVariable("", VARIABLE), {});
  assert.deepEqual(parseOtlpHeadersVariable("  ", VARIABLE), {});
  assert.deepEqual(parseOtlpHeadersVariable("a=1,A=2", VARIABLE), { a: "2" });
  assert.deepEqual(parseOtlpHeadersVariable("a=", VARIABLE), { a: "" });
});

Deno.test("parseOtlpHeadersVariable() refuses what it cannot send, without repeating the value", () => {
  assertHeaderError(
    () => parseOtlpHeadersVariable("a=1,s3cret", VARIABLE),
    /^OTEL_EXPORTER_OTLP_HEADERS entry 2: expected key=value$/,
  );
  assertHeaderError(
    () => parseOtlpHeadersVariable("a=%E0%A4%As3cret", VARIABLE),
    /entry 1: the value is not valid percent-encoding/,
  );
  assertHeaderError(
    () => parseOtlpHeadersVariable("a=s3cret%0D%0AX-Injected: 1", VARIABLE),
    /entry 1: the value of a holds a line break or a character HTTP cannot carry/,
  );
  assertHeaderError(
    () => parseOtlpHeadersVariable("a=%E2%82%AC-s3cret", VARIABLE),
    /character HTTP cannot carry/,
  );
  assertHeaderError(
    () => parseOtlpHeadersVariable("bad key=s3cret", VARIABLE),
    /"bad key" is not a valid header name/,
  );
  assertHeaderError(() => parseOtlpHeadersVariable("=s3cret", VARIABLE), /"" is not a valid header name/);
});

Deno.test("parseHeaderFile() reads NAME=VALUE lines, skipping comments and blank lines", () => {
  const text =
    "# token of the collector\r\nAuthorization=Bearer a=b\r\n\n  x-scope-orgid =  fleet  \n#x-off=1\n";
  assert.deepEqual(parseHeaderFile(text, "h"), { authorization: "Bearer a=b", "x-scope-orgid": "fleet" });
  assert.deepEqual(parseHeaderFile("", "h"), {});
  assertHeaderError(
    () => parseHeaderFile("a=1\nAuthorization: s3cret\n", "/etc/h"),
    /^\/etc\/h line 2: expected NAME=VALUE$/,
  );
  assertHeaderError(
    () => parseHeaderFile("a=s3cret\x00\n", "h"),
    /^h line 1: the value of a holds a line break/,
  );
});

Deno.test("parseHeaderAssignment() takes the first = as the separator, as --header does", () => {
  assert.deepEqual(parseHeaderAssignment("X-Key=a=b", "--header"), ["x-key", "a=b"]);
  assertHeaderError(() => parseHeaderAssignment("s3cret", "--header"), /^--header: expected NAME=VALUE$/);
  assertHeaderError(
    () => parseHeaderAssignment("a(b)=s3cret", "--header"),
    /"a\(b\)" is not a valid header name/,
  );
});
