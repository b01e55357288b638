/**
 * The dashboard's stylesheet: a light theme on the system font, cards and responsive tables, state badges
 * and the stacked progress bar. Served as `/ui/style.css`; nothing is loaded from elsewhere.
 */
export const styleCss = `:root {
  --bg: #f5f6f8;
  --surface: #fff;
  --border: #e2e5ea;
  --line: #eef0f3;
  --text: #1b2330;
  --muted: #5d6876;
  --accent: #3b5bdb;
  --accent-weak: #edf2ff;
  --ok: #237a35;
  --ok-bg: #e6f6ea;
  --active: #1864ab;
  --active-bg: #e7f1fd;
  --warn: #a14f00;
  --warn-bg: #fff3e3;
  --bad: #c22525;
  --bad-bg: #fff0f0;
  --idle: #56606d;
  --idle-bg: #eff1f4;
  --radius: 10px;
  --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace;
  color-scheme: light;
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--text);
  background: var(--bg);
}
* { box-sizing: border-box; }
body { margin: 0; min-height: 100vh; }
[hidden] { display: none !important; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; border-radius: 4px; }
h1:focus { outline: none; }
code, .mono, pre { font-family: var(--mono); font-size: 12.5px; }
code { background: var(--idle-bg); padding: 1px 5px; border-radius: 4px; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
.strong { font-weight: 600; }
.sub { color: var(--muted); font-size: 12.5px; margin-top: 2px; overflow-wrap: anywhere; }
.nowrap { white-space: nowrap; }

/* Top bar */
.topbar {
  position: sticky; top: 0; z-index: 10;
  display: flex; align-items: center; gap: 28px; flex-wrap: wrap;
  min-height: 56px; padding: 8px 24px;
  background: var(--surface); border-bottom: 1px solid var(--border);
}
.brand { display: inline-flex; align-items: center; gap: 9px; font-weight: 650; font-size: 16px; color: var(--text); letter-spacing: -0.01em; }
.brand:hover { text-decoration: none; }
.brand.big { font-size: 20px; gap: 11px; margin-bottom: 18px; }
.sections { display: flex; gap: 4px; flex-wrap: wrap; }
.sections a { padding: 6px 12px; border-radius: 7px; color: var(--muted); font-weight: 500; }
.sections a:hover { background: var(--idle-bg); color: var(--text); text-decoration: none; }
.sections a[aria-current="page"] { background: var(--accent-weak); color: var(--accent); }
.session { margin-left: auto; display: flex; align-items: center; gap: 14px; flex-wrap: wrap; font-size: 13px; }
.who { display: inline-flex; align-items: center; gap: 6px; padding-left: 14px; border-left: 1px solid var(--border); }
.toggle { display: inline-flex; align-items: center; gap: 6px; color: var(--muted); cursor: pointer; }
.toggle input { margin: 0; accent-color: var(--accent); }
.live { display: inline-flex; align-items: center; gap: 7px; color: var(--muted); font-variant-numeric: tabular-nums; }
.live .dot { width: 8px; height: 8px; border-radius: 50%; background: #adb5bd; }
.live.on .dot { background: #2f9e44; box-shadow: 0 0 0 3px #d3f9d8; }
.live.busy .dot { background: #4dabf7; box-shadow: 0 0 0 3px #d0ebff; }
.live.error .dot { background: var(--bad); box-shadow: 0 0 0 3px #ffe3e3; }
.live.error { color: var(--bad); }

/* Page */
main { max-width: 1320px; margin: 0 auto; padding: 24px 24px 48px; }
.view-head { margin: 4px 0 20px; }
.crumbs ol { list-style: none; display: flex; gap: 6px; margin: 0 0 4px; padding: 0; font-size: 13px; }
.crumbs li + li::before { content: "/"; color: #adb5bd; margin-right: 6px; }
.view-title { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
.view-title h1 { font-size: 22px; line-height: 1.3; margin: 0; font-weight: 650; letter-spacing: -0.01em; overflow-wrap: anywhere; }
.view-title .actions { margin-left: auto; display: flex; align-items: center; gap: 10px; flex-wrap: wrap; }
.view-sub { margin: 4px 0 0; color: var(--muted); }
.loading { color: var(--muted); padding: 24px 0; }

/* Cards */
.card { background: var(--surface); border: 1px solid var(--border); border-radius: var(--radius); margin-bottom: 18px; box-shadow: 0 1px 2px rgb(16 24 40 / 0.04); overflow: hidden; }
.card-head { display: flex; align-items: center; gap: 10px 14px; flex-wrap: wrap; padding: 12px 16px; border-bottom: 1px solid var(--border); }
.card-head h2 { font-size: 15px; margin: 0; font-weight: 620; display: inline-flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.card-head .spacer { flex: 1; }
.card-head .card-note { color: var(--muted); font-size: 13px; }
.card > :where(:not(.card-head, .table-wrap)) { margin: 14px 16px; }
.traffic-chart { color: var(--accent, #2563eb); }
.traffic-chart svg { display: block; width: 100%; height: 60px; }
.card > h3 { font-size: 12px; text-transform: uppercase; letter-spacing: 0.05em; color: var(--muted); margin: 0; padding: 14px 16px 0; border-top: 1px solid var(--line); font-weight: 600; }
.card > h3 + .table-wrap { margin-top: 10px; border-top: 1px solid var(--line); }
.card-head .id { font-family: var(--mono); font-size: 12.5px; font-weight: 400; color: var(--muted); }
.overview-progress { display: flex; flex-direction: column; gap: 12px; padding-bottom: 16px; border-bottom: 1px solid var(--line); }
.empty { color: var(--muted); }
.note { color: var(--muted); font-size: 13px; }

/* Definition lists */
.kv { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr)); gap: 14px 28px; }
.kv > div { min-width: 0; }
.kv > div.wide { grid-column: 1 / -1; }
.kv dt { font-size: 12px; color: var(--muted); margin-bottom: 2px; }
.kv dd { margin: 0; overflow-wrap: anywhere; }
.kv .kv { grid-template-columns: repeat(auto-fill, minmax(160px, 1fr)); gap: 8px 20px; margin-top: 4px; padding-left: 12px; border-left: 2px solid var(--line); }

/* Tables */
.table-wrap { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; }
th { text-align: left; font-size: 11.5px; font-weight: 600; color: var(--muted); text-transform: uppercase; letter-spacing: 0.05em; padding: 9px 16px; background: #fafbfc; border-bottom: 1px solid var(--border); white-space: nowrap; }
td { padding: 10px 16px; border-bottom: 1px solid var(--line); vertical-align: middle; }
tbody > tr:last-child > td { border-bottom: 0; }
tbody > tr:hover > td { background: #fafbfd; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
th.idx, td.idx { width: 1%; white-space: nowrap; }
td.msg { max-width: 420px; overflow-wrap: anywhere; color: var(--muted); }
td.row-actions { text-align: right; white-space: nowrap; }
td.row-actions .btn + .btn { margin-left: 6px; }
tr.open > td { background: #f8f9ff; }
tr.attempts-row > td { background: #f8f9ff; padding: 2px 16px 14px 48px; }
tr.attempts-row:hover > td { background: #f8f9ff; }
table.compact { border: 1px solid var(--border); border-radius: 8px; background: var(--surface); border-collapse: separate; border-spacing: 0; overflow: hidden; }
table.compact th, table.compact td { padding: 6px 12px; font-size: 13px; }
table.compact tbody > tr:hover > td { background: transparent; }

/* Badges and chips */
.badge { display: inline-flex; align-items: center; gap: 6px; padding: 0 9px; border-radius: 999px; font-size: 11.5px; font-weight: 600; line-height: 21px; letter-spacing: 0.02em; white-space: nowrap; background: var(--idle-bg); color: var(--idle); vertical-align: middle; }
.badge::before { content: ""; width: 6px; height: 6px; border-radius: 50%; background: currentColor; flex: none; }
.badge.plain::before { display: none; }
.badge.ok { background: var(--ok-bg); color: var(--ok); }
.badge.active { background: var(--active-bg); color: var(--active); }
.badge.warn { background: var(--warn-bg); color: var(--warn); }
.badge.bad { background: var(--bad-bg); color: var(--bad); }
.counts { display: flex; flex-wrap: wrap; gap: 8px; }
.count { display: inline-flex; align-items: center; gap: 6px; font-variant-numeric: tabular-nums; }
.chip { display: inline-flex; align-items: center; gap: 6px; padding: 2px 4px 2px 10px; border: 1px solid var(--border); border-radius: 999px; background: var(--surface); font-size: 13px; }
.chip a { padding: 0 6px; border-radius: 999px; color: var(--muted); }
.attrs { display: flex; flex-wrap: wrap; gap: 4px; }
.ratio { font-variant-numeric: tabular-nums; font-weight: 600; }
.ratio.ok { color: var(--ok); }
.ratio.warn { color: var(--warn); }
.url { white-space: nowrap; }

/* Progress */
.progress { display: flex; align-items: center; gap: 10px; min-width: 150px; }
.progress .bar { flex: 1; height: 8px; border-radius: 4px; overflow: hidden; display: block; min-width: 80px; }
.progress.large .bar { height: 12px; border-radius: 6px; }
.progress-label { font-size: 12.5px; color: var(--muted); font-variant-numeric: tabular-nums; white-space: nowrap; }
.bar .track { fill: #eceff3; }
.bar .succeeded { fill: #40c057; }
.bar .failed { fill: #fa5252; }
.bar .killed { fill: #868e96; }
.bar .running { fill: #4dabf7; }
.bar .pending { fill: #ced4da; }

/* Logs */
pre.logs { background: #111827; color: #e5e7eb; padding: 12px 16px; border-radius: 8px; max-height: 440px; overflow: auto; line-height: 1.55; white-space: pre-wrap; overflow-wrap: anywhere; }
pre.logs .muted { color: #9ca3af; }

/* Controls */
.btn { font: inherit; font-size: 13px; font-weight: 550; line-height: 20px; padding: 5px 12px; border-radius: 7px; border: 1px solid #cdd3db; background: var(--surface); color: var(--text); cursor: pointer; white-space: nowrap; }
.btn:hover { background: #f3f5f7; }
.btn:disabled { opacity: 0.55; cursor: default; }
.btn.small { font-size: 12.5px; padding: 2px 10px; }
.btn.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
.btn.primary:hover { background: #3451c6; }
.btn.danger { background: var(--bad); border-color: var(--bad); color: #fff; }
.btn.danger:hover { background: #a91f1f; }
.btn.danger-outline { color: var(--bad); border-color: #f1b0b0; }
.btn.danger-outline:hover { background: var(--bad-bg); }
.btn.wide { width: 100%; padding: 8px 12px; font-size: 14px; }
[aria-pressed="true"].btn { background: var(--accent-weak); border-color: #bac8ff; color: var(--accent); }
input, select { font: inherit; font-size: 13.5px; padding: 6px 10px; border: 1px solid #cdd3db; border-radius: 7px; background: var(--surface); color: var(--text); }
select { padding-right: 6px; }
label.inline { color: var(--muted); font-size: 13px; margin-right: -4px; }
.confirm { display: inline-flex; align-items: center; gap: 8px; font-weight: 500; }

/* Alerts */
.alert { padding: 10px 14px; border-radius: 8px; border: 1px solid var(--border); background: var(--idle-bg); overflow-wrap: anywhere; }
.alert code { background: rgb(255 255 255 / 0.6); }
.alert ul { margin: 6px 0 0; padding-left: 20px; }
.alert.error { background: var(--bad-bg); border-color: #f6c2c2; color: #8c1d1d; }
.alert.warn { background: var(--warn-bg); border-color: #f8d3a5; color: #7a3c00; }
.alert.info { background: var(--active-bg); border-color: #c5dcf5; color: #134a80; }
.alert.ok { background: var(--ok-bg); border-color: #bfe5c8; color: #1d5e2a; }
.alert-slot { margin-bottom: 16px; }

/* Sign-in */
.signin { display: flex; justify-content: center; padding: 8vh 0 24px; }
.signin-card { width: 100%; max-width: 420px; background: var(--surface); border: 1px solid var(--border); border-radius: 14px; padding: 32px; box-shadow: 0 8px 28px rgb(16 24 40 / 0.08); }
.signin-card h1 { font-size: 20px; margin: 0 0 4px; }
.signin-card p.muted { margin: 0 0 22px; }
.signin-card label { display: block; font-weight: 600; font-size: 13px; margin-bottom: 6px; }
.signin-card input { width: 100%; padding: 9px 12px; font-family: var(--mono); }
.signin-card .help { font-size: 12.5px; color: var(--muted); margin: 8px 0 16px; }
.signin-card .alert { margin-bottom: 16px; }

@media (max-width: 860px) {
  .topbar { gap: 10px 16px; padding: 8px 14px; }
  .session { margin-left: 0; width: 100%; gap: 10px; }
  .who { margin-left: auto; }
  main { padding: 16px 12px 40px; }
  td, th { padding-left: 12px; padding-right: 12px; }
  .view-title .actions { margin-left: 0; width: 100%; }
  .table-wrap > table { min-width: 720px; }
  .table-wrap td { white-space: nowrap; }
  .table-wrap td.msg { white-space: normal; min-width: 220px; }
}
@media (prefers-reduced-motion: no-preference) {
  .btn, .sections a { transition: background-color 120ms ease; }
}
`
