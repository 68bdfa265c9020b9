/**
 * A minimal Debian system in a folder, as a new user's machine starts: `mmdebstrap --variant=minbase`
 * (the Essential and required packages, apt) plus git to clone with and sudo to run the README's commands
 * as written, from the Debian archive the host's apt uses. Nothing is cached between runs: every package
 * bootstrap installs must come from its own apt-get.
 *
 * The host's own CA certificates (/usr/local/share/ca-certificates) are copied in, so that a network
 * whose proxy the host trusts is trusted in the root too once ca-certificates is installed there.
 *
 * @module
 */
import { debianHosts, systemSources } from "../../kernels/private_apt.ts";

/** What a minimal system with git has beyond minbase: git, and sudo, which the README's commands use. */
export const MINIMAL_SYSTEM_PACKAGES = ["git", "sudo"];

/** The Debian releases a root can be built of, by codename. */
export const DEBIAN_RELEASES: Record<string, string> = { bookworm: "Debian 12", trixie: "Debian 13" };

const LOCAL_CA_DIR = "/usr/local/share/ca-certificates";

/**
 * The sources.list of a fresh install of `suite`: the release, its updates and its security updates,
 * main only, from the hosts (and with the keyring) of the host's Debian sources.
 */
export function freshSourcesList(suite: string, etc = "/etc/apt/"): string {
  const hosts = debianHosts(systemSources(etc));
  const options = hosts.signedBy ? ` [signed-by=${hosts.signedBy}]` : "";
  return [
    `deb${options} ${hosts.archive} ${suite} main`,
    `deb${options} ${hosts.archive} ${suite}-updates main`,
    `deb${options} ${hosts.security} ${suite}-security main`,
  ].join("\n") + "\n";
}

/** Runs mmdebstrap into `root` (which must not exist yet); its progress goes to standard error. */
export async function buildDebianRoot(suite: string, root: string, signal: AbortSignal): Promise<void> {
  const sources = `${root}.sources.list`;
  Deno.writeTextFileSync(sources, freshSourcesList(suite));
  let status: Deno.CommandStatus;
  try {
    status = await new Deno.Command("mmdebstrap", {
      args: ["--variant=minbase", `--include=${MINIMAL_SYSTEM_PACKAGES.join(",")}`, suite, root, sources],
      stdin: "null",
      stdout: "inherit",
      stderr: "inherit",
      signal,
    }).spawn().status;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error("Cannot run mmdebstrap: apt-get install mmdebstrap");
    }
    throw error;
  }
  if (!status.success) throw new Error(`mmdebstrap ${suite} failed (exit ${status.code})`);
}

/** Copies the host's own CA certificates into the root, where update-ca-certificates will find them. */
function copyLocalCertificates(root: string): number {
  let copied = 0;
  const copy = (dir: string) => {
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(dir)];
    } catch {
      return;
    }
    for (const entry of entries) {
      const from = `${dir}/${entry.name}`;
      const to = `${root}${from}`;
      if (entry.isDirectory) {
        Deno.mkdirSync(to, { recursive: true });
        copy(from);
      } else if (entry.isFile && entry.name.endsWith(".crt")) {
        Deno.copyFileSync(from, to);
        copied++;
      }
    }
  };
  Deno.mkdirSync(`${root}${LOCAL_CA_DIR}`, { recursive: true });
  copy(LOCAL_CA_DIR);
  return copied;
}

/**
 * Readies a freshly built root for the README's commands: the host's CA certificates, root's home mode
 * 0700 as Debian makes it, the /etc/hosts Debian's installer writes (mmdebstrap writes none, and sudo
 * then cannot resolve the host name), and sudo keeping CI (its env_reset would drop it, and the test
 * suite reads it). Returns how many CA certificates were copied.
 */
export function prepareDebianRoot(root: string): number {
  const certificates = copyLocalCertificates(root);
  Deno.chmodSync(`${root}/root`, 0o700);
  // The chroot shares the host's UTS namespace: its host name is the host's.
  const hostname = Deno.hostname();
  Deno.writeTextFileSync(
    `${root}/etc/hosts`,
    `127.0.0.1\tlocalhost\n127.0.1.1\t${hostname}\n\n::1\tlocalhost ip6-localhost ip6-loopback\n`,
  );
  const sudoers = `${root}/etc/sudoers.d/keep-ci`;
  Deno.writeTextFileSync(sudoers, 'Defaults env_keep += "CI"\n');
  Deno.chmodSync(sudoers, 0o440);
  return certificates;
}
