// Ferry status page: polls the HTTP API once a second and renders every sink and source.
//
// The API lives at the origin of the page one level above it: the page is served at
// <base>/ui/, the JSON routes at <base>/sinks, <base>/sources, ... so every URL is resolved
// relative to the page (works behind a reverse-proxy prefix too). When a request answers 401
// the page asks for an API key, keeps it in sessionStorage and sends it as the `api-key`
// header. Rows are created once per connector and updated in place, so a button is never
// replaced under the pointer; tests find them by data-kind / data-key.
"use strict";

(function () {
  const POLL_MS = 1000;
  const MIN_RATE_WINDOW_MS = 500; // shorter windows (a refresh right after a click) are too noisy
  const KEY_STORAGE = "ferry.apiKey";
  const NONE = "—";

  const $ = (sel) => document.querySelector(sel);

  // apiURL resolves an API path ("sinks/out/status") against the directory above the page.
  function apiURL(path) {
    return new URL("../" + path, document.baseURI).href;
  }

  let memoryKey = ""; // used when sessionStorage is not available

  function apiKey() {
    try {
      return sessionStorage.getItem(KEY_STORAGE) || memoryKey;
    } catch (e) {
      return memoryKey;
    }
  }

  class AuthError extends Error {}

  class APIError extends Error {
    constructor(status, code, reason) {
      super(code ? `${status} ${code}: ${reason}` : `${status}: ${reason}`);
      this.status = status;
    }
  }

  // request calls the API; it throws AuthError on 401 and APIError on any other non-2xx.
  async function request(method, path) {
    const headers = { Accept: "application/json" };
    const key = apiKey();
    if (key) headers["api-key"] = key;
    const res = await fetch(apiURL(path), { method, headers, cache: "no-store" });
    if (res.status === 401) throw new AuthError();
    if (!res.ok) {
      const text = await res.text();
      let code = "", reason = text || res.statusText;
      try {
        const body = JSON.parse(text);
        code = body.code || "";
        reason = body.reason || reason;
      } catch (e) { /* a plain-text error body */ }
      throw new APIError(res.status, code, reason);
    }
    if (res.status === 204) return null;
    return res.json();
  }

  // ---- formatting -------------------------------------------------------------------

  function fmtCount(n) {
    return typeof n === "number" ? n.toLocaleString("en-US") : NONE;
  }

  function fmtOffset(n) {
    return typeof n === "number" && n >= 0 ? String(n) : NONE;
  }

  function fmtRate(r) {
    if (r === null || r === undefined) return NONE;
    if (r < 10) return r.toFixed(1);
    return Math.round(r).toLocaleString("en-US");
  }

  function fmtTime(micros) {
    return new Date(micros / 1000).toLocaleTimeString([], { hour12: false });
  }

  function fmtRestarts(r) {
    if (!r) return NONE;
    let s = String(r.restarts);
    if (r.max_restarts > 0) s += "/" + r.max_restarts;
    if (r.gave_up) s += ", gave up";
    return s;
  }

  function fmtNextRetry(r) {
    if (!r || r.next_retry === null || r.next_retry === undefined) return NONE;
    const secs = Math.max(0, Math.round((r.next_retry / 1000 - Date.now()) / 1000));
    return `in ${secs}s (${fmtTime(r.next_retry)})`;
  }

  // ---- throughput ---------------------------------------------------------------------

  const rates = new Map(); // "kind/key" -> {id, count, at, rate}

  function throughput(kind, key, id, count) {
    const k = kind + "/" + key;
    const now = performance.now();
    const prev = rates.get(k);
    if (typeof count !== "number") return null;
    if (!prev || prev.id !== id || count < prev.count) {
      rates.set(k, { id, count, at: now, rate: null }); // first sample, or a new instance
      return null;
    }
    if (now - prev.at < MIN_RATE_WINDOW_MS) return prev.rate;
    const rate = ((count - prev.count) * 1000) / (now - prev.at);
    rates.set(k, { id, count, at: now, rate });
    return rate;
  }

  // ---- rendering ------------------------------------------------------------------------

  const KINDS = {
    sink: {
      table: "#sinks",
      columns: ["key", "name", "status", "paused", "rate num", "polled num", "delivered num",
        "committed num", "dead-lettered num", "skipped num", "decode-errors num", "restarts num",
        "next-retry", "last-error", "actions"],
      actions: ["pause", "resume", "restart"],
      counter: "delivered",
    },
    source: {
      table: "#sources",
      columns: ["key", "name", "status", "rate num", "produced num", "sent num", "dead-lettered num",
        "skipped num", "decode-errors num", "restarts num", "next-retry", "last-error", "actions"],
      actions: ["restart"],
      counter: "sent",
    },
  };

  const LABELS = { pause: "Pause", resume: "Resume", restart: "Restart" };
  const DONE = { pause: "Paused", resume: "Resumed", restart: "Restarted" };

  function cell(row, name) {
    return row.querySelector(":scope > ." + name);
  }

  function setText(el, text) {
    if (el.textContent !== text) el.textContent = text;
  }

  function makeRow(kind, key) {
    const spec = KINDS[kind];
    const tr = document.createElement("tr");
    tr.dataset.kind = kind;
    tr.dataset.key = key;
    for (const c of spec.columns) {
      const td = document.createElement(c === "key" ? "th" : "td");
      if (c === "key") td.scope = "row";
      td.className = c;
      tr.appendChild(td);
    }
    const actions = cell(tr, "actions");
    for (const a of spec.actions) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = a;
      b.textContent = LABELS[a];
      b.setAttribute("aria-label", `${LABELS[a]} ${kind} ${key}`);
      b.addEventListener("click", () => act(kind, key, a, b));
      actions.appendChild(b);
    }
    return tr;
  }

  function makePartitionsRow(key, span) {
    const tr = document.createElement("tr");
    tr.className = "partitions-row";
    tr.dataset.partitionsFor = key;
    const td = document.createElement("td");
    td.colSpan = span;
    const table = document.createElement("table");
    table.className = "partitions";
    const caption = document.createElement("caption");
    caption.textContent = `Partitions of sink ${key}`;
    table.appendChild(caption);
    const head = document.createElement("thead");
    const hr = document.createElement("tr");
    for (const [label, cls] of [["Stream", ""], ["Topic", ""], ["Partition", "num"],
      ["Current offset", "num"], ["Stored", "num"], ["Lag", "num"], ["Uncommitted", "num"],
      ["Paused", ""], ["State", ""]]) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = label;
      if (cls) th.className = cls;
      hr.appendChild(th);
    }
    head.appendChild(hr);
    table.appendChild(head);
    table.appendChild(document.createElement("tbody"));
    td.appendChild(table);
    tr.appendChild(td);
    return tr;
  }

  function renderPartitions(tr, parts) {
    const tbody = tr.querySelector("tbody");
    const rows = [];
    for (const p of parts || []) {
      const r = document.createElement("tr");
      r.dataset.stream = p.stream;
      r.dataset.topic = p.topic;
      r.dataset.partition = String(p.partition_id);
      r.dataset.paused = String(!!p.paused);
      for (const [cls, text] of [["stream", p.stream], ["topic", p.topic],
        ["partition num", String(p.partition_id)], ["current-offset num", fmtOffset(p.current_offset)],
        ["stored num", fmtOffset(p.stored)], ["lag num", fmtCount(p.lag)],
        ["uncommitted num", fmtCount(p.uncommitted)], ["paused", p.paused ? "paused" : "no"],
        ["state", p.state]]) {
        const td = document.createElement("td");
        td.className = cls;
        td.textContent = text;
        r.appendChild(td);
      }
      rows.push(r);
    }
    if (rows.length === 0) {
      const r = document.createElement("tr");
      const td = document.createElement("td");
      td.colSpan = 9;
      td.className = "empty";
      td.textContent = "No partitions.";
      r.appendChild(td);
      rows.push(r);
    }
    tbody.replaceChildren(...rows);
  }

  function renderRow(tr, kind, info, st) {
    const spec = KINDS[kind];
    const s = st || info; // the list entry stands in when its status could not be read
    const stats = (st && st.stats) || {};
    tr.dataset.status = s.status;
    setText(cell(tr, "key"), info.key);
    setText(cell(tr, "name"), info.name || "");
    setText(cell(tr, "status"), s.status);
    const rate = st ? throughput(kind, info.key, st.id, stats[spec.counter]) : null;
    setText(cell(tr, "rate"), fmtRate(rate));
    if (kind === "sink") {
      const paused = !!(st && st.paused);
      tr.dataset.paused = String(paused);
      setText(cell(tr, "paused"), paused ? "paused" : "no");
      setText(cell(tr, "polled"), fmtCount(stats.polled));
      setText(cell(tr, "delivered"), fmtCount(stats.delivered));
      setText(cell(tr, "committed"), fmtCount(stats.committed));
      tr.querySelector("button.pause").disabled = paused;
      tr.querySelector("button.resume").disabled = !paused;
    } else {
      setText(cell(tr, "produced"), fmtCount(stats.produced));
      setText(cell(tr, "sent"), fmtCount(stats.sent));
    }
    // What was not delivered, and why: "polled 10, delivered 7" is explained here.
    setText(cell(tr, "dead-lettered"), fmtCount(stats.dead_lettered));
    setText(cell(tr, "skipped"), fmtCount(stats.skipped));
    setText(cell(tr, "decode-errors"), fmtCount(stats.decode_errors));
    const restart = st && st.restart;
    const rc = cell(tr, "restarts");
    setText(rc, fmtRestarts(restart));
    rc.title = restart ? `${restart.total} restarts in all` : "";
    setText(cell(tr, "next-retry"), fmtNextRetry(restart));
    const le = cell(tr, "last-error");
    const err = s.last_error;
    setText(le, err ? err.message : "");
    le.title = err && err.timestamp ? "at " + new Date(err.timestamp / 1000).toLocaleString() : "";
  }

  // render puts one kind's rows in the table in list order, reusing existing rows.
  function render(kind, list, statuses) {
    const spec = KINDS[kind];
    const tbody = $(spec.table + " > tbody");
    const old = new Map();
    for (const tr of tbody.querySelectorAll(":scope > tr[data-key]")) {
      old.set("c:" + tr.dataset.key, tr);
    }
    for (const tr of tbody.querySelectorAll(":scope > tr[data-partitions-for]")) {
      old.set("p:" + tr.dataset.partitionsFor, tr);
    }
    const rows = [];
    list.forEach((info, i) => {
      const tr = old.get("c:" + info.key) || makeRow(kind, info.key);
      renderRow(tr, kind, info, statuses[i]);
      rows.push(tr);
      if (kind === "sink") {
        const pr = old.get("p:" + info.key) || makePartitionsRow(info.key, spec.columns.length);
        renderPartitions(pr, statuses[i] && statuses[i].partitions);
        rows.push(pr);
      }
    });
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      const td = document.createElement("td");
      td.colSpan = spec.columns.length;
      td.className = "empty";
      td.textContent = `No ${kind}s configured.`;
      tr.appendChild(td);
      rows.push(tr);
    }
    const same = rows.length === tbody.children.length && rows.every((r, i) => tbody.children[i] === r);
    if (!same) tbody.replaceChildren(...rows);
  }

  // ---- polling ----------------------------------------------------------------------------

  let needKey = false;
  let inflight = null;
  let again = false;

  async function load(kind) {
    const list = await request("GET", kind + "s");
    const statuses = await Promise.all(list.map((info) =>
      request("GET", `${kind}s/${encodeURIComponent(info.key)}/status`).catch((e) => {
        if (e instanceof AuthError) throw e;
        return null; // gone or failing: the list entry is shown instead
      })));
    return { list, statuses };
  }

  async function doRefresh() {
    if (needKey) return;
    try {
      const [sinks, sources] = await Promise.all([load("sink"), load("source")]);
      render("sink", sinks.list, sinks.statuses);
      render("source", sources.list, sources.statuses);
      $("#conn").hidden = true;
      setText($("#updated"), "Updated " + new Date().toLocaleTimeString([], { hour12: false }));
    } catch (e) {
      if (e instanceof AuthError) {
        askForKey();
        return;
      }
      const conn = $("#conn");
      setText(conn, "Cannot read the API: " + e.message);
      conn.hidden = false;
    }
  }

  // refresh runs one poll now; a call during a poll runs one more right after it.
  function refresh() {
    if (inflight) {
      again = true;
      return inflight;
    }
    inflight = doRefresh().finally(() => {
      inflight = null;
      if (again) {
        again = false;
        refresh();
      }
    });
    return inflight;
  }

  function poll() {
    refresh().finally(() => setTimeout(poll, POLL_MS));
  }

  function askForKey() {
    needKey = true;
    const form = $("#auth");
    setText($("#auth-message"), apiKey() ? "The API refused the API key; enter another." : "The API needs an API key.");
    if (form.hidden) {
      form.hidden = false;
      $("#api-key").focus();
    }
  }

  function notice(text, isError) {
    const n = $("#notice");
    n.classList.toggle("error", !!isError);
    setText(n, text);
    n.hidden = false;
  }

  async function act(kind, key, action, button) {
    button.disabled = true;
    try {
      await request("POST", `${kind}s/${encodeURIComponent(key)}/${action}`);
      notice(`${DONE[action]} ${kind} ${key}.`, false);
    } catch (e) {
      if (e instanceof AuthError) askForKey();
      else notice(`${LABELS[action]} ${kind} ${key} failed: ${e.message}`, true);
    } finally {
      button.disabled = false;
      refresh(); // re-derives every button's state
    }
  }

  $("#auth").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("#api-key");
    memoryKey = input.value;
    try {
      sessionStorage.setItem(KEY_STORAGE, input.value);
    } catch (e) { /* storage disabled: the key lasts until the page is reloaded */ }
    input.value = "";
    $("#auth").hidden = true;
    needKey = false;
    refresh();
  });

  poll();
})();
