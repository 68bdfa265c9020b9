// @ts-check
/**
 * The flamegraph page's model: everything the page computes, without the DOM. It runs in the browser
 * (embedded in the page together with page_view.js) and in Deno's tests, so it is plain JavaScript with
 * JSDoc types and no imports.
 *
 * The flow: {@linkcode decodeData} turns the page's JSON into typed arrays; {@linkcode buildViewTree}
 * merges the stored call tree for a grouping (by process, by command name, or none); {@linkcode countTree}
 * sums the samples that pass the process/thread filter into self and total counts per node;
 * {@linkcode layoutTree} gives each node its horizontal extent; {@linkcode visibleFrames} lists the frames
 * wide enough to draw. All of them are linear in the number of nodes or samples, with no allocation per
 * node: that is what keeps a profile with 100,000 distinct stacks responsive.
 *
 * A profile with off-CPU time is counted in ns of the time chosen with {@linkcode weighSamples} (on-CPU,
 * off-CPU or both: wall time), not in samples; every function below counts `sampleWeight`, so they need
 * not know which. A profile of probe events counts hits, of every event or of the one chosen with
 * {@linkcode pickEvent}, the same way.
 *
 * @module
 */

/**
 * @typedef {object} SeriesInfo
 * @property {string} name
 * @property {number} samples
 * @property {number} durationNs
 * @property {number} periodNs
 * @property {number} startTimeNs
 * @property {number} [offCpuNs] total off-CPU ns; present only when recorded with off-CPU time
 * @property {number[]} [eventHits] hits of each of the data's events; present only for probe events
 */

/**
 * The page's data as written by flamegraph_data.ts.
 * @typedef {object} PageData
 * @property {string} format
 * @property {number} version
 * @property {"profile" | "diff"} mode
 * @property {string} title
 * @property {SeriesInfo[]} series
 * @property {string[]} strings
 * @property {string[]} kinds
 * @property {Record<string, KindStyle>} [kindStyles] the runtimes' kinds' colours and labels
 * @property {number[]} frames
 * @property {number[]} nodeParentDistance
 * @property {number[]} nodeFrame
 * @property {number[]} threads
 * @property {number[]} sampleNode
 * @property {number[]} sampleThread
 * @property {number[]} sampleCount
 * @property {number[]} [sampleOffCpuNs] off-CPU ns of each sample, when a series has off-CPU time
 * @property {string[]} [events] the probe events, when a series counts events
 * @property {number[]} [sampleEvent] each sample's event (index into events, -1 for none), with events
 */

/**
 * The data in typed arrays, checked.
 * @typedef {object} Model
 * @property {"profile" | "diff"} mode
 * @property {string} title
 * @property {SeriesInfo[]} series
 * @property {string[]} strings
 * @property {string[]} kinds
 * @property {number} processKind index of "process" in kinds, -1 when absent
 * @property {Int32Array} frameName
 * @property {Int32Array} frameKind
 * @property {Int32Array} frameDetail
 * @property {Int32Array} nodeParent
 * @property {Int32Array} nodeFrame
 * @property {Int32Array} nodeDepth
 * @property {Uint8Array} nodeRecursive 1 where an ancestor has the same frame
 * @property {number} maxDepth
 * @property {Int32Array} threadPid
 * @property {Int32Array} threadTid
 * @property {Int32Array} threadComm
 * @property {Int32Array} threadSeries
 * @property {Int32Array} sampleNode
 * @property {Int32Array} sampleThread
 * @property {Float64Array} sampleCount CPU samples
 * @property {Float64Array | null} sampleOffCpuNs null when no series has off-CPU time
 * @property {boolean} offCpu whether a series has off-CPU time (the page then counts time, not samples)
 * @property {string[] | null} events the probe events, null when no series counts events
 * @property {Int32Array | null} sampleEvent each sample's event, null without events
 * @property {Float64Array} sampleWeight what each sample counts for: its count, or time in ns
 */

/** @typedef {"cpu" | "off" | "wall"} TimeView on-CPU time, off-CPU time, or both */

/**
 * Checks the page data and converts it to typed arrays. Throws a RangeError naming the first problem.
 * @param {PageData} data
 * @returns {Model}
 */
