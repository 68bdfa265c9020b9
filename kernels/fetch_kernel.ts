/**
 * `deno task fetch-kernel VERSION`: downloads the newest Debian kernel image of a version line (5.10,
 * 6.1, 6.12, 6.18, 7.2, ...) with a private apt configuration, and stores it in the image cache as an
 * ELF `vmlinux` (decompressed from the package's bzImage) that qemu boots through its PVH entry.
 * `newest` fetches the newest line the archive has and prints that line last on standard output.
 *
 * Usage: deno run -A kernels/fetch_kernel.ts VERSION|newest [--update] [--force] [--dbg]
 *   --update  refresh the package lists even when they are recent
 *   --force   replace an image of that version built by build-kernel
 *   --dbg     also fetch the kernel with debug symbols (the -dbg package, about 1 GB) as vmlinux-dbg,
 *             for gdb (kernels/README.md)
 *
 * @module
 */
import { parseToolArgs } from "../support/tool_args.ts";
import { extractVmlinux } from "./bzimage.ts";
import { debListing, debMember } from "./deb_package.ts";
import { configMember, kernelCandidates, kernelLines, sourceLines, vmlinuzMember } from "./debian_kernels.ts";
import { APT_DIR, compareVersions, findKernel, isVersionName, kernelDir, writeInfo } from "./kernel_cache.ts";
import { PrivateApt } from "./private_apt.ts";

/** Package lists older than this are refreshed before a search. */
const LISTS_MAX_AGE_HOURS = 12;
/** Packages smaller than this hold no kernel (meta packages). */
const MIN_IMAGE_PACKAGE_BYTES = 1 << 20;

/** The outcome of a fetch. */
export interface FetchedKernel {
  line: string;
  folder: string;
  package: string;
  packageVersion: string;
  release: string;
  vmlinuxBytes: number;
}

function say(message: string): void {
  console.error(`fetch-kernel: ${message}`);
}

