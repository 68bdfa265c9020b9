import assert from "node:assert/strict";
import { invokingUser } from "./invoking_user.ts";

Deno.test("invokingUser() is sudo's user when omniprof runs as root", () => {
  assert.deepEqual(invokingUser({ SUDO_UID: "1000", SUDO_GID: "100" }, 0), { uid: 1000, gid: 100 });
  // No SUDO_GID: the group is left as it is (-1 to chown).
  assert.deepEqual(invokingUser({ SUDO_UID: "1000" }, 0), { uid: 1000, gid: 0xffffffff });
});

Deno.test("invokingUser() is null without sudo, for root's own sudo, and when not root", () => {
  assert.equal(invokingUser({}, 0), null);
  assert.equal(invokingUser({ SUDO_UID: "0", SUDO_GID: "0" }, 0), null);
  // sudo -u someone: that user cannot give files away, and they are theirs anyway.
  assert.equal(invokingUser({ SUDO_UID: "1000", SUDO_GID: "1000" }, 1001), null);
});

Deno.test("invokingUser() refuses ids that are not plain decimal numbers", () => {
  for (
    const text of ["", "12a", "0x10", "1e3", "-1", " 1000", "1000 ", "+5", "4294967295", "99999999999", "1.5"]
  ) {
    assert.throws(() => invokingUser({ SUDO_UID: text }, 0), /SUDO_UID=.* is not a decimal id/, text);
    assert.throws(() => invokingUser({ SUDO_UID: "1000", SUDO_GID: text }, 0), /SUDO_GID/, text);
  }
});
