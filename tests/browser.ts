/**
 * Headless Chromium for the tests of the HTML pages: the system's `chromium` driven by npm
 * `playwright-core`, with a fresh profile folder per launch, every network feature that could phone home
 * turned off, and a record of every request the page makes (a file:// page must make none but itself).
 *
 * @module
 */
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { REPO_ROOT } from "./helpers.ts";
import { bootstrapped, type Requirement, requiring } from "../lib/testing/requirements.ts";

/** Where Debian's chromium package puts the browser. */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/** Where tests keep screenshots (git-ignored). */
export const ARTIFACTS_DIR = `${REPO_ROOT}tests/.artifacts/`;

/** Chromium, which support/bootstrap.sh installs for the tests. */
export function chromiumInstalled(): Requirement {
  try {
    Deno.statSync(CHROMIUM_PATH);
  } catch {
    return bootstrapped(
      `no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or run support/bootstrap.sh)`,
    );
  }
  return bootstrapped(null);
}

/** A test in the browser, skipped (with the reason printed and recorded) when Chromium or one of `more` is missing. */
export function browserTest(
  name: string,
  fn: () => Promise<void>,
  ...more: Requirement[]
): Deno.TestDefinition {
  return requiring([chromiumInstalled(), ...more], {
    name,
    fn,
    sanitizeResources: false,
    sanitizeOps: false,
  });
}

/** A page opened from disk, with the URLs it requested. */
export interface OpenedPage {
  page: Page;
  /** Every URL the page asked for, in order (the page's own file:// URL first). */
  requests: string[];
  /** Milliseconds from navigation until the page's hook was there (data parsed, first frame drawn). */
  loadMs: number;
  close(): Promise<void>;
}

/** Opens `path` in a fresh headless Chromium; requests other than the page itself are recorded and aborted. */
export async function openPage(path: string, viewport = { width: 1400, height: 900 }): Promise<OpenedPage> {
  const userDataDir = Deno.makeTempDirSync({ prefix: "omniprof-chromium-" });
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      viewport,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  } catch (error) {
    Deno.removeSync(userDataDir, { recursive: true });
    throw error;
  }
  const url = new URL(`file://${path}`).href;
  const requests: string[] = [];
  await context.route("**/*", (route) => {
    const requested = route.request().url();
    return requested === url ? route.continue() : route.abort();
  });
  const page = context.pages()[0] ?? await context.newPage();
  page.on("request", (request) => requests.push(request.url()));
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  const started = performance.now();
  await page.goto(url);
  try {
    await page.waitForFunction(() => "omniprof" in window, null, { timeout: 60_000 });
  } catch (error) {
    throw new Error(`the page did not start: ${errors.join("; ") || (error as Error).message}`);
  }
  const loadMs = performance.now() - started;
  return {
    page,
    requests,
    loadMs,
    async close() {
      await context.close();
      Deno.removeSync(userDataDir, { recursive: true });
    },
  };
}

/** A frame the page drew, as its test hook (`window.omniprof.frames()`) describes it. */
export interface DrawnFrame {
  name: string;
  kind: string;
  depth: number;
  x: number;
  y: number;
  width: number;
  height: number;
  highlighted: boolean;
  zoomed: boolean;
  color: string;
}

/** The page's test hook, as seen from the test. */
export interface PageHook {
  frames(): DrawnFrame[];
  view(): "flame" | "icicle";
  /** What amounts are: "samples", or the time an off-CPU profile's page shows. */
  time(): "samples" | "cpu" | "off" | "wall";
  zoomed(): string;
  search(): { query: string; matchedSamples: number[]; samples: number[]; text: string };
  canvasWidth(): number;
  timings(): Record<string, number>;
}

/** The frames drawn now. */
export function drawnFrames(page: Page): Promise<DrawnFrame[]> {
  return page.evaluate(() => (window as unknown as { omniprof: PageHook }).omniprof.frames());
}

/** Calls one of the hook's functions without arguments in the page. */
export function hook<K extends keyof PageHook>(page: Page, key: K): Promise<ReturnType<PageHook[K]>> {
  return page.evaluate(
    (name) => (window as unknown as Record<string, Record<string, () => unknown>>).omniprof![name]!(),
    key,
  ) as Promise<ReturnType<PageHook[K]>>;
}

/** Clicks the middle of a drawn frame. */
export async function clickFrame(page: Page, frame: DrawnFrame): Promise<void> {
  const box = await page.locator("#canvas").boundingBox();
  if (box === null) throw new Error("the canvas is not visible");
  await page.mouse.click(box.x + frame.x + frame.width / 2, box.y + frame.y + frame.height / 2);
}
