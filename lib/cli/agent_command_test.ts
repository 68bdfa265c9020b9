import assert from "node:assert/strict";
import { parseAgentArgs, readCaFile, requestHeaders } from "./agent_command.ts";

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
    headerFile: null,
    caFile: null,
    idle: false,
    offCpuMinUs: null,
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
    "--header-file",
    "/etc/omniprof/headers",
    "--ca-file",
    "/etc/omniprof/ca.pem",
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
    "--off-cpu",
    "--off-cpu-min",
    "250",
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
    headerFile: "/etc/omniprof/headers",
    caFile: "/etc/omniprof/ca.pem",
    idle: true,
    offCpuMinUs: 250,
  });
  assert.equal(
    parseAgentArgs(["--pprof-dir", "out", "--off-cpu"]).offCpuMinUs,
    1,
    "the default minimum, 1 µs",
  );
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
  assert.throws(
    () => parseAgentArgs(["--pprof-dir", "d", "--off-cpu-min", "5"]),
    /--off-cpu-min needs --off-cpu/,
  );
  assert.throws(
    () => parseAgentArgs(["--pprof-dir", "d", "--off-cpu", "--off-cpu-min", "2.5"]),
    /--off-cpu-min 2.5: expected a whole number/,
  );
  assert.throws(() => parseAgentArgs(["--help"]), (error: Error) => error.message === "");
});

Deno.test("parseAgentArgs() refuses credentials in the URL, a bad header, and a CA file without https", () => {
  assert.throws(
    () => parseAgentArgs(["--otlp-endpoint", "https://fleet:hunter2@collector:4318"]),
    (error: Error) =>
      /credentials in the URL are refused/.test(error.message) && !/hunter2/.test(error.message),
  );
  assert.throws(
    () => parseAgentArgs(["--pprof-dir", "d", "--header", "bad name=x"]),
    /--header bad name: "bad name" is not a valid header name/,
  );
  assert.throws(
    () => parseAgentArgs(["--otlp-endpoint", "http://c:4318", "--ca-file", "ca.pem"]),
    /--ca-file ca.pem: only for an https:\/\/ --otlp-endpoint/,
  );
  assert.throws(() => parseAgentArgs(["--pprof-dir", "d", "--ca-file", "ca.pem"]), /only for an https/);
});

Deno.test("requestHeaders() layers the environment, then --header-file, then --header", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-agent-" });
  try {
    const file = `${dir}/headers`;
    Deno.writeTextFileSync(
      file,
      "# collector credentials\r\nAuthorization=Bearer from-file\r\n\n  X-Tenant = file-tenant \nx-file=1\n",
      { mode: 0o600 },
    );
    const args = parseAgentArgs([
      "--otlp-endpoint",
      "http://127.0.0.1:4318",
      "--header-file",
      file,
      "--header",
      "x-tenant=flag-tenant",
    ]);
    const headers = await requestHeaders(args, {
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Basic%20from-env, x-env=general,x-file=env",
      OTEL_EXPORTER_OTLP_PROFILES_HEADERS: "x-env=profiles",
      HOME: "/root",
    });
    assert.deepEqual(headers, {
      authorization: "Bearer from-file",
      "x-env": "profiles",
      "x-file": "1",
      "x-tenant": "flag-tenant",
    });
    const environmentOnly = await requestHeaders(
      parseAgentArgs(["--otlp-endpoint", "http://127.0.0.1:4318"]),
      { OTEL_EXPORTER_OTLP_HEADERS: "Authorization=Basic%20YWxhZGRpbg%3D%3D" },
    );
    assert.deepEqual(environmentOnly, { authorization: "Basic YWxhZGRpbg==" });

    Deno.writeTextFileSync(file, "Authorization Bearer abc\n");
    await assert.rejects(
      requestHeaders(args, {}),
      new RegExp(`^CommandError: ${file} line 1: expected NAME=VALUE$`),
    );
    await assert.rejects(
      requestHeaders(args, { OTEL_EXPORTER_OTLP_HEADERS: "a=%zz" }),
      /OTEL_EXPORTER_OTLP_HEADERS entry 1: the value is not valid percent-encoding/,
    );
    await assert.rejects(
      requestHeaders(parseAgentArgs(["--otlp-endpoint", "http://c", "--header-file", `${dir}/missing`]), {}),
      new RegExp(`Cannot read ${dir}/missing: no such file`),
    );
    await assert.rejects(
      requestHeaders(parseAgentArgs(["--otlp-endpoint", "http://c", "--header-file", "/dev/zero"]), {}),
      /Cannot read \/dev\/zero: a character device, not a header file/,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("readCaFile() reads a PEM file and refuses one without a certificate", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-agent-" });
  try {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    Deno.writeTextFileSync(`${dir}/ca.pem`, pem);
    Deno.writeTextFileSync(`${dir}/key.pem`, "-----BEGIN PRIVATE KEY-----\n");
    const endpoint = ["--otlp-endpoint", "https://127.0.0.1:4318"];
    assert.equal(await readCaFile(parseAgentArgs(endpoint)), null);
    assert.equal(await readCaFile(parseAgentArgs([...endpoint, "--ca-file", `${dir}/ca.pem`])), pem);
    await assert.rejects(
      readCaFile(parseAgentArgs([...endpoint, "--ca-file", `${dir}/key.pem`])),
      /no PEM certificate \(-----BEGIN CERTIFICATE-----\) in it/,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
