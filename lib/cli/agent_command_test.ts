import assert from "node:assert/strict";
import { parseAgentArgs } from "./agent_command.ts";

Deno.test("parseAgentArgs() applies the fleet defaults: 20 Hz, 60 s intervals, OTLP/HTTP, 30 profiles held", () => {
  assert.deepEqual(parseAgentArgs(["--otlp-endpoint", "http://collector:4318"]), {
    endpoint: "http://collector:4318",
    protocol: "http",
    frequencyHz: 20,
    intervalSeconds: 60,
    pprofDir: null,
    bufferLimit: 30,
    shutdownTimeoutSeconds: 10,
    requestTimeoutSeconds: 10,
    headers: {},
    idle: false,
  });
});

Deno.test("parseAgentArgs() reads every option", () => {
  const args = parseAgentArgs([
    "--otlp-endpoint",
    "https://otel.example:4317",
    "--protocol",
    "grpc",
    "--header",
    "Authorization=Bearer a=b",
    "--header",
    "x-scope-orgid=fleet",
    "-F",
    "49",
    "--interval",
    "0.5",
    "--pprof-dir",
    "/var/lib/profiles",
    "--buffer-limit",
    "5",
    "--timeout",
    "2",
    "--shutdown-timeout",
    "3",
    "--idle",
  ]);
  assert.deepEqual(args, {
    endpoint: "https://otel.example:4317",
    protocol: "grpc",
    frequencyHz: 49,
    intervalSeconds: 0.5,
    pprofDir: "/var/lib/profiles",
    bufferLimit: 5,
    shutdownTimeoutSeconds: 3,
    requestTimeoutSeconds: 2,
    headers: { authorization: "Bearer a=b", "x-scope-orgid": "fleet" },
    idle: true,
  });
  assert.equal(parseAgentArgs(["--pprof-dir", "out"]).endpoint, null, "pprof files alone are enough");
});

Deno.test("parseAgentArgs() refuses what it cannot honour, naming the option", () => {
  assert.throws(() => parseAgentArgs([]), /give --otlp-endpoint URL, --pprof-dir DIR, or both/);
  assert.throws(() => parseAgentArgs(["--otlp-endpoint", "collector:4318"]), /--otlp-endpoint: .*http:\/\//);
  assert.throws(
    () => parseAgentArgs(["--pprof-dir", "d", "--protocol", "udp"]),
    /--protocol udp: use http or grpc/,
  );
  assert.throws(
    () => parseAgentArgs(["--pprof-dir", "d", "--interval", "0.01"]),
    /--interval 0.01: expected seconds from 0.1 to/,
  );
  assert.throws(
    () => parseAgentArgs(["--pprof-dir", "d", "--buffer-limit", "2.5"]),
    /--buffer-limit 2.5: expected a whole number from 1 to/,
  );
  assert.throws(
    () => parseAgentArgs(["--pprof-dir", "d", "--buffer-limit", "0"]),
    /--buffer-limit 0: expected a whole number from 1 to/,
  );
  assert.throws(() => parseAgentArgs(["--pprof-dir", "d", "--header", "no-equals"]), /expected NAME=VALUE/);
  assert.throws(() => parseAgentArgs(["--pprof-dir", "d", "-F", "0"]), /-F 0/);
  assert.throws(() => parseAgentArgs(["--pprof-dir", "d", "stray"]), /stray/);
  assert.throws(() => parseAgentArgs(["--help"]), (error: Error) => error.message === "");
});