export function decodeData(data) {
  if (data.format !== "omniprof-flamegraph" || data.version !== 1) {
    throw new RangeError(`Cannot read the profile data: format ${data.format} version ${data.version}`);
  }
  const seriesCount = data.series.length;
  const frameCount = data.frames.length / 3;
  const nodeCount = data.nodeParentDistance.length;
  const threadCount = data.threads.length / 4;
  const sampleCount = data.sampleNode.length;
  if (
    !Number.isInteger(frameCount) || !Number.isInteger(threadCount) || data.nodeFrame.length !== nodeCount ||
    data.sampleThread.length !== sampleCount || data.sampleCount.length !== sampleCount || nodeCount < 1 ||
    (data.sampleOffCpuNs !== undefined && data.sampleOffCpuNs.length !== sampleCount) ||
    (data.events !== undefined && data.sampleEvent?.length !== sampleCount)
  ) {
    throw new RangeError("Cannot read the profile data: table lengths disagree");
  }
  addKindStyles(data.kindStyles ?? {});
  const model = {
    mode: data.mode,
    title: data.title,
    series: data.series,
    strings: data.strings,
    kinds: data.kinds,
    processKind: data.kinds.indexOf("process"),
    frameName: new Int32Array(frameCount),
    frameKind: new Int32Array(frameCount),
    frameDetail: new Int32Array(frameCount),
    nodeParent: new Int32Array(nodeCount),
    nodeFrame: Int32Array.from(data.nodeFrame),
    nodeDepth: new Int32Array(nodeCount),
    nodeRecursive: new Uint8Array(nodeCount),
    maxDepth: 0,
    threadPid: new Int32Array(threadCount),
    threadTid: new Int32Array(threadCount),
    threadComm: new Int32Array(threadCount),
    threadSeries: new Int32Array(threadCount),
    sampleNode: Int32Array.from(data.sampleNode),
    sampleThread: Int32Array.from(data.sampleThread),
    sampleCount: Float64Array.from(data.sampleCount),
    sampleOffCpuNs: data.sampleOffCpuNs === undefined ? null : Float64Array.from(data.sampleOffCpuNs),
    offCpu: data.sampleOffCpuNs !== undefined,
    events: data.events ?? null,
    sampleEvent: data.events === undefined || data.sampleEvent === undefined
      ? null
      : Int32Array.from(data.sampleEvent),
    sampleWeight: new Float64Array(0),
  };
  model.sampleWeight = model.sampleCount;
  const stringCount = data.strings.length;
  for (let f = 0; f < frameCount; f++) {
    const name = data.frames[3 * f] ?? -1, kind = data.frames[3 * f + 1] ?? -1;
    if (!(name >= 0 && name < stringCount && kind >= 0 && kind < data.kinds.length)) {
      throw new RangeError(`Cannot read the profile data: frame ${f} is out of range`);
    }
    model.frameName[f] = name;
    model.frameKind[f] = kind;
    model.frameDetail[f] = data.frames[3 * f + 2] ?? -1;
  }
  if (data.nodeParentDistance[0] !== 0) {
    throw new RangeError("Cannot read the profile data: node 0 is not the root");
  }
  model.nodeParent[0] = -1;
  // One walk in depth-first order checks that order, and finds depths and recursion: the current path is
  // a stack, and onPath counts each frame on it.
  const path = new Int32Array(nodeCount);
  const onPath = new Int32Array(frameCount);
  let top = 0;
  for (let n = 1; n < nodeCount; n++) {
    const parent = n - (data.nodeParentDistance[n] ?? 0), frame = model.nodeFrame[n] ?? -1;
    if (!(parent >= 0 && parent < n && frame >= 0 && frame < frameCount)) {
      throw new RangeError(`Cannot read the profile data: node ${n} is out of range`);
    }
    model.nodeParent[n] = parent;
    while (top > 0 && path[top - 1] !== parent) {
      const f = model.nodeFrame[path[--top] ?? 0] ?? 0;
      onPath[f] = (onPath[f] ?? 0) - 1;
    }
    if (top === 0 && parent !== 0) {
      throw new RangeError(`Cannot read the profile data: node ${n} is not in depth-first order`);
    }
    model.nodeDepth[n] = top + 1;
    if (top + 1 > model.maxDepth) model.maxDepth = top + 1;
    if ((onPath[frame] ?? 0) > 0) model.nodeRecursive[n] = 1;
    onPath[frame] = (onPath[frame] ?? 0) + 1;
    path[top++] = n;
  }
  for (let t = 0; t < threadCount; t++) {
    model.threadPid[t] = data.threads[4 * t] ?? 0;
    model.threadTid[t] = data.threads[4 * t + 1] ?? 0;
    const comm = data.threads[4 * t + 2] ?? -1, series = data.threads[4 * t + 3] ?? -1;
    if (!(comm >= 0 && comm < stringCount && series >= 0 && series < seriesCount)) {
      throw new RangeError(`Cannot read the profile data: thread ${t} is out of range`);
    }
    model.threadComm[t] = comm;
    model.threadSeries[t] = series;
  }
  const eventCount = model.events?.length ?? 0;
  for (let s = 0; s < sampleCount; s++) {
    const node = model.sampleNode[s] ?? -1, thread = model.sampleThread[s] ?? -1;
    const event = model.sampleEvent === null ? -1 : model.sampleEvent[s] ?? -2;
    if (
      !(node > 0 && node < nodeCount && thread >= 0 && thread < threadCount && event >= -1 &&
        event < eventCount)
    ) {
      throw new RangeError(`Cannot read the profile data: sample ${s} is out of range`);
    }
  }
  if (model.offCpu) weighSamples(model, "wall");
  return model;
}

