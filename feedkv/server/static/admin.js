// The admin page: polls /_admin/v1/overview and draws it. No libraries: the page must
// work with no internet access. Text from the server goes in through textContent only.
"use strict";

const OVERVIEW = "/_admin/v1/overview";
const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(100, Number(params.get("refresh")) || 2000);
const SVG = "http://www.w3.org/2000/svg";
const openRanges = new Set(); // job ids whose range list is unfolded
// job id -> its buttons and the status they were made for: kept across refreshes while
// the status holds, so a click is never lost to a refresh between press and release
const buttonsOf = new Map();

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  return node;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function rate(value) {
  return value === null || value === undefined ? "-" : value.toFixed(value < 10 ? 1 : 0) + "/s";
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(1)) + " " + units[i];
}

function time(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", " UTC") : "-";
}

// A line chart of one series over the sampled window (t: seconds since the epoch).
function chart(title, t, values, lineClass, format) {
  const width = 380, height = 120, left = 48, right = 8, top = 16, bottom = 18;
  const box = svg("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const label = svg("text", { x: left, y: 11 });
  label.textContent = title;
  box.append(label);
  box.append(svg("line", { class: "axis", x1: left, y1: height - bottom, x2: width - right, y2: height - bottom }));
  box.append(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }));
  const points = t.map((x, i) => [x, values[i]]).filter(([, y]) => y !== null && y !== undefined);
  if (points.length === 0) {
    const none = svg("text", { x: left + 8, y: height / 2 });
    none.textContent = "no samples yet";
    box.append(none);
    return box;
  }
  const t0 = Math.max(t[0], t[t.length - 1] - 3600), t1 = Math.max(t[t.length - 1], t0 + 1);
  const ymax = Math.max(...points.map(([, y]) => y)) * 1.1 || 1;
  const sx = (x) => left + ((x - t0) / (t1 - t0)) * (width - left - right);
  const sy = (y) => height - bottom - (y / ymax) * (height - top - bottom);
  const line = svg("polyline", {
    class: lineClass,
    points: points.filter(([x]) => x >= t0).map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" "),
  });
  box.append(line);
  for (const [y, text] of [[ymax, format(ymax)], [0, format(0)]]) {
    const tick = svg("text", { x: 2, y: sy(y) + 4 });
    tick.textContent = text;
    box.append(tick);
  }
  const span = svg("text", { x: width - right - 90, y: height - 4 });
  span.textContent = "last " + duration(t1 - t0);
  box.append(span);
  return box;
}

const ACTIONS = {
  pause: ["running"],
  resume: ["paused"],
  cancel: ["running", "paused", "pause-requested"],
};

function feedSection(feed) {
  const lag = el("span", { class: "lag", "data-lag-s": feed.lag_s === null ? "" : feed.lag_s }, duration(feed.lag_s));
  let kept = buttonsOf.get(feed.job_id);
  if (!kept || kept.status !== feed.status) {
    const made = el("div", { class: "buttons" });
    for (const [action, from] of Object.entries(ACTIONS)) {
      const button = el("button", { type: "button", "data-action": action, disabled: !from.includes(feed.status) }, action);
      button.addEventListener("click", () => act(feed.job_id, action, button));
      made.append(button);
    }
    kept = { status: feed.status, buttons: made };
    buttonsOf.set(feed.job_id, kept);
  }
  const buttons = kept.buttons;
  const fields = el("dl", {},
    el("dt", {}, "sink"), el("dd", { class: "mono sink" }, feed.sink || "(none)"),
    el("dt", {}, "high-water"), el("dd", { class: "high-water" }, time(feed.high_water_time), " ", el("span", { class: "muted mono" }, feed.high_water)),
    el("dt", {}, "lag now"), el("dd", {}, lag),
    el("dt", {}, "running on"), el("dd", {}, (feed.runner || "-") + (feed.runner_kind ? ` (${feed.runner_kind})` : "")),
    el("dt", {}, "owner"), el("dd", {}, feed.user),
  );
  if (feed.scan_fraction !== null && feed.scan_fraction !== undefined) {
    const percent = Math.round(feed.scan_fraction * 100);
    fields.append(el("dt", {}, "scan"), el("dd", { class: "scan" },
      el("progress", { max: 100, value: percent }), ` ${percent}% (initial scan or backfill)`));
  }
  if (feed.runner_kind === "spark") {
    const b = feed.spark;
    fields.append(el("dt", {}, "spark"), el("dd", { class: "spark" }, b
      ? `batch ${b.batch_id}: ${b.rows} rows, ${rate(b.input_rows_per_s)} in, ${rate(b.processed_rows_per_s)} processed, ` +
        `took ${duration(b.duration_s)} (${feed.spark_batches} batches here)`
      : "no batch finished yet"));
  }
  if (feed.running_status) fields.append(el("dt", {}, "running status"), el("dd", { class: "running-status" }, feed.running_status));
  if (feed.error) fields.append(el("dt", {}, "error"), el("dd", { class: "error" }, feed.error));
  const h = feed.history;
  const charts = el("div", { class: "charts" },
    chart("lag", h.t, h.lag_s, "lag-line", duration),
    chart("throughput (messages/s)", h.t, h.rows_per_s, "rate-line", rate),
  );
  const ranges = el("details", { class: "feed-ranges", open: openRanges.has(feed.job_id) },
    el("summary", {}, `${feed.runner_kind === "spark" ? "ranges its batches read" : "rangefeed ranges"} (${feed.ranges.length})`),
    feed.ranges.length === 0
      ? el("p", { class: "muted" }, "none read on this node now")
      : el("table", {},
          el("thead", {}, el("tr", {}, el("th", {}, "range"), el("th", {}, "span"), el("th", {}, "node"), el("th", {}, "resolved"))),
          el("tbody", {}, ...feed.ranges.map((r) => el("tr", {},
            el("td", {}, r.range_id === null ? "?" : "r" + r.range_id),
            el("td", { class: "mono" }, r.span),
            el("td", {}, r.node === null ? "-" : "n" + r.node),
            el("td", {}, time(r.resolved_time), " ", el("span", { class: "muted mono" }, r.resolved)))))),
  );
  ranges.addEventListener("toggle", () => (ranges.open ? openRanges.add(feed.job_id) : openRanges.delete(feed.job_id)));
  return el("section", { class: "feed", "data-job-id": feed.job_id, "data-status": feed.status },
    el("h3", {}, el("span", { class: "mono" }, feed.job_id), el("span", { class: "status " + feed.status }, feed.status), el("span", { class: "description" }, feed.description)),
    fields, charts, buttons, ranges);
}

