/**
 * Reading files out of a .deb without installing it: `dpkg-deb` lists it and streams its data archive
 * into `tar`, which extracts only the members asked for (a kernel image package also holds hundreds of
 * megabytes of modules that are not needed).
 *
 * @example
 * ```ts ignore
 * import { debListing, debMember } from "./deb_package.ts";
 * const listing = await debListing("linux-image.deb");
 * const bytes = await debMember("linux-image.deb", "./boot/vmlinuz-6.1.0-50-amd64");
 * ```
 *
 * @module
 */

async function output(command: string, args: string[]): Promise<string> {
  const result = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" }).output();
  if (!result.success) {
    throw new Error(
      `Cannot read the package: ${command} ${args.join(" ")}: ${new TextDecoder().decode(result.stderr)}`,
    );
  }
  return new TextDecoder().decode(result.stdout);
}

/** The `dpkg-deb -c` listing of a package (one `ls -l`-like line per member). */
export function debListing(deb: string): Promise<string> {
  return output("dpkg-deb", ["-c", deb]);
}

/** Runs `dpkg-deb --fsys-tarfile deb | tar ARGS` and returns tar's standard output. */
async function tarOfDeb(deb: string, tarArgs: string[], what: string): Promise<Uint8Array> {
  const dpkg = new Deno.Command("dpkg-deb", {
    args: ["--fsys-tarfile", deb],
    stdout: "piped",
    stderr: "piped",
  })
    .spawn();
  const tar = new Deno.Command("tar", { args: tarArgs, stdin: "piped", stdout: "piped", stderr: "piped" })
    .spawn();
  const piped = dpkg.stdout.pipeTo(tar.stdin).catch(() => {});
  const [dpkgStatus, dpkgErrors, tarResult] = await Promise.all([
    dpkg.status,
    new Response(dpkg.stderr).text(),
    tar.output(),
  ]);
  await piped;
  if (!dpkgStatus.success || !tarResult.success) {
    const message = new TextDecoder().decode(tarResult.stderr) + dpkgErrors;
    throw new Error(`Cannot extract ${what} from ${deb}: ${message.trim()}`);
  }
  return tarResult.stdout;
}

/** The bytes of one member of a package's data archive (e.g. `./boot/vmlinuz-6.1.0-50-amd64`). */
export function debMember(deb: string, member: string): Promise<Uint8Array> {
  return tarOfDeb(deb, ["-xOf", "-", member], member);
}

/** Extracts a whole package (or the members matching the wildcard `patterns`) into `dir`. */
export async function debExtract(deb: string, dir: string, patterns: string[] = []): Promise<void> {
  Deno.mkdirSync(dir, { recursive: true });
  const args = ["-xf", "-", "-C", dir, ...(patterns.length > 0 ? ["--wildcards", ...patterns] : [])];
  await tarOfDeb(deb, args, patterns.length > 0 ? patterns.join(" ") : "the files");
}
