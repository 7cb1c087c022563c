// binky dashboard: every world at a glance, pushed by the daemon (server-sent events).
// Plain JavaScript, no build step: the daemon serves this file as it is.
"use strict";

const worlds = new Map(); // id -> world (as /api/stream sends it)
let globals = null;
let selected = null; // world id
let logSource = null;
let logPaused = false;
let logHeld = []; // lines received while paused
const LOG_MAX = 5000;

const $ = (id) => document.getElementById(id);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "text") e.textContent = v;
    else e[k] = v;
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
};

function bytes(n) {
  if (n == null) return "";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : n) + " " + u[i];
}

function age(ms) {
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return Math.floor(s) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}

function clock(ms) {
  const d = new Date(ms);
  return d.toLocaleString(undefined, { hour12: false });
}

// Why a world is not simply ready: the conditions that do not hold (held, failing,
// cooled, queued), first line of each.
function why(w) {
  const v = w.view;
  const out = [];
  for (const c of v.conditions) {
    if (c.status !== "True" && (c.stalled || v.state !== "ready")) {
      out.push(c.message.split("\n")[0]);
    }
  }
  for (const s of v.services) {
    if (["failed", "crashed", "backoff", "unhealthy"].includes(s.state) && s.message) {
      out.push(s.name + ": " + s.message.split("\n")[0]);
    }
  }
  return [...new Set(out)].join(" · ");
}

function stateSpan(state) {
  return el("span", { class: "state s-" + state, text: state });
}

function renderWorlds() {
  const box = $("worlds");
  const list = [...worlds.values()].sort((a, b) =>
    a.project.localeCompare(b.project) || a.name.localeCompare(b.name));
  if (!list.length) {
    box.replaceChildren(el("p", { class: "muted", text: "No worlds yet: `binky up NAME` in a repository with a binky.toml makes one." }));
    return;
  }
  const frag = document.createDocumentFragment();
  let project = null;
  let table = null;
  for (const w of list) {
    if (w.project !== project) {
      project = w.project;
      frag.append(el("div", { class: "project", text: project + "  ", }, el("span", { class: "muted", text: w.repo_root })));
      table = el("table", {}, el("tr", {},
        ...["world", "state", "why", "branch", "worktree", "age", "cpu", "memory", "services"].map((h) => el("th", { text: h }))));
      frag.append(table);
    }
    const v = w.view;
    const u = v.usage;
    const row = el("tr", { class: "world" + (w.id === selected ? " selected" : ""), "data-world": w.name, "data-state": v.state, "data-id": String(w.id) },
      el("td", {}, el("strong", { text: w.name })),
      el("td", {}, stateSpan(v.state)),
      el("td", { class: "why", text: why(w) }),
      el("td", { class: "mono", text: (v.worktree && v.worktree.branch) || w.branch }),
      el("td", { class: "mono muted", text: (v.worktree ? v.worktree.path + (v.worktree.dirty ? " (uncommitted changes)" : "") : "") }),
      el("td", { text: age(w.created_at) }),
      el("td", { text: u ? u.cpu_percent.toFixed(0) + "%" : "" }),
      el("td", { text: u ? bytes(u.memory_bytes) : "" }),
      el("td", {}, ...v.services.map((s) => el("span", { class: "s-" + s.state, title: s.state, text: s.name + " " }))));
    row.onclick = () => select(w.id);
    table.append(row);
  }
  box.replaceChildren(frag);
}

