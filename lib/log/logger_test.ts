import assert from "node:assert/strict";
import {
  configureLogging,
  formatLogRecord,
  getLogger,
  type LogRecord,
  parseLogLevel,
  renderTemplate,
  resetLogging,
} from "./logger.ts";

Deno.test("renderTemplate() fills placeholders, strings as they are and other values inspected", () => {
  assert.equal(
    renderTemplate("Loaded {path}: {count} rows, {extra}", {
      path: "/lib/libc.so.6",
      count: 552,
      extra: [1],
    }),
    "Loaded /lib/libc.so.6: 552 rows, [ 1 ]",
  );
  assert.equal(renderTemplate("{{literal}} {missing}", {}), "{literal} {missing}");
  // A multi-line string (a verifier log) stays multi-line rather than becoming a quoted literal.
  assert.equal(renderTemplate("{text}", { text: "a\nb" }), "a\nb");
});

Deno.test("loggers write at or above the configured level to the configured sink", () => {
  const records: LogRecord[] = [];
  try {
    const logger = getLogger(["omniprof", "test"]);
    configureLogging({ sink: (record) => records.push(record) });
    logger.debug("hidden");
    logger.info("hidden");
    logger.warn("shown {n}", { n: 1 });
    logger.error("shown");
    assert.deepEqual(records.map((r) => [r.level, r.message]), [["warning", "shown 1"], ["error", "shown"]]);
    assert.equal(logger.isEnabledFor("debug"), false);
    configureLogging({ level: "debug" });
    assert.equal(logger.isEnabledFor("debug"), true);
    logger.debug("now {what}", { what: "shown" });
    assert.equal(records.at(-1)!.message, "now shown");
    assert.deepEqual(records.at(-1)!.category, ["omniprof", "test"]);
  } finally {
    resetLogging();
  }
});

Deno.test("parseLogLevel() accepts the four levels and warn; formatLogRecord() indents continuation lines", () => {
  assert.equal(parseLogLevel("DEBUG"), "debug");
  assert.equal(parseLogLevel("warn"), "warning");
  assert.equal(parseLogLevel("verbose"), null);
  const line = formatLogRecord({
    category: ["omniprof", "unwind"],
    level: "warning",
    message: "Cannot read x",
    template: "Cannot read {path}",
    properties: { path: "x" },
    timestamp: new Date(2026, 0, 2, 3, 4, 5, 6).getTime(),
  });
  assert.equal(line, "03:04:05.006 WRN omniprof·unwind Cannot read x");
  const long = formatLogRecord({
    category: ["omniprof", "libbpf"],
    level: "warning",
    message: "libbpf: load failed\n0: r1 = 0\n",
    template: "{text}",
    properties: {},
    timestamp: 0,
  });
  assert.equal(long.slice(13), "WRN omniprof·libbpf libbpf: load failed\n  0: r1 = 0");
});
