import assert from "node:assert/strict";
import type { Profile } from "../../profile/profile.ts";
import { formatFlamegraphHtml } from "./flamegraph.ts";
import type { FlamegraphData } from "./flamegraph_data.ts";

const hostile: Profile = {
  startTimeNs: 0,
  durationNs: 1e9,
  periodNs: 1e7,
  mappings: [],
  locations: [
    {
      kind: "native",
      mapping: -1,
      address: 1,
      functionName: "</script><script>alert(1)</script>",
      sourceFile: "",
      line: 0,
    },
    { kind: "native", mapping: -1, address: 2, functionName: "main", sourceFile: "<b>&amp;", line: 0 },
  ],
  samples: [{ locations: [0, 1], count: 2, pid: 5, tid: 5, comm: "a\u2028b" }],
};

/** The JSON inside the page's data element. */
function embeddedData(html: string): FlamegraphData {
  const match = /<script id="omniprof-data" type="application\/json">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(match, "the page has its data element");
  return JSON.parse(match[1]!);
}

Deno.test("formatFlamegraphHtml() keeps every name inside the data, whatever it contains", () => {
  const html = formatFlamegraphHtml(hostile, { title: "<title> & co" });
  assert.ok(!html.includes("<script>alert"), "no name can close the data element");
  assert.match(html, /<title>&#60;title&#62; &#38; co<\/title>/);
  const data = embeddedData(html);
  assert.ok(data.strings.includes("</script><script>alert(1)</script>"));
  assert.ok(data.strings.includes("<b>&amp;"));
  assert.ok(data.strings.includes("a\u2028b"));
  assert.equal(data.title, "<title> & co");
});

Deno.test("formatFlamegraphHtml() makes one self-contained page that fetches nothing", () => {
  const html = formatFlamegraphHtml(hostile);
  assert.match(html, /^<!doctype html>/);
  assert.match(html, /Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'/);
  assert.ok(!/\b(src|href)\s*=/i.test(html.replace(/<script id="omniprof-data"[\s\S]*?<\/script>/, "")));
  assert.ok(!/^import\s/m.test(html), "the view's import of the model is dropped: one module scope");
  assert.match(html, /export function decodeData/);
  assert.match(html, /startPage\(\);/);
});

Deno.test({
  name: "the page's view script type-checks against the DOM",
  // Deno type-checks page_model.js through its tests; the view only runs in the browser, so check it here.
  sanitizeResources: false,
  async fn() {
    const path = new URL("./page_view.js", import.meta.url).pathname;
    const result = await new Deno.Command(Deno.execPath(), { args: ["check", path], stderr: "piped" })
      .output();
    assert.ok(result.success, new TextDecoder().decode(result.stderr));
  },
});

Deno.test("formatFlamegraphHtml() offers on-CPU, off-CPU and both only for a profile with off-CPU time", () => {
  const plain = formatFlamegraphHtml(hostile);
  assert.ok(!plain.includes('id="time-'), "no time control without off-CPU time");
  const offCpu = formatFlamegraphHtml({
    ...hostile,
    offCpu: true,
    samples: [...hostile.samples, { locations: [1], count: 0, offCpuNs: 5e6, pid: 5, tid: 6, comm: "io" }],
  });
  const buttons = [...offCpu.matchAll(/<button id="time-(\w+)"[^>]*aria-pressed="(\w+)"[^>]*>([^<]*)</g)]
    .map(([, id, pressed, text]) => `${id} ${pressed} ${text}`);
  assert.deepEqual(buttons, ["cpu false On-CPU", "off false Off-CPU", "wall true Both"]);
  assert.deepEqual(embeddedData(offCpu).sampleOffCpuNs?.toSorted(), [0, 5e6]);
});

Deno.test("formatFlamegraphHtml() offers a menu of events only for a profile of several probe events", () => {
  const events: Profile = {
    ...hostile,
    periodNs: 0,
    events: ["uprobe:/usr/bin/app:handle", "tracepoint:syscalls:sys_enter_read"],
    samples: hostile.samples.map((sample, i) => ({ ...sample, event: i % 2 })),
  };
  const page = formatFlamegraphHtml(events);
  assert.ok(page.includes('<select id="event"></select>'));
  assert.ok(page.includes("Hover a frame for its events; click to zoom."));
  assert.ok(!page.includes('id="time-'), "no time control: events are not time");
  assert.deepEqual(embeddedData(page).events, [
    "uprobe:/usr/bin/app:handle",
    "tracepoint:syscalls:sys_enter_read",
  ]);
  const one = formatFlamegraphHtml({ ...events, events: ["kprobe:do_sys_openat2"], samples: [] });
  assert.ok(!one.includes('id="event"'), "one event: nothing to pick");
  assert.ok(one.includes("Hover a frame for its events; click to zoom."));
  assert.ok(!formatFlamegraphHtml(hostile).includes('id="event"'));
});
