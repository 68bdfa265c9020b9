/**
 * The container a process runs in, from its cgroup paths (`/proc/PID/cgroup`): container runtimes name
 * the cgroup of a container after its 64-hex-digit id, in one of a few shapes:
 *
 * - Docker, cgroup v1: `/docker/<id>`; cgroup v2 with systemd: `/system.slice/docker-<id>.scope`
 * - containerd and CRI (Kubernetes): `/kubepods/burstable/pod<uid>/<id>` or
 *   `/kubepods.slice/.../cri-containerd-<id>.scope`
 * - CRI-O: `.../crio-<id>.scope`; Podman: `.../libpod-<id>.scope` (optionally followed by `/container`)
 * - ECS on Fargate: `/ecs/<task>/<32 hex digits>-<10 digits>`
 *
 * The monitor processes beside containers (`crio-conmon-<id>.scope`, `libpod-conmon-<id>.scope`) carry the
 * id too but are not in the container, so they are skipped. Nested containers (Docker in Docker) resolve to
 * the innermost one. Plain systemd slices and scopes (`/user.slice/.../session-2.scope`) are no containers.
 *
 * @example
 * ```ts
 * import { containerIdFromCgroup } from "./container_id.ts";
 * const id = containerIdFromCgroup("0::/system.slice/docker-" + "ab".repeat(32) + ".scope\n");
 * // id === "abab...ab" (64 digits)
 * ```
 *
 * @module
 */

const HEX_ID = /(?:^|[-_:.])([0-9a-f]{64})$/;
const FARGATE_ID = /^([0-9a-f]{32}-[0-9]{10})$/;
/** Longest cgroup file looked at: a process is in one cgroup per hierarchy, a few hundred bytes each. */
const MAX_CGROUP_BYTES = 64 * 1024;

/**
 * The container id in the text of a `/proc/PID/cgroup` file, or null when the process is in no container
 * (or in one whose runtime names cgroups differently). The unified (v2) hierarchy is preferred over the v1
 * controllers when both name a container.
 */
export function containerIdFromCgroup(text: string): string | null {
  let fromV1: string | null = null;
  for (const line of text.slice(0, MAX_CGROUP_BYTES).split("\n")) {
    // hierarchy-ID:controller-list:cgroup-path; the path may itself contain colons.
    const first = line.indexOf(":");
    const second = first < 0 ? -1 : line.indexOf(":", first + 1);
    if (second < 0) continue;
    const id = containerIdFromPath(line.slice(second + 1));
    if (id === null) continue;
    if (line.slice(0, second) === "0:") return id;
    fromV1 ??= id;
  }
  return fromV1;
}

/** The container id named by one cgroup path, innermost first, or null. */
export function containerIdFromPath(path: string): string | null {
  const parts = path.split("/");
  for (let i = parts.length - 1; i >= 0; i--) {
    let part = parts[i]!;
    if (part.includes("conmon")) continue;
    if (part.endsWith(".scope")) part = part.slice(0, -".scope".length);
    const hex = HEX_ID.exec(part);
    if (hex) return hex[1]!;
    const fargate = FARGATE_ID.exec(part);
    if (fargate) return fargate[1]!;
  }
  return null;
}

/** The container id of process `pid`, or null (no container, or the process is gone). */
export function readContainerId(pid: number, procRoot = "/proc"): string | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(`${procRoot}/${pid}/cgroup`);
  } catch {
    return null;
  }
  return containerIdFromCgroup(text);
}
