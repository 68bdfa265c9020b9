/**
 * Whether tests can make mount namespaces of their own: `unshare -m` makes the new namespace's mounts
 * private, which fails where `/` is not a mount point (a plain chroot, such as a freshly built Debian root):
 * an environment without them, not a fault of omniprof.
 *
 * @example
 * ```ts ignore
 * import { privateMountNamespaces } from "./mount_namespaces.ts";
 * Deno.test(requiring([privateMountNamespaces()], { name: "...", fn() {} }));
 * ```
 *
 * @module
 */
import { optional, type Requirement } from "./requirements.ts";

/** The requirement (optional): root, and `unshare -m --propagation private` works here. */
export function privateMountNamespaces(): Requirement {
  const works = Deno.uid() !== 0 || new Deno.Command("unshare", {
    args: ["-m", "--propagation", "private", "true"],
    stdout: "null",
    stderr: "null",
  }).outputSync().success;
  return optional(
    works ? null : "unshare -m cannot make mounts private here (is / a mount point? not in a plain chroot)",
  );
}
