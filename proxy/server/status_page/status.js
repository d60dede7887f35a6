// The status page: reads /stats/stream (a /stats snapshot a second) and
// /budgets from the admin listener that served it, and draws them. It only
// reads (GET); the charts' history lives in this tab, five minutes of it.
//
// With admin.token set, the token typed into the form is kept in a
// variable of this script and sent as an Authorization header, never in a
// URL, a cookie or storage. EventSource cannot send that header, so the
// feed is read with fetch() and a streaming body reader, which also
// reconnects on its own after the `retry:` the feed names.
"use strict";

(() => {
  const HISTORY_S = 300;
  const STALL_MS = 5000; // no snapshot for this long: the feed is dropped and opened again
  const $ = (id) => document.getElementById(id);

  let token = null; // the admin token, only here
  let feed = null; // the AbortController of the open feed
  let lastSnapshotAt = 0;
  let previous = null; // the last snapshot, for rates
  let traceUrl = "";
  const routes = new Map(); // name -> {card, charts, data}

  const authHeaders = () => (token ? { Authorization: `Bearer ${token}` } : {});
  const get = (path, signal) => fetch(path, { headers: authHeaders(), cache: "no-store", signal });

  // ---- formatting

  const ms = (us) => (us === null || us === undefined ? "–" : (us / 1000).toFixed(us < 10000 ? 1 : 0) + " ms");
  const count = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en"));
  function duration(s) {
    const parts = [[86400, "d"], [3600, "h"], [60, "m"], [1, "s"]];
    let out = "";
    for (const [size, unit] of parts) {
      if (s >= size || (unit === "s" && out === "")) {
        out += `${Math.floor(s / size)}${unit} `;
        s %= size;
      }
    }
    return out.trim();
  }
  const clock = (unixMs) => new Date(unixMs).toLocaleTimeString("en-GB");

  function element(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text; // (never innerHTML: names come from clients and configs)
    return e;
  }

  function setConnection(state, words) {
    const c = $("connection");
    c.className = `connection ${state}`;
    c.textContent = words;
  }

  // ---- the header

  function showProcess(p) {
    $("version").textContent = p.version;
    $("uptime").textContent = duration(p.uptime_s);
    $("config-file").textContent = p.config_file;
    const last = p.reloads.last;
    const reload = $("last-reload");
    reload.className = last && last.result === "failure" ? "reload-failure" : "";
    reload.textContent = last
      ? `${last.result} at ${clock(last.at_unix_ms)}${last.error ? ": " + last.error : ""}`
      : "none since start";
    reload.title = `${p.reloads.success} succeeded, ${p.reloads.failure} refused since start`;
    $("listeners").textContent = p.listeners.map((l) => `${l.name} ${l.url}`).join(", ");
    traceUrl = p.admin.trace_url;
  }

  // ---- routes: figures and charts

  function chartWidth(card) {
    return Math.max(200, card.clientWidth - 20);
  }

  function makeChart(card, title, series, scales) {
    const box = element("div", "chart");
    box.append(element("h4", "", title));
    card.append(box);
    const opts = {
      width: chartWidth(card),
      height: 150,
      series: [{}, ...series],
      // (What history there is, from 30 s to the five minutes kept.)
      scales: { x: { time: true, range: (u, min, max) => [Math.min(max - 30, Math.max(min, max - HISTORY_S)), max] }, ...(scales || {}) },
      axes: [{}, { size: 56 }, ...(scales && scales.rate ? [{ scale: "rate", side: 1, size: 56, grid: { show: false } }] : [])],
      legend: { live: false },
      cursor: { show: false },
    };
    const data = [[], ...series.map(() => [])];
    const plot = new uPlot(opts, data, box);
    return { box, plot, data };
  }

  function routeCard(name) {
    if (routes.has(name)) return routes.get(name);
    const card = element("article", "route");
    card.dataset.route = name;
    card.append(element("h3", "", name));
    const figures = element("div", "figures");
    card.append(figures);
    $("routes").append(card);
    const percentile = (colour) => ({ stroke: colour, width: 1.5 });
    const entry = {
      card,
      figures,
      tally: null,
      ttft: makeChart(card, "time to first token (ms)", [
        { label: "p50", ...percentile("#1f77b4") },
        { label: "p95", ...percentile("#e08a00") },
        { label: "p99", ...percentile("#c62f2f") },
      ]),
      gap: makeChart(card, "inter-token (ms)", [
        { label: "p50", ...percentile("#1f77b4") },
        { label: "p95", ...percentile("#e08a00") },
        { label: "p99", ...percentile("#c62f2f") },
      ]),
      rates: makeChart(
        card,
        "requests/s and output tokens/s",
        [
          { label: "requests/s", stroke: "#6a4c93", width: 1.5 },
          { label: "tokens/s", stroke: "#1f8a4c", width: 1.5, scale: "rate" },
        ],
        { rate: { auto: true } },
      ),
    };
    entry.tally = element("div", "tally");
    card.append(entry.tally);
    routes.set(name, entry);
    return entry;
  }

  function push(chart, t, values) {
    const d = chart.data;
    d[0].push(t);
    values.forEach((v, i) => d[i + 1].push(v));
    while (d[0].length && d[0][0] < t - HISTORY_S) d.forEach((column) => column.shift());
    chart.plot.setData(d);
    // (How many points hold a value: what the browser test watches grow.)
    chart.box.dataset.points = String(d[1].filter((v) => v !== null).length);
  }

  const quantiles = (w) => (w.count > 0 ? [w.p50, w.p95, w.p99].map((us) => us / 1000) : [null, null, null]);
  const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);

  function showRoute(name, r, prev, dt, t) {
    const entry = routeCard(name);
    const requests = sum(r.requests);
    let rps = null;
    let tps = null;
    if (prev && dt > 0) {
      rps = Math.max(0, (requests - sum(prev.requests)) / dt);
      tps = Math.max(0, (r.tokens.output - prev.tokens.output) / dt);
    }
    push(entry.ttft, t, quantiles(r.ttft_us.last_1m));
    push(entry.gap, t, quantiles(r.inter_token_us.last_1m));
    push(entry.rates, t, [rps, tps]);
    entry.figures.replaceChildren(
      ...[
        ["TTFT p50 (1m)", ms(r.ttft_us.last_1m.count ? r.ttft_us.last_1m.p50 : null)],
        ["requests/s", rps === null ? "–" : rps.toFixed(1)],
        ["tokens/s", tps === null ? "–" : tps.toFixed(0)],
        ["requests", count(requests)],
        ["clamped", count(r.limits.clamped)],
        ["cut at limit", count(r.limits.cut)],
        ["resumed", count(r.resumes ? sum(r.resumes) : 0)],
      ].map(([label, value]) => {
        const s = element("span", "", `${label} `);
        s.append(element("b", "", value));
        return s;
      }),
    );
    showTally(entry.tally, r.errors);
  }

  // Refusals (the policy's: keys, limits, budgets) apart from errors.
  function showTally(tally, errors) {
    const tags = [];
    for (const [side, codes] of Object.entries(errors)) {
      for (const [code, n] of Object.entries(codes)) {
        const refusal = side === "policy";
        const tag = element("span", `tag ${refusal ? "refusal" : "error"}`, `${refusal ? "refused" : side} ${code}: ${n}`);
        tag.dataset.code = code;
        tags.push(tag);
      }
    }
    if (!tags.length) tags.push(element("span", "muted", "no errors or refusals"));
    tally.replaceChildren(...tags);
  }

  function showRoutes(s) {
    const t = s.process.now_unix_ms / 1000;
    const dt = previous ? t - previous.process.now_unix_ms / 1000 : 0;
    for (const [name, r] of Object.entries(s.routes)) showRoute(name, r, previous && previous.routes[name], dt, t);
    for (const [name, entry] of routes) {
      if (!(name in s.routes)) {
        entry.card.remove();
        routes.delete(name);
      }
    }
  }

  // ---- upstreams and the slowest requests

  function row(cells) {
    const tr = element("tr");
    for (const c of cells) {
      if (c instanceof Node) {
        const td = element("td");
        td.append(c);
        tr.append(td);
      } else {
        tr.append(element("td", typeof c === "number" ? "num" : "", c === null || c === undefined ? "–" : String(c)));
      }
    }
    return tr;
  }

  function showUpstreams(upstreams) {
    const rows = Object.entries(upstreams).map(([name, u]) => {
      const verdict = u.healthy ? "healthy" : "unhealthy";
      const since = u.health_changed_unix_ms ? ` since ${clock(u.health_changed_unix_ms)}` : "";
      const health = u.health_check
        ? element("span", verdict, verdict + since)
        : element("span", "muted", "not checked");
      const tr = row([name, health, u.in_flight_streams, u.queued, u.engine_running, u.engine_waiting,
        u.prefix_cache_hit_ratio === null ? null : `${(100 * u.prefix_cache_hit_ratio).toFixed(1)} %`,
        u.retries]);
      tr.dataset.upstream = name;
      tr.dataset.health = u.health_check ? (u.healthy ? "healthy" : "unhealthy") : "unchecked";
      return tr;
    });
    $("upstreams").tBodies[0].replaceChildren(...rows);
  }

  function traceLink(id) {
    if (!id) return null;
    if (!traceUrl) return element("code", "", id);
    const a = element("a", "", id.slice(0, 16) + "…");
    a.href = traceUrl.replace("{trace_id}", encodeURIComponent(id));
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    return a;
  }

  function showSlowest(slowest) {
    const rows = slowest.map((r) =>
      row([r.route, r.model, ms(r.ttft_us), ms(r.duration_us), r.status, element("code", "", r.request_id), traceLink(r.trace_id)]));
    if (!rows.length) {
      const td = element("td", "empty", "no requests in the last 5 minutes");
      td.colSpan = 7;
      const tr = element("tr");
      tr.append(td);
      rows.push(tr);
    }
    $("slowest").tBodies[0].replaceChildren(...rows);
  }

  function onSnapshot(s) {
    lastSnapshotAt = Date.now();
    showProcess(s.process);
    showRoutes(s);
    showUpstreams(s.upstreams);
    showSlowest(s.slowest);
    previous = s;
    setConnection("live", "live");
  }

  // ---- budgets, from /budgets once a second

  function showBudgets(report) {
    const list = report.budgets || [];
    const cards = list.map((b) => {
      const card = element("div", "budget");
      card.dataset.scope = b.scope;
      card.dataset.name = b.name;
      card.dataset.limit = b.limit;
      card.dataset.refusals = String(b.refusals || 0);
      const share = b.limit_value > 0 ? Math.min(1, b.used / b.limit_value) : 0;
      if (b.refusals > 0 || b.remaining <= 0) card.classList.add("refused");
      else if (share >= 0.8) card.classList.add("near");
      const label = element("div", "label");
      label.append(element("b", "", `${b.scope} ${b.name}`), element("span", "muted", b.limit.replaceAll("_", " ")));
      const bar = element("div", "bar");
      const fill = element("div");
      fill.style.width = `${(100 * share).toFixed(1)}%`;
      bar.append(fill);
      const text = element("div", "muted",
        `${count(b.used)} used of ${count(b.limit_value)}, ${count(b.remaining)} left` +
        (b.resets_in_ms !== undefined ? `, resets in ${duration(Math.ceil(b.resets_in_ms / 1000))} (${clock(b.resets_at_unix_ms)})` : ""));
      card.append(label, bar, text);
      if (b.refusals > 0) card.append(element("div", "refusals", `${count(b.refusals)} refused`));
      return card;
    });
    if (!cards.length) cards.push(element("p", "empty", "No key or route has a budget."));
    $("budgets").replaceChildren(...cards);
  }

  async function pollBudgets() {
    try {
      const res = await get("/budgets");
      if (res.ok) showBudgets(await res.json());
    } catch {
      // (the feed's state says when the listener is away)
    }
    setTimeout(pollBudgets, 1000);
  }

  // ---- the feed

  function parseEvents(text, onEvent) {
    let rest = text.replace(/\r\n?/g, "\n");
    let end;
    while ((end = rest.indexOf("\n\n")) >= 0) {
      const event = { data: [], retry: null };
      for (const line of rest.slice(0, end).split("\n")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") event.data.push(value);
        else if (field === "retry" && /^\d+$/.test(value)) event.retry = Number(value);
      }
      onEvent(event);
      rest = rest.slice(end + 2);
    }
    return rest;
  }

  async function readFeed(controller) {
    let retry = 2000;
    const res = await get("/stats/stream", controller.signal);
    if (res.status === 401) return { retry, refused: true };
    if (!res.ok) {
      setConnection("down", `feed refused (HTTP ${res.status}), retrying`);
      return { retry };
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { retry };
      buffer = parseEvents(buffer + value, (event) => {
        if (event.retry !== null) retry = event.retry;
        if (event.data.length) onSnapshot(JSON.parse(event.data.join("\n")));
      });
    }
  }

  async function connect() {
    const controller = new AbortController();
    feed = controller;
    lastSnapshotAt = Date.now();
    let outcome = { retry: 2000 };
    try {
      outcome = await readFeed(controller);
    } catch {
      // (a drop, or the watchdog's abort: both reconnect below)
    }
    if (feed !== controller) return;
    if (outcome.refused) {
      askForToken("The token was refused.");
      return;
    }
    setConnection("down", "disconnected, reconnecting");
    setTimeout(connect, outcome.retry);
  }

  // A feed that stops sending without closing (a proxy in between, a
  // suspended laptop) is dropped and opened again.
  setInterval(() => {
    if (feed && Date.now() - lastSnapshotAt > STALL_MS) feed.abort();
  }, 1000);

  // ---- the token

  function askForToken(why) {
    token = null;
    if (feed) feed.abort();
    feed = null;
    $("data").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = why || "";
    setConnection("down", "needs the admin token");
    $("token").focus();
  }

  $("login").addEventListener("submit", async (e) => {
    e.preventDefault();
    const input = $("token");
    token = input.value;
    input.value = "";
    const res = await get("/stats").catch(() => null);
    if (!res || res.status === 401) {
      askForToken(res ? "That token was refused." : "The admin listener did not answer.");
      return;
    }
    begin(false);
  });

  let pollingBudgets = false;
  function begin(unauthenticated) {
    $("login").hidden = true;
    $("unauthenticated").hidden = !unauthenticated;
    $("data").hidden = false;
    connect();
    if (!pollingBudgets) pollBudgets();
    pollingBudgets = true;
  }

  window.addEventListener("resize", () => {
    for (const entry of routes.values()) {
      for (const chart of [entry.ttft, entry.gap, entry.rates]) chart.plot.setSize({ width: chartWidth(entry.card), height: 150 });
    }
  });

  async function start() {
    const res = await get("/stats").catch(() => null);
    if (!res) {
      setConnection("down", "the admin listener did not answer; reload the page");
      return;
    }
    if (res.status === 401) askForToken();
    else begin(true);
  }

  start();
})();