/**
 * Makes each sample count for the time `view` asks for, in ns: on-CPU (its count times its series'
 * period), off-CPU (the time its thread was switched out) or both (wall time). Without off-CPU time
 * samples keep counting as samples, whatever `view`.
 * @param {Model} model
 * @param {TimeView} view
 * @returns {void}
 */
export function weighSamples(model, view) {
  const off = model.sampleOffCpuNs;
  if (off === null) {
    model.sampleWeight = model.sampleCount;
    return;
  }
  const periods = model.series.map((series) => (series.periodNs > 0 ? series.periodNs : 0));
  const weight = new Float64Array(model.sampleCount.length);
  for (let i = 0; i < weight.length; i++) {
    const period = periods[model.threadSeries[model.sampleThread[i] ?? 0] ?? 0] ?? 0;
    const cpu = view === "off" ? 0 : (model.sampleCount[i] ?? 0) * period;
    weight[i] = cpu + (view === "cpu" ? 0 : off[i] ?? 0);
  }
  model.sampleWeight = weight;
}

/**
 * Makes each sample count its hits if it is one of `event` (an index into the model's events), or,
 * for -1, whatever its event: the page then shows one probe event's stacks, or all of them. Without
 * events samples keep counting as samples.
 * @param {Model} model
 * @param {number} event
 * @returns {void}
 */
export function pickEvent(model, event) {
  const events = model.sampleEvent;
  if (events === null || event < 0) {
    model.sampleWeight = model.sampleCount;
    return;
  }
  const weight = new Float64Array(model.sampleCount.length);
  for (let i = 0; i < weight.length; i++) weight[i] = events[i] === event ? model.sampleCount[i] ?? 0 : 0;
  model.sampleWeight = weight;
}

/** @typedef {"process" | "command" | "none"} Grouping */

/**
 * The call tree as the page shows it: the stored tree with its process level kept, merged by command
 * name, or dropped. Children are listed in `children[childStart[v] .. childStart[v + 1])`, sorted by name.
 * @typedef {object} ViewTree
 * @property {Int32Array} viewOf view node of each stored node
 * @property {Int32Array} parent
 * @property {Int32Array} frame a representative frame (for merged processes: the first one)
 * @property {Int32Array} depth
 * @property {Int32Array} childStart
 * @property {Int32Array} children
 * @property {Uint8Array} recursive 1 where an ancestor has the same frame (its total is already counted)
 * @property {number} size
 * @property {number} maxDepth
 */

/**
 * Builds the view tree for a grouping. A parent's view node always precedes its children's, so one
 * backward pass over view nodes sums totals; and children are numbered in frame order, which is name
 * order, so listing them by number lists them by name.
 *
 * Merging (by command name, or dropping processes) goes level by level: each level's nodes are sorted by
 * (parent's view node, frame) with two counting sorts, and equal neighbours become one view node. That
 * is linear, and touches memory in order, where a hash table over a million nodes would not.
 * @param {Model} model
 * @param {Grouping} grouping
 * @returns {ViewTree}
 */
