import assert from "node:assert/strict";
import { readmeCommands } from "./readme_commands.ts";
import { REPO_ROOT } from "../../tests/helpers.ts";

Deno.test("readmeCommands() reads the README's two commands, with sudo as written", () => {
  assert.deepEqual(readmeCommands(Deno.readTextFileSync(`${REPO_ROOT}README.md`)), [
    "sudo support/bootstrap.sh deno task record",
    "sudo support/bootstrap.sh deno task test",
  ]);
});

Deno.test("readmeCommands() stops at the next section and refuses a README without the block", () => {
  const readme = "# x\n\n## The two commands\n\nText.\n\n## Next\n\n```sh\nrm -rf /\n```\n";
  assert.throws(() => readmeCommands(readme), /no sh block under "## The two commands"/);
  assert.throws(() => readmeCommands("# nothing\n"), /Cannot find the commands/);
});