function renderDetail() {
  const w = worlds.get(selected);
  if (!w) { $("detail").hidden = true; return; }
  const v = w.view;
  $("detail").hidden = false;
  $("d-name").textContent = w.name;
  const st = $("d-state");
  st.textContent = v.state;
  st.className = "state s-" + v.state;
  const wt = v.worktree;
  $("d-info").textContent = [
    w.project,
    "branch " + ((wt && wt.branch) || w.branch),
    wt ? wt.path + (wt.dirty ? " (uncommitted changes)" : "") : "no worktree yet",
    "made " + age(w.created_at) + " ago",
    v.usage ? "cpu " + v.usage.cpu_percent.toFixed(0) + "% · mem " + bytes(v.usage.memory_bytes) : null,
    w.config_path,
  ].filter(Boolean).join(" · ");
  const t = $("d-services");
  const rows = [el("tr", {}, ...["service", "state", "health", "port", "url", "restarts", "last exit", "pid", "cpu", "memory", "message"].map((h) => el("th", { text: h })))];
  for (const s of v.services) {
    const ports = Object.entries(s.ports || {}).map(([l, p]) => (l ? l + ":" : ":") + p).join(" ");
    const url = s.url ? (s.url.startsWith("http") ? el("a", { href: s.url, target: "_blank", rel: "noopener", text: s.url }) : el("span", { class: "mono", text: s.url })) : "";
    rows.push(el("tr", { "data-service": s.name },
      el("td", {}, el("strong", { text: s.name + (s.shared ? " (shared)" : "") })),
      el("td", {}, stateSpan(s.state)),
      el("td", { text: s.ready ? "healthy" : (s.pid ? "not ready" : "") }),
      el("td", { class: "mono", text: ports }),
      el("td", {}, url),
      el("td", { text: String(s.restarts) }),
      el("td", { text: s.last_exit || "" }),
      el("td", { class: "mono", text: s.pid ? String(s.pid) : "" }),
      el("td", { text: s.usage ? s.usage.cpu_percent.toFixed(0) + "%" : "" }),
      el("td", { text: s.usage ? bytes(s.usage.memory_bytes) : "" }),
      el("td", { class: "why", text: (s.message || "").split("\n")[0] })));
  }
  t.replaceChildren(...rows);
  // What does not hold first; what holds behind a toggle.
  const cond = (c) => el("li", { class: c.status === "True" ? "" : (c.stalled ? "s-failed" : "s-starting"), text: (c.status === "True" ? "✓ " : "✗ ") + c.type + " (" + c.reason + "): " + c.message });
  const bad = v.conditions.filter((c) => c.status !== "True");
  const good = v.conditions.filter((c) => c.status === "True");
  const open = $("d-conditions").querySelector("details") && $("d-conditions").querySelector("details").open;
  const more = el("details", {}, el("summary", { class: "muted", text: good.length + " conditions hold" }), el("ul", {}, ...good.map(cond)));
  more.open = !!open;
  $("d-conditions").replaceChildren(...bad.map(cond), good.length ? el("li", { class: "plain" }, more) : null);
  // The log view's choices: the whole world, or one service.
  const sel = $("log-service");
  const names = ["", ...v.services.filter((s) => s.pid != null || s.restarts || s.last_exit || s.state !== "pending").map((s) => s.name), "hooks"];
  const have = [...sel.options].map((o) => o.value).join("|");
  if (have !== names.join("|")) {
    const cur = sel.value;
    sel.replaceChildren(...names.map((n) => el("option", { value: n, text: n || "all services" })));
    sel.value = names.includes(cur) ? cur : "";
  }
}

function render() {
  renderWorlds();
  renderDetail();
  renderAdmission();
  renderHeader();
}

function renderHeader() {
  const counts = {};
  for (const w of worlds.values()) if (!w.shared) counts[w.view.state] = (counts[w.view.state] || 0) + 1;
  const total = [...worlds.values()].filter((w) => !w.shared).length;
  $("summary").textContent = total + " worlds" + (total ? ": " + Object.entries(counts).map(([k, n]) => n + " " + k).join(", ") : "");
  if (globals) {
    const d = globals.daemon;
    $("daemon").textContent = "daemon pid " + d.pid + " · binky " + d.version + " · " + bytes(d.rss_bytes) + " · up " + age(d.started_at);
    $("daemon").className = "muted";
  }
}