export function buildViewTree(model, grouping) {
  const nodeCount = model.nodeParent.length;
  const frameCount = model.frameName.length;
  let viewOf, parent, frame, recursive, size;
  if (grouping === "process") {
    // The stored tree is grouped by process already.
    viewOf = new Int32Array(nodeCount);
    for (let n = 0; n < nodeCount; n++) viewOf[n] = n;
    parent = model.nodeParent;
    frame = model.nodeFrame;
    recursive = model.nodeRecursive;
    size = nodeCount;
  } else {
    // Processes of one name share the first of their frames (frames are sorted by name, then kind).
    const canonical = new Int32Array(frameCount);
    for (let f = 0; f < frameCount; f++) {
      const previous = f - 1;
      canonical[f] = f > 0 && model.frameKind[f] === model.processKind &&
          model.frameKind[previous] === model.processKind &&
          model.frameName[f] === model.frameName[previous]
        ? canonical[previous] ?? f
        : f;
    }
    const levelStart = new Int32Array(model.maxDepth + 2);
    for (let n = 1; n < nodeCount; n++) {
      const slot = (model.nodeDepth[n] ?? 0) + 1;
      levelStart[slot] = (levelStart[slot] ?? 0) + 1;
    }
    let widest = 0;
    for (let d = 0; d <= model.maxDepth; d++) {
      widest = Math.max(widest, levelStart[d + 1] ?? 0);
      levelStart[d + 1] = (levelStart[d + 1] ?? 0) + (levelStart[d] ?? 0);
    }
    const byLevel = new Int32Array(nodeCount);
    const fill = levelStart.slice();
    for (let n = 1; n < nodeCount; n++) {
      const d = model.nodeDepth[n] ?? 0;
      byLevel[fill[d] ?? 0] = n;
      fill[d] = (fill[d] ?? 0) + 1;
    }
    viewOf = new Int32Array(nodeCount);
    parent = new Int32Array(nodeCount);
    frame = new Int32Array(nodeCount);
    recursive = new Uint8Array(nodeCount);
    parent[0] = -1;
    frame[0] = -1;
    size = 1;
    const items = new Int32Array(widest),
      itemParent = new Int32Array(widest),
      itemFrame = new Int32Array(widest);
    const byFrame = new Int32Array(widest), sorted = new Int32Array(widest);
    const frameBuckets = new Int32Array(frameCount + 1);
    for (let d = 1; d <= model.maxDepth; d++) {
      let m = 0, low = Infinity, high = -1;
      for (let i = levelStart[d] ?? 0; i < (levelStart[d + 1] ?? 0); i++) {
        const n = byLevel[i] ?? 0;
        const viewParent = viewOf[model.nodeParent[n] ?? 0] ?? 0;
        let f = model.nodeFrame[n] ?? 0;
        if (model.frameKind[f] === model.processKind) {
          if (grouping === "none") {
            viewOf[n] = viewParent;
            continue;
          }
          f = canonical[f] ?? f;
        }
        items[m] = n;
        itemParent[m] = viewParent;
        itemFrame[m] = f;
        if (viewParent < low) low = viewParent;
        if (viewParent > high) high = viewParent;
        m++;
      }
      if (m === 0) continue;
      // Counting sort by frame, then a stable one by parent: (parent, frame) order.
      frameBuckets.fill(0);
      for (let j = 0; j < m; j++) {
        const slot = (itemFrame[j] ?? 0) + 1;
        frameBuckets[slot] = (frameBuckets[slot] ?? 0) + 1;
      }
      for (let f = 0; f < frameCount; f++) {
        frameBuckets[f + 1] = (frameBuckets[f + 1] ?? 0) + (frameBuckets[f] ?? 0);
      }
      for (let j = 0; j < m; j++) {
        const f = itemFrame[j] ?? 0;
        byFrame[frameBuckets[f] ?? 0] = j;
        frameBuckets[f] = (frameBuckets[f] ?? 0) + 1;
      }
      const parentBuckets = new Int32Array(high - low + 2);
      for (let j = 0; j < m; j++) {
        const slot = (itemParent[j] ?? 0) - low + 1;
        parentBuckets[slot] = (parentBuckets[slot] ?? 0) + 1;
      }
      for (let p = 0; p <= high - low; p++) {
        parentBuckets[p + 1] = (parentBuckets[p + 1] ?? 0) + (parentBuckets[p] ?? 0);
      }
      for (let k = 0; k < m; k++) {
        const j = byFrame[k] ?? 0;
        const slot = (itemParent[j] ?? 0) - low;
        sorted[parentBuckets[slot] ?? 0] = j;
        parentBuckets[slot] = (parentBuckets[slot] ?? 0) + 1;
      }
      let lastParent = -1, lastFrame = -1, current = 0;
      for (let k = 0; k < m; k++) {
        const j = sorted[k] ?? 0;
        const p = itemParent[j] ?? 0, f = itemFrame[j] ?? 0;
        if (p !== lastParent || f !== lastFrame) {
          current = size++;
          parent[current] = p;
          frame[current] = f;
          recursive[current] = model.nodeRecursive[items[j] ?? 0] ?? 0;
          lastParent = p;
          lastFrame = f;
        }
        viewOf[items[j] ?? 0] = current;
      }
    }
    parent = parent.subarray(0, size);
    frame = frame.subarray(0, size);
    recursive = recursive.subarray(0, size);
  }
  const depth = new Int32Array(size);
  let maxDepth = 0;
  for (let v = 1; v < size; v++) {
    const d = (depth[parent[v] ?? 0] ?? 0) + 1;
    depth[v] = d;
    if (d > maxDepth) maxDepth = d;
  }
  // Children lists (CSR), in node order, which is name order.
  const childStart = new Int32Array(size + 1);
  for (let v = 1; v < size; v++) {
    const slot = (parent[v] ?? 0) + 1;
    childStart[slot] = (childStart[slot] ?? 0) + 1;
  }
  for (let v = 0; v < size; v++) childStart[v + 1] = (childStart[v + 1] ?? 0) + (childStart[v] ?? 0);
  const next = childStart.slice(0, size);
  const children = new Int32Array(Math.max(0, size - 1));
  for (let v = 1; v < size; v++) {
    const p = parent[v] ?? 0;
    children[next[p] ?? 0] = v;
    next[p] = (next[p] ?? 0) + 1;
  }
  return { viewOf, parent, frame, depth, childStart, children, recursive, size, maxDepth };
}

