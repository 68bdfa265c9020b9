import assert from "node:assert/strict";
import {
  debianHosts,
  parseDeb822Sources,
  parseOneLineSources,
  privateSourcesList,
  systemSources,
} from "./private_apt.ts";

Deno.test("parseOneLineSources() reads Debian 12 style sources.list lines", () => {
  const sources = parseOneLineSources([
    "# comment",
    "deb http://mirror.example/debian bookworm main contrib",
    "deb-src http://mirror.example/debian bookworm main",
    "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://security.example/debian-security bookworm-security main",
  ].join("\n"));
  assert.deepEqual(sources, [
    {
      uri: "http://mirror.example/debian",
      suites: ["bookworm"],
      components: ["main", "contrib"],
      signedBy: null,
    },
    {
      uri: "http://security.example/debian-security",
      suites: ["bookworm-security"],
      components: ["main"],
      signedBy: "/usr/share/keyrings/debian-archive-keyring.gpg",
    },
  ]);
});

Deno.test("parseDeb822Sources() reads Debian 13 style .sources paragraphs and skips disabled ones", () => {
  const sources = parseDeb822Sources([
    "Types: deb deb-src",
    "URIs: http://mirror.example/debian",
    "Suites: trixie trixie-updates",
    "Components: main",
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg",
    "",
    "Types: deb",
    "URIs: http://mirror.example/debian-security",
    "Suites: trixie-security",
    "Components: main",
    "",
    "Types: deb",
    "Enabled: no",
    "URIs: http://elsewhere.example/debian",
    "Suites: sid",
  ].join("\n"));
  assert.deepEqual(sources.map((s) => [s.uri, s.suites, s.signedBy]), [
    [
      "http://mirror.example/debian",
      ["trixie", "trixie-updates"],
      "/usr/share/keyrings/debian-archive-keyring.gpg",
    ],
    ["http://mirror.example/debian-security", ["trixie-security"], null],
  ]);
  const hosts = debianHosts(sources);
  assert.deepEqual(hosts, {
    archive: "http://mirror.example/debian",
    security: "http://mirror.example/debian-security",
    signedBy: "/usr/share/keyrings/debian-archive-keyring.gpg",
  });
  const list = privateSourcesList(hosts);
  assert.match(list, /^deb \[signed-by=\S+\] http:\/\/mirror\.example\/debian bullseye main$/m);
  assert.match(
    list,
    /^deb \[signed-by=\S+\] http:\/\/mirror\.example\/debian-security bullseye-security main$/m,
  );
  assert.match(list, /^deb \[signed-by=\S+\] http:\/\/mirror\.example\/debian experimental main$/m);
});

Deno.test("debianHosts() of this machine's sources names Debian archive hosts", () => {
  const sources = systemSources();
  const hosts = debianHosts(sources);
  // Whatever the machine's mirror, the suites of the private list live on it (or on deb.debian.org).
  const archive = sources.find((s) => s.uri.replace(/\/+$/, "") === hosts.archive);
  assert.ok(archive !== undefined || hosts.archive === "http://deb.debian.org/debian", hosts.archive);
  assert.match(hosts.security, /^https?:\/\/\S+$/);
});
