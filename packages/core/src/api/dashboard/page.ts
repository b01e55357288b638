/**
 * The dashboard's HTML shell and icon. The page holds no inline script or style (the Content-Security-Policy
 * forbids both): it loads `/ui/style.css` and the ES module `/ui/app.js`, which fill in the views.
 */

/** The sign-in form's key input has no `name`, so even without JavaScript the key is never submitted. */
export const pageHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<meta name="referrer" content="no-referrer">
<title>swarmplane</title>
<link rel="icon" href="/ui/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/ui/style.css">
<script type="module" src="/ui/app.js"></script>
</head>
<body>
<header class="topbar" id="topbar" hidden>
  <a class="brand" href="#/swarms"><img src="/ui/icon.svg" alt="" width="24" height="24"><span>swarmplane</span></a>
  <nav class="sections" aria-label="Sections">
    <a href="#/swarms" data-nav="swarms">Swarms</a>
    <a href="#/jobs" data-nav="jobs">Jobs</a>
    <a href="#/workers" data-nav="workers">Workers</a>
    <a href="#/clusters" data-nav="clusters">Clusters</a>
    <a href="#/backends" data-nav="backends">Backends</a>
  </nav>
  <div class="session">
    <span class="live" id="live"><span class="dot" aria-hidden="true"></span><span id="live-text">Loading…</span></span>
    <label class="toggle"><input type="checkbox" id="auto" checked> Auto-refresh</label>
    <button type="button" class="btn small" id="refresh-now">Refresh</button>
    <span class="who" id="who"></span>
    <button type="button" class="btn small" id="signout">Sign out</button>
  </div>
</header>
<main id="main">
  <section class="signin" id="signin" aria-labelledby="signin-title" hidden>
    <form class="signin-card" id="signin-form" method="post" action="/" autocomplete="off" novalidate>
      <div class="brand big"><img src="/ui/icon.svg" alt="" width="36" height="36"><span>swarmplane</span></div>
      <h1 id="signin-title">Sign in</h1>
      <p class="muted">Serving swarms and sharded batch jobs on your clusters and workers.</p>
      <label for="key">API key</label>
      <input id="key" type="password" autocomplete="off" spellcheck="false" autocapitalize="off" placeholder="sp_…" aria-describedby="key-help signin-message">
      <p class="help" id="key-help">The key stays in this browser tab (session storage) and is sent only to this control plane, in the Authorization header.</p>
      <div class="alert" id="signin-message" role="alert" hidden></div>
      <button type="submit" class="btn primary wide" id="signin-submit">Sign in</button>
    </form>
  </section>
  <div class="view" id="view" hidden><div id="region"></div></div>
  <noscript><p class="alert error">The dashboard needs JavaScript. The API reference at <a href="/docs">/docs</a> works without it.</p></noscript>
</main>
</body>
</html>
`

export const iconSvg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="8" fill="#3b5bdb"/><path d="M10 11h12M10 11l6 10.5M22 11l-6 10.5" stroke="#dbe4ff" stroke-width="1.8" fill="none"/><g fill="#fff"><circle cx="10" cy="11" r="3.2"/><circle cx="22" cy="11" r="3.2"/><circle cx="16" cy="21.5" r="3.2"/></g></svg>
`
