/**
 * A clone of this repository at the commit checked out here, as a user would have it: what is committed,
 * and nothing the working tree holds beside it (.tools/, .build/, node_modules/, uncommitted changes).
 *
 * @module
 */

const decoder = new TextDecoder();

async function git(args: string[]): Promise<string> {
  const output = await new Deno.Command("git", { args, stdout: "piped", stderr: "piped" }).output();
  if (!output.success) {
    throw new Error(`git ${args.join(" ")} failed: ${decoder.decode(output.stderr).trim()}`);
  }
  return decoder.decode(output.stdout).trim();
}

/** The commit checked out in `repository`, and whether its working tree has changes git would commit. */
export async function checkoutState(repository: string): Promise<{ commit: string; dirty: boolean }> {
  const commit = await git(["-C", repository, "rev-parse", "HEAD"]);
  const status = await git(["-C", repository, "status", "--porcelain", "--untracked-files=no"]);
  return { commit, dirty: status !== "" };
}

/** Clones `repository` into `target` (which must not exist) and checks out `commit` there. */
export async function cloneAt(repository: string, commit: string, target: string): Promise<void> {
  // --no-hardlinks: the root holds its own objects, not links to the files of this checkout.
  await git(["clone", "--quiet", "--no-hardlinks", repository, target]);
  await git(["-C", target, "checkout", "--quiet", "--detach", commit]);
}
