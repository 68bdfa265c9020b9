/**
 * Who asked for this run: under sudo, the user sudo names in `SUDO_UID`/`SUDO_GID`. Files written for
 * them (a profile they asked for) are given to them, as they expect of a file they asked for, rather
 * than to root.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { invokingUser } from "./invoking_user.ts";
 * assert.deepEqual(invokingUser({ SUDO_UID: "1000", SUDO_GID: "1000" }, 0), { uid: 1000, gid: 1000 });
 * assert.equal(invokingUser({}, 0), null);
 * ```
 *
 * @module
 */

/** A user and group to give files to. */
export interface FileOwner {
  uid: number;
  gid: number;
}

/** Above this, an id means "no change" (-1 as unsigned) to chown. */
const MAX_ID = 0xfffffffe;

/** The id in `name`'s value, or throws an Error saying what is wrong with it. */
function parseId(name: string, text: string): number {
  const value = Number(text);
  if (!/^[0-9]{1,10}$/.test(text) || value > MAX_ID) {
    throw new Error(`Cannot tell who ran sudo: ${name}=${JSON.stringify(text)} is not a decimal id`);
  }
  return value;
}

/**
 * The user who ran omniprof through sudo, when omniprof runs as root (`uid` 0) and `SUDO_UID` names
 * another user; null otherwise (files then belong to whoever runs omniprof, as usual). Without
 * `SUDO_GID`, the group is the user's id's group as sudo would set it: unknown, so left unchanged.
 *
 * @throws {Error} when `SUDO_UID` or `SUDO_GID` is set but not a decimal id.
 */
export function invokingUser(
  env: Readonly<Record<string, string | undefined>> = Deno.env.toObject(),
  uid: number = Deno.uid() ?? -1,
): FileOwner | null {
  const sudoUid = env.SUDO_UID;
  if (sudoUid === undefined || uid !== 0) return null;
  const owner = parseId("SUDO_UID", sudoUid);
  const sudoGid = env.SUDO_GID;
  const group = sudoGid === undefined ? 0xffffffff : parseId("SUDO_GID", sudoGid);
  return owner === 0 ? null : { uid: owner, gid: group };
}