function render(data) {
  document.getElementById("whoami").textContent = `node ${data.node} · ${data.user}${data.secure ? "" : " (insecure)"}`;
  const feeds = document.getElementById("feeds");
  const shown = new Set(data.changefeeds.map((feed) => feed.job_id));
  for (const jobId of buttonsOf.keys()) if (!shown.has(jobId)) buttonsOf.delete(jobId);
  feeds.replaceChildren(...data.changefeeds.map(feedSection));
  document.getElementById("no-feeds").hidden = data.changefeeds.length > 0;
  document.querySelector("#nodes tbody").replaceChildren(...data.nodes.map((n) => el("tr", {},
    el("td", {}, n.node_id), el("td", { class: "mono" }, n.address),
    el("td", { class: "mono" }, n.locality || "-"),
    el("td", { class: n.live ? "" : "problem" }, n.live ? "live" : "dead"),
    el("td", {}, n.heard_ago_s === undefined || n.heard_ago_s === null ? "-" : duration(n.heard_ago_s) + " ago"),
    el("td", {}, n.offset_ms === undefined || n.offset_ms === null ? "-" : n.offset_ms.toFixed(1) + " ms"))));
  document.querySelector("#ranges tbody").replaceChildren(...data.ranges.map((r) => el("tr", {},
    el("td", {}, "r" + r.range_id), el("td", { class: "mono" }, r.span), el("td", {}, r.replicas.join(", ")),
    el("td", {}, r.bytes === null ? "(on another node)" : r.bytes), el("td", {}, time(r.closed_time)))));
  const b = data.buffers;
  document.getElementById("buffers").textContent =
    `changefeed buffers: ${bytes(b.memory)} of ${bytes(b.memory_limit)} in memory, ${bytes(b.disk)} of ${bytes(b.disk_limit)} on disk`;
  document.getElementById("refreshed").textContent = "updated " + new Date(data.now * 1000).toLocaleTimeString();
}

function problem(text) {
  const node = document.getElementById("problem");
  node.textContent = text || "";
  node.hidden = !text;
}

async function answer(response) {
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

async function act(jobId, action, button) {
  button.disabled = true;
  try {
    await answer(await fetch(`/_admin/v1/jobs/${jobId}/${action}`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-Feedkv-Admin": "1" },
    }));
    problem("");
  } catch (error) {
    problem(`${action} job ${jobId}: ${error.message}`);
  }
  buttonsOf.delete(jobId); // the next refresh makes them for the status it finds
  refresh();
}

let timer = null;

async function refresh() {
  clearTimeout(timer);
  try {
    render(await answer(await fetch(OVERVIEW, { credentials: "same-origin", cache: "no-store" })));
    const shown = document.getElementById("problem");
    if (shown.dataset.fetch) {
      delete shown.dataset.fetch;
      problem("");
    }
  } catch (error) {
    problem("cannot reach the node: " + error.message);
    document.getElementById("problem").dataset.fetch = "1";
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

refresh();