function renderAdmission() {
  if (!globals) return;
  const box = $("admission");
  const parts = [];
  const held = [...worlds.values()].filter((w) => ["queued", "cooled", "approval"].includes(w.view.state));
  const s = globals.settings || {};
  parts.push(el("section", {}, el("h3", { text: "Admission queue" }),
    el("div", { class: "muted", text: "max_parallel " + (s.max_parallel || "default") + (s.ram_reserve_percent ? " · RAM reserve " + s.ram_reserve_percent + "%" : "") }),
    held.length ? el("table", {}, ...held.map((w) => el("tr", {}, el("td", { text: w.project + "/" + w.name }), el("td", {}, stateSpan(w.view.state)), el("td", { class: "why", text: why(w) }))))
      : el("p", { class: "muted", text: "No world waits." })));
  const pending = globals.approvals_on ? globals.approvals.filter((a) => !a.approved) : [];
  const ap = el("section", { id: "approvals" }, el("h3", { text: "Pending approvals" }));
  if (!globals.approvals_on) ap.append(el("p", { class: "muted", text: "Approvals are off: no command waits for a person (binky settings approvals=true turns them on)." }));
  else if (!pending.length) ap.append(el("p", { class: "muted", text: "None." }));
  for (const a of pending) {
    const box2 = el("div", { class: "panel", "data-key": a.key },
      el("div", {}, el("strong", { text: a.project + ": " + a.what }), el("span", { class: "muted", text: "  key " + a.key + " · worlds " + a.worlds.join(", ") })),
      el("pre", { text: a.command }));
    const b = el("button", { text: "Approve this exact command" });
    b.onclick = () => act("approve", { key: a.key }).then(() => {});
    box2.append(b);
    ap.append(box2);
  }
  parts.push(ap);
  parts.push(el("section", {}, el("h3", { text: "Golden templates" }),
    globals.goldens.length ? el("table", {}, el("tr", {}, ...["key", "adapter", "state", "name", "built", "used by"].map((h) => el("th", { text: h }))),
      ...globals.goldens.map((g) => el("tr", {}, el("td", { class: "mono", text: g.template.key }), el("td", { text: g.template.adapter }), el("td", {}, stateSpan(g.template.state)), el("td", { class: "mono", text: g.template.name }),
        el("td", { text: clock(g.template.created_at) + (g.template.build_ms != null ? " in " + (g.template.build_ms / 1000).toFixed(1) + "s" : "") }), el("td", { text: g.used_by.join(", ") || "no world" }))))
      : el("p", { class: "muted", text: "None (a service with clone_from makes one at its first binky up)." })));
  parts.push(el("section", {}, el("h3", { text: "Managed servers" }),
    globals.servers.length ? el("table", {}, el("tr", {}, ...["kind", "state", "port", "pid", "version", "data"].map((h) => el("th", { text: h }))),
      ...globals.servers.map((s2) => el("tr", {}, el("td", { text: s2.kind }), el("td", {}, stateSpan(s2.state)), el("td", { class: "mono", text: String(s2.port) }), el("td", { class: "mono", text: s2.pid ? String(s2.pid) : "" }), el("td", { text: s2.version }), el("td", { class: "mono muted", text: s2.data_dir }))))
      : el("p", { class: "muted", text: "None running." })));
  box.replaceChildren(...parts);
}

function message(text, error) {
  const m = $("d-message");
  m.hidden = !text;
  m.textContent = text || "";
  m.className = "message" + (error ? " error" : "");
}