function removeIfPresent(path: string): void {
  try {
    Deno.removeSync(path, { recursive: true });
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

/** Opens the private apt state, refreshing the lists when old (or when asked). */
export async function openApt(forceUpdate: boolean): Promise<PrivateApt> {
  const apt = PrivateApt.create(APT_DIR);
  if (forceUpdate || apt.listsAgeHours() > LISTS_MAX_AGE_HOURS) {
    say("downloading Debian's package lists (bullseye to experimental) into kernels/cache/apt/");
    for (const warning of await apt.update()) say(`warning: ${warning}`);
  }
  return apt;
}

/** Names of every kernel image package that can be downloaded. */
async function kernelPackageNames(apt: PrivateApt): Promise<string[]> {
  return [...(await apt.available("linux-image-")).keys(), ...(await apt.available("linux-binary-")).keys()];
}

/** The version lines of the linux-source packages that can be downloaded. */
export async function availableSourceLines(apt: PrivateApt): Promise<string[]> {
  return sourceLines([...(await apt.available("linux-source-")).keys()]);
}

/** Downloads and stores the newest image of `line`; throws with the available lines when there is none. */
export async function fetchKernel(
  apt: PrivateApt,
  line: string,
  options: { force?: boolean; dir?: string } = {},
): Promise<FetchedKernel> {
  const dir = options.dir ?? kernelDir();
  const names = await kernelPackageNames(apt);
  const candidates = kernelCandidates(names, line);
  if (candidates.length === 0) {
    const sources = await availableSourceLines(apt);
    throw new Error(
      `Cannot find a kernel image for ${line} in Debian's archive.\n` +
        `Lines with images: ${kernelLines(names).join(", ") || "none (are the package lists empty?)"}\n` +
        `Lines with sources (deno task build-kernel X): ${sources.join(", ") || "none"}`,
    );
  }
  const existing = findKernel(dir, line);
  if (existing?.info?.origin === "built" && !options.force) {
    throw new Error(
      `${existing.path} was built by build-kernel; pass --force to replace it with Debian's image`,
    );
  }
  for (const candidate of candidates) {
    const record = await apt.show(candidate.name);
    if (!record || record.size < MIN_IMAGE_PACKAGE_BYTES) continue;
    if (existing?.info?.package === candidate.name && existing.info.packageVersion === record.version) {
      say(`${candidate.name} ${record.version} is already in ${dir}${line}/`);
      return {
        line,
        folder: `${dir}${line}/`,
        package: candidate.name,
        packageVersion: record.version,
        release: existing.info.release,
        vmlinuxBytes: Deno.statSync(existing.path).size,
      };
    }
    say(`downloading ${candidate.name} ${record.version} (${(record.size / 1048576).toFixed(0)} MiB)`);
    let deb: string;
    try {
      deb = await apt.download(candidate.name);
    } catch (error) {
      // The lists may name a version the mirror has already replaced: refresh once and retry.
      say(`${error instanceof Error ? error.message.split("\n")[0] : error}; refreshing the lists`);
      await apt.update();
      deb = await apt.download(candidate.name);
    }
    try {
      const listing = await debListing(deb);
      const image = vmlinuzMember(listing);
      if (!image) {
        say(`${candidate.name} holds no vmlinuz; trying the next package`);
        continue;
      }
      const vmlinuz = await debMember(deb, image.member);
      const vmlinux = await extractVmlinux(vmlinuz);
      const config = configMember(listing);
      const folder = `${dir}${line}/`;
      const staging = `${dir}.${line}.partial/`;
      removeIfPresent(staging);
      Deno.mkdirSync(staging, { recursive: true });
      Deno.writeFileSync(`${staging}vmlinuz`, vmlinuz);
      Deno.writeFileSync(`${staging}vmlinux`, vmlinux);
      if (config) Deno.writeFileSync(`${staging}config`, await debMember(deb, config));
      writeInfo(staging, {
        line,
        release: image.release,
        origin: "debian",
        package: candidate.name,
        packageVersion: record.version,
        date: new Date().toISOString(),
      });
      removeIfPresent(folder);
      Deno.renameSync(staging, folder);
      return {
        line,
        folder,
        package: candidate.name,
        packageVersion: record.version,
        release: image.release,
        vmlinuxBytes: vmlinux.length,
      };
    } finally {
      Deno.removeSync(deb);
    }
  }
  throw new Error(
    `Cannot find a kernel image in any ${line} package: ${candidates.map((c) => c.name).join(", ")}`,
  );
}

/**
 * Downloads the debug symbols of a fetched kernel (`linux-image-RELEASE-dbg`) and stores its unstripped
 * vmlinux as `vmlinux-dbg` beside the image, for gdb.
 */
export async function fetchDebugSymbols(apt: PrivateApt, folder: string, release: string): Promise<string> {
  const name = `linux-image-${release}-dbg`;
  const record = await apt.show(name);
  if (!record) throw new Error(`Cannot find ${name} in Debian's archive`);
  say(`downloading ${name} ${record.version} (${(record.size / 1048576).toFixed(0)} MiB)`);
  const deb = await apt.download(name);
  try {
    const member = (await debListing(deb)).split("\n").map((line) => line.split(/\s+/).at(-1) ?? "")
      .find((path) =>
        /^\.?\/?usr\/lib\/debug\/(boot\/vmlinux-[^/]+|lib\/modules\/[^/]+\/vmlinux)$/.test(path)
      );
    if (!member) throw new Error(`Cannot find the debug vmlinux in ${name}`);
    const path = `${folder}vmlinux-dbg`;
    Deno.writeFileSync(path, await debMember(deb, member));
    return path;
  } finally {
    Deno.removeSync(deb);
  }
}

/** The newest version line with an image in the archive. */
export async function newestLine(apt: PrivateApt): Promise<string> {
  const lines = kernelLines(await kernelPackageNames(apt)).sort(compareVersions);
  const newest = lines.at(-1);
  if (!newest) throw new Error("Cannot find any kernel image in Debian's package lists");
  return newest;
}

const USAGE =
  "Usage: deno task fetch-kernel VERSION|newest [--update] [--force] [--dbg]   (VERSION: 5.10, 6.1, 6.12, ...)";

if (import.meta.main) {
  const { values, positionals } = parseToolArgs("fetch-kernel", USAGE, {
    args: Deno.args,
    allowPositionals: true,
    options: {
      update: { type: "boolean", default: false },
      force: { type: "boolean", default: false },
      dbg: { type: "boolean", default: false },
    },
  });
  const requested = positionals[0];
  if (positionals.length !== 1 || !requested || (requested !== "newest" && !isVersionName(requested))) {
    console.error(USAGE);
    Deno.exit(2);
  }
  const started = performance.now();
  try {
    const apt = await openApt(values.update);
    const line = requested === "newest" ? await newestLine(apt) : requested;
    const fetched = await fetchKernel(apt, line, { force: values.force });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    say(
      `stored ${fetched.package} ${fetched.packageVersion} (kernel ${fetched.release}) as ` +
        `${fetched.folder}vmlinux (ELF, ${(fetched.vmlinuxBytes / 1048576).toFixed(1)} MiB) in ${seconds} s`,
    );
    if (values.dbg) {
      say(`stored ${await fetchDebugSymbols(apt, fetched.folder, fetched.release)} (for gdb)`);
    }
    say(`test it with: deno task test-kernel ${fetched.line}`);
    console.log(fetched.line);
  } catch (error) {
    say(error instanceof Error ? error.message : String(error));
    Deno.exit(1);
  }
}