/**
 * Which threads pass a filter: all (`null`), or those whose flag is 1.
 * @typedef {Uint8Array | null} ThreadFilter
 */

/**
 * Self and total sample counts per view node and series, for the threads that pass the filter.
 * @typedef {object} TreeCounts
 * @property {Float64Array[]} self per series
 * @property {Float64Array[]} total per series
 * @property {number[]} samples per series: the filtered total
 */

/**
 * @param {Model} model
 * @param {ViewTree} tree
 * @param {ThreadFilter} filter
 * @returns {TreeCounts}
 */
export function countTree(model, tree, filter) {
  const seriesCount = model.series.length;
  /** @type {Float64Array[]} */
  const self = [];
  /** @type {Float64Array[]} */
  const total = [];
  for (let s = 0; s < seriesCount; s++) {
    self.push(new Float64Array(tree.size));
    total.push(new Float64Array(tree.size));
  }
  const { sampleNode, sampleThread, sampleWeight, threadSeries } = model;
  const viewOf = tree.viewOf;
  for (let i = 0; i < sampleNode.length; i++) {
    const thread = sampleThread[i] ?? 0;
    if (filter !== null && filter[thread] !== 1) continue;
    const series = self[threadSeries[thread] ?? 0];
    if (series === undefined) continue;
    const v = viewOf[sampleNode[i] ?? 0] ?? 0;
    series[v] = (series[v] ?? 0) + (sampleWeight[i] ?? 0);
  }
  const parent = tree.parent;
  /** @type {number[]} */
  const samples = [];
  for (let s = 0; s < seriesCount; s++) {
    const own = /** @type {Float64Array} */ (self[s]);
    const sum = /** @type {Float64Array} */ (total[s]);
    sum.set(own);
    for (let v = tree.size - 1; v > 0; v--) {
      const p = parent[v] ?? 0;
      sum[p] = (sum[p] ?? 0) + (sum[v] ?? 0);
    }
    samples.push(sum[0] ?? 0);
  }
  return { self, total, samples };
}