async function act(action, body) {
  const r = await fetch("/api/" + action, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  let j = {};
  try { j = await r.json(); } catch (e) { j = { error: "HTTP " + r.status }; }
  if (!r.ok) { message(j.error || ("HTTP " + r.status), true); throw j; }
  if (j.message) message(j.message, false);
  return j;
}

function select(id) {
  if (selected === id) return;
  selected = id;
  message("");
  $("d-plan").hidden = true;
  $("d-remove").hidden = true;
  render();
  openLog();
  loadEvents();
  history.replaceState(null, "", "#" + encodeURIComponent(worlds.get(id).name));
}

async function loadEvents() {
  if (selected == null) return;
  const id = selected;
  const r = await fetch("/api/events?world=" + id + "&n=200");
  if (!r.ok || id !== selected) return;
  const j = await r.json();
  $("d-events").replaceChildren(...j.events.slice().reverse().map((e) =>
    el("li", {}, el("span", { class: "muted mono", text: clock(e.at) + "  " }), el("span", { class: "kind", text: e.kind }), e.message)));
}

// The log view: a stream per world (or service); follow keeps the end in view, pause holds
// new lines back (shown when resumed), the filter hides lines without its text.
function openLog() {
  if (logSource) logSource.close();
  logHeld = [];
  const pre = $("log");
  pre.replaceChildren();
  if (selected == null) return;
  const svc = $("log-service").value;
  const url = "/api/logs?world=" + selected + (svc ? "&service=" + encodeURIComponent(svc) : "") + "&n=300";
  logSource = new EventSource(url);
  $("log-state").textContent = "connecting…";
  const add = (e) => {
    const lines = JSON.parse(e.data);
    if (logPaused) { logHeld.push(...lines); $("log-state").textContent = "paused (" + logHeld.length + " new)"; return; }
    appendLines(lines);
  };
  logSource.addEventListener("history", add);
  logSource.addEventListener("lines", add);
  logSource.addEventListener("live", () => { $("log-state").textContent = "live"; });
  logSource.onerror = () => { $("log-state").textContent = "reconnecting…"; checkSession(); };
}

function lineMatches(text) {
  const f = $("log-filter").value;
  return !f || text.toLowerCase().includes(f.toLowerCase());
}

function appendLines(lines) {
  const pre = $("log");
  const all = $("log-service").value === "";
  const at = String(Date.now());
  const frag = document.createDocumentFragment();
  for (const x of lines) {
    const d = el("div", { class: "line", "data-at": at });
    if (all) d.append(el("span", { class: "svc", text: x.s.padStart(10) + " | " }));
    d.append(x.l);
    if (!lineMatches(x.l)) d.hidden = true;
    frag.append(d);
  }
  pre.append(frag);
  while (pre.childElementCount > LOG_MAX) pre.firstElementChild.remove();
  if ($("log-follow").checked) pre.scrollTop = pre.scrollHeight;
}

function applyFilter() {
  for (const d of $("log").children) d.hidden = !lineMatches(d.lastChild.textContent);
}

let stream = null;

function connect() {
  const es = new EventSource("/api/stream");
  stream = es;
  es.addEventListener("update", (e) => {
    const u = JSON.parse(e.data);
    if (u.full) worlds.clear();
    for (const [id, w] of Object.entries(u.worlds)) worlds.set(Number(id), w);
    for (const id of u.gone) worlds.delete(id);
    if (u.globals) globals = u.globals;
    $("conn").textContent = "live";
    if (selected == null && location.hash) {
      const name = decodeURIComponent(location.hash.slice(1));
      const w = [...worlds.values()].find((x) => x.name === name);
      if (w) { select(w.id); return; }
    }
    const ev = selected != null && u.worlds[selected];
    render();
    if (ev) loadEvents();
  });
  es.onerror = () => { $("conn").textContent = "reconnecting…"; checkSession(); };
}

// The session ended (signed out here or in another tab, expired, or the daemon restarted):
// the streams stop and the page says how to sign in again.
function signedOut(why) {
  if (stream) { stream.close(); stream = null; }
  if (logSource) { logSource.close(); logSource = null; }
  worlds.clear();
  globals = null;
  selected = null;
  $("detail").hidden = true;
  $("admission").replaceChildren();
  $("signin-why").textContent = why;
  $("signin").hidden = false;
  $("signout").hidden = true;
  $("conn").textContent = "not signed in";
  $("worlds").replaceChildren();
}

async function checkSession() {
  try {
    const r = await fetch("/api/session");
    if (r.status === 401 && !signingOut) signedOut("Not signed in, or the session ended.");
  } catch (e) { /* the daemon is away: the streams retry */ }
}

// The streams close first: the daemon ends them at sign-out, and their error handlers would
// otherwise race this notice with "the session ended".
let signingOut = false;
$("signout").onclick = async () => {
  signingOut = true;
  if (stream) { stream.close(); stream = null; }
  if (logSource) { logSource.close(); logSource = null; }
  await fetch("/api/signout", { method: "POST" }).catch(() => null);
  signedOut("Signed out.");
};

async function start() {
  const r = await fetch("/api/session");
  if (r.status === 401) {
    signedOut("Not signed in.");
    return;
  }
  $("signout").hidden = false;
  connect();
}

for (const b of document.querySelectorAll("#detail .actions button")) {
  b.onclick = async () => {
    const w = worlds.get(selected);
    if (!w) return;
    const a = b.dataset.action;
    $("d-plan").hidden = true;
    $("d-remove").hidden = true;
    if (a === "apply") {
      const j = await act("apply", { world: w.id, dry_run: true }).catch(() => null);
      if (j && j.plan) {
        message("");
        $("d-plan-file").textContent = w.config_path;
        $("d-plan-text").textContent = j.plan;
        $("d-plan").hidden = false;
      }
      return;
    }
    if (a === "remove") {
      $("d-remove-name").value = "";
      $("d-remove-force").checked = false;
      $("d-remove").hidden = false;
      $("d-remove-name").focus();
      return;
    }
    await act(a, { world: w.id }).catch(() => null);
  };
}
$("d-plan-apply").onclick = async () => {
  $("d-plan").hidden = true;
  const j = await act("apply", { world: selected, dry_run: false }).catch(() => null);
  if (j) message(j.state === "changed" ? "applied:\n" + j.plan : j.message, false);
};
$("d-plan-cancel").onclick = () => { $("d-plan").hidden = true; };
$("d-remove-go").onclick = async () => {
  const j = await act("remove", { world: selected, confirm: $("d-remove-name").value, force: $("d-remove-force").checked }).catch(() => null);
  if (j) $("d-remove").hidden = true;
};
$("d-remove-cancel").onclick = () => { $("d-remove").hidden = true; };
$("log-service").onchange = openLog;
$("log-pause").onclick = () => {
  logPaused = !logPaused;
  $("log-pause").textContent = logPaused ? "Resume" : "Pause";
  if (!logPaused) {
    appendLines(logHeld);
    logHeld = [];
    $("log-state").textContent = "live";
  }
};
$("log-filter").oninput = applyFilter;
setInterval(renderHeader, 5000);
start();
