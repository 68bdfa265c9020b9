import assert from "node:assert/strict";
import { freshSourcesList } from "./debian_root.ts";

Deno.test("freshSourcesList() uses the hosts and keyring of the host's Debian sources, for the suite asked", () => {
  const etc = `${Deno.makeTempDirSync({ prefix: "omniprof-apt-" })}/`;
  try {
    Deno.mkdirSync(`${etc}sources.list.d`);
    Deno.writeTextFileSync(
      `${etc}sources.list.d/debian.sources`,
      [
        "Types: deb",
        "URIs: http://mirror.example/debian",
        "Suites: bookworm bookworm-updates",
        "Components: main",
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg",
        "",
        "Types: deb",
        "URIs: http://mirror.example/debian-security",
        "Suites: bookworm-security",
        "Components: main",
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg",
        "",
      ].join("\n"),
    );
    Deno.writeTextFileSync(
      `${etc}sources.list.d/vendor.list`,
      "deb https://vendor.example/apt nodistro main\n",
    );
    const key = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]";
    assert.equal(
      freshSourcesList("trixie", etc),
      `deb ${key} http://mirror.example/debian trixie main\n` +
        `deb ${key} http://mirror.example/debian trixie-updates main\n` +
        `deb ${key} http://mirror.example/debian-security trixie-security main\n`,
    );
  } finally {
    Deno.removeSync(etc, { recursive: true });
  }
});