/**
 * The width each node gets: its total samples for one profile; for two, the mean of its shares of each
 * series, so frames that vanished or appeared stay visible and children still fit in their parent.
 * @param {TreeCounts} counts
 * @returns {Float64Array}
 */
export function nodeValues(counts) {
  const first = /** @type {Float64Array} */ (counts.total[0]);
  if (counts.total.length === 1) return first;
  const second = /** @type {Float64Array} */ (counts.total[1]);
  const a = counts.samples[0] ? 0.5 / (counts.samples[0] ?? 1) : 0;
  const b = counts.samples[1] ? 0.5 / (counts.samples[1] ?? 1) : 0;
  const value = new Float64Array(first.length);
  for (let v = 0; v < value.length; v++) value[v] = (first[v] ?? 0) * a + (second[v] ?? 0) * b;
  return value;
}

/**
 * Left edge of each node, in the same unit as `value`: children sit side by side from their parent's
 * left edge, in name order.
 * @param {ViewTree} tree
 * @param {Float64Array} value
 * @returns {Float64Array}
 */
export function layoutTree(tree, value) {
  const x = new Float64Array(tree.size);
  const { childStart, children } = tree;
  for (let v = 0; v < tree.size; v++) {
    let left = x[v] ?? 0;
    const end = childStart[v + 1] ?? 0;
    for (let i = childStart[v] ?? 0; i < end; i++) {
      const c = children[i] ?? 0;
      x[c] = left;
      left += value[c] ?? 0;
    }
  }
  return x;
}

/**
 * Frames to draw, in drawing order: parallel arrays, filled up to `count`.
 * @typedef {object} FrameList
 * @property {Int32Array} node
 * @property {Float64Array} left pixels
 * @property {Float64Array} width pixels
 * @property {Int32Array} depth
 * @property {number} count
 * @property {number} maxDepth deepest frame listed
 */

/**
 * Lists the frames to draw when `zoom` spans `widthPx` pixels: the zoomed node's ancestors (full width),
 * then every node of its subtree at least `minWidthPx` wide. A node narrower than that hides its whole
 * subtree (children are never wider than their parent), so the walk touches only what is drawn.
 * @param {ViewTree} tree
 * @param {Float64Array} value
 * @param {Float64Array} x
 * @param {number} zoom
 * @param {number} widthPx
 * @param {number} minWidthPx
 * @returns {FrameList}
 */
export function visibleFrames(tree, value, x, zoom, widthPx, minWidthPx) {
  let capacity = 1024;
  let list = {
    node: new Int32Array(capacity),
    left: new Float64Array(capacity),
    width: new Float64Array(capacity),
    depth: new Int32Array(capacity),
    count: 0,
    maxDepth: 0,
  };
  /** @type {(node: number, left: number, width: number) => void} */
  const push = (node, left, width) => {
    if (list.count === capacity) {
      capacity *= 2;
      const grown = {
        node: new Int32Array(capacity),
        left: new Float64Array(capacity),
        width: new Float64Array(capacity),
        depth: new Int32Array(capacity),
        count: list.count,
        maxDepth: list.maxDepth,
      };
      grown.node.set(list.node);
      grown.left.set(list.left);
      grown.width.set(list.width);
      grown.depth.set(list.depth);
      list = grown;
    }
    const d = tree.depth[node] ?? 0;
    list.node[list.count] = node;
    list.left[list.count] = left;
    list.width[list.count] = width;
    list.depth[list.count] = d;
    list.count++;
    if (d > list.maxDepth) list.maxDepth = d;
  };
  const zoomValue = value[zoom] ?? 0;
  if (!(zoomValue > 0)) return list;
  const ancestors = [];
  for (let a = tree.parent[zoom] ?? -1; a >= 0; a = tree.parent[a] ?? -1) ancestors.push(a);
  for (let i = ancestors.length - 1; i >= 0; i--) push(ancestors[i] ?? 0, 0, widthPx);
  const scale = widthPx / zoomValue;
  const origin = x[zoom] ?? 0;
  const stack = [zoom];
  const { childStart, children } = tree;
  while (stack.length > 0) {
    const v = /** @type {number} */ (stack.pop());
    const width = (value[v] ?? 0) * scale;
    if (width < minWidthPx) continue;
    push(v, ((x[v] ?? 0) - origin) * scale, width);
    const end = childStart[v + 1] ?? 0;
    for (let i = end - 1; i >= (childStart[v] ?? 0); i--) stack.push(children[i] ?? 0);
  }
  return list;
}

/**
 * Which frames a search matches: a case-insensitive substring, or a regular expression written
 * `/pattern/flags`. Returns null for an empty query; throws SyntaxError for a bad expression.
 * @param {Model} model
 * @param {string} query
 * @returns {Uint8Array | null}
 */
export function matchFrames(model, query) {
  const trimmed = query.trim();
  if (trimmed === "") return null;
  const slashed = /^\/(.+)\/([a-z]*)$/.exec(trimmed);
  /** @type {(name: string) => boolean} */
  let test;
  if (slashed) {
    const re = new RegExp(slashed[1] ?? "", (slashed[2] ?? "").replace("g", ""));
    test = (name) => re.test(name);
  } else {
    const needle = trimmed.toLowerCase();
    test = (name) => name.toLowerCase().includes(needle);
  }
  // Test each distinct name once: frames share names (the same function in several files).
  const byName = new Int8Array(model.strings.length).fill(-1);
  const matched = new Uint8Array(model.frameName.length);
  for (let f = 0; f < matched.length; f++) {
    if (model.frameKind[f] === model.processKind) continue;
    const name = model.frameName[f] ?? 0;
    let hit = byName[name] ?? -1;
    if (hit < 0) {
      hit = test(model.strings[name] ?? "") ? 1 : 0;
      byName[name] = hit;
    }
    matched[f] = hit;
  }
  return matched;
}

/**
 * Which view nodes a search matches, and the samples under them per series: a sample counts once
 * however many matching frames its stack has.
 * @param {ViewTree} tree
 * @param {TreeCounts} counts
 * @param {Uint8Array} frameMatches
 * @returns {{ nodes: Uint8Array, samples: number[] }}
 */
export function searchTree(tree, counts, frameMatches) {
  const nodes = new Uint8Array(tree.size);
  const inside = new Uint8Array(tree.size);
  const samples = counts.total.map(() => 0);
  for (let v = 1; v < tree.size; v++) {
    const p = tree.parent[v] ?? 0;
    const hit = frameMatches[tree.frame[v] ?? 0] === 1;
    if (hit) nodes[v] = 1;
    if (inside[p] === 1) inside[v] = 1;
    else if (hit) {
      inside[v] = 1;
      for (let s = 0; s < samples.length; s++) samples[s] = (samples[s] ?? 0) + (counts.total[s]?.[v] ?? 0);
    }
  }
  return { nodes, samples };
}

/**
 * One row of the top-functions table: a function's self and total samples per series (a recursive
 * function counts once per stack in its total).
 * @typedef {object} FunctionRow
 * @property {number} frame
 * @property {number[]} self
 * @property {number[]} total
 */

/**
 * Aggregates the view tree per function (frame), processes left out. Linear in the nodes: recursion was
 * marked when the tree was built.
 * @param {Model} model
 * @param {ViewTree} tree
 * @param {TreeCounts} counts
 * @returns {FunctionRow[]}
 */
export function functionTable(model, tree, counts) {
  const frameCount = model.frameName.length;
  const seriesCount = counts.total.length;
  const self = counts.self.map(() => new Float64Array(frameCount));
  const total = counts.total.map(() => new Float64Array(frameCount));
  const { frame, recursive } = tree;
  for (let s = 0; s < seriesCount; s++) {
    const nodeSelf = /** @type {Float64Array} */ (counts.self[s]);
    const nodeTotal = /** @type {Float64Array} */ (counts.total[s]);
    const ownSelf = /** @type {Float64Array} */ (self[s]);
    const ownTotal = /** @type {Float64Array} */ (total[s]);
    for (let v = 1; v < tree.size; v++) {
      const sum = nodeTotal[v] ?? 0;
      if (sum === 0) continue;
      const f = frame[v] ?? 0;
      ownSelf[f] = (ownSelf[f] ?? 0) + (nodeSelf[v] ?? 0);
      if (recursive[v] === 0) ownTotal[f] = (ownTotal[f] ?? 0) + sum;
    }
  }
  /** @type {FunctionRow[]} */
  const rows = [];
  for (let f = 0; f < frameCount; f++) {
    if (model.frameKind[f] === model.processKind) continue;
    let any = false;
    for (let s = 0; s < seriesCount; s++) if ((total[s]?.[f] ?? 0) > 0) any = true;
    if (!any) continue;
    rows.push({
      frame: f,
      self: self.map((column) => column[f] ?? 0),
      total: total.map((column) => column[f] ?? 0),
    });
  }
  return rows;
}

/**
 * The hue range, saturation and lightness of a frame kind, and the legend's label.
 * @typedef {object} KindStyle
 * @property {number} hue
 * @property {number} spread
 * @property {number} sat
 * @property {number} light
 * @property {string} label
 */

/**
 * The style of each frame kind: the profiler's own here, the runtimes' from the page data (their
 * descriptors describe them), added by {@linkcode addKindStyles}.
 */
const KIND_STYLE = /** @type {Record<string, KindStyle>} */ ({
  native: { hue: 8, spread: 38, sat: 78, light: 62, label: "native" },
  kernel: { hue: 204, spread: 22, sat: 62, light: 64, label: "kernel" },
  unknown: { hue: 0, spread: 0, sat: 0, light: 72, label: "unknown" },
  error: { hue: 0, spread: 0, sat: 0, light: 58, label: "unwinding error" },
  process: { hue: 222, spread: 0, sat: 14, light: 78, label: "process" },
});

/**
 * Adds the styles of kinds the page data describes; a kind of the profiler's own keeps its style.
 * @param {Record<string, KindStyle>} styles
 */
export function addKindStyles(styles) {
  for (const [kind, style] of Object.entries(styles)) {
    if (!Object.hasOwn(KIND_STYLE, kind)) KIND_STYLE[kind] = style;
  }
}

/**
 * The legend label of a frame kind.
 * @param {string} kind
 * @returns {string}
 */
export function kindLabel(kind) {
  return KIND_STYLE[kind]?.label ?? kind;
}

/**
 * A stable colour for a frame: the kind picks the hue range, a hash of the name the shade within it, so
 * the same function has the same colour in every view and every profile.
 * @param {string} kind
 * @param {string} name
 * @returns {string}
 */
export function frameColor(kind, name) {
  const style = KIND_STYLE[kind] ?? KIND_STYLE.unknown ?? { hue: 0, spread: 0, sat: 0, light: 70 };
  let hash = 2166136261;
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 16777619);
  // FNV-1a leaves short names close together in the high bits: mix them so "a" and "b" differ.
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x45d9f3b);
  hash ^= hash >>> 16;
  const unit = (hash >>> 0) / 4294967296;
  const hue = style.hue + style.spread * unit;
  const light = style.light + 8 * (((hash >>> 8) & 0xff) / 255 - 0.5);
  return `hsl(${hue.toFixed(1)} ${style.sat}% ${light.toFixed(1)}%)`;
}

/**
 * The colour of a change in a differential view: red for growth, blue for shrinkage, white for none,
 * saturating at `scale` (a share difference, e.g. 0.05 for 5 points).
 * @param {number} delta
 * @param {number} scale
 * @returns {string}
 */
export function diffColor(delta, scale) {
  const strength = scale > 0 ? Math.min(1, Math.abs(delta) / scale) : 0;
  if (strength < 1e-9) return "hsl(0 0% 90%)";
  const hue = delta > 0 ? 0 : 216;
  return `hsl(${hue} ${(35 + 55 * strength).toFixed(0)}% ${(88 - 36 * strength).toFixed(1)}%)`;
}

/**
 * `part` as a percentage of `whole`, for display.
 * @param {number} part
 * @param {number} whole
 * @returns {string}
 */
export function percent(part, whole) {
  if (!(whole > 0)) return "0%";
  const p = (100 * part) / whole;
  return p === 0 ? "0%" : p >= 10 ? `${p.toFixed(1)}%` : p >= 0.01 ? `${p.toFixed(2)}%` : "<0.01%";
}
