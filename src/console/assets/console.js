// claimd console: the only script. It refreshes the overview's live part every few seconds
// by fetching the same page and taking its #live element; without it, reload the page.
// It never builds markup from data: the server's page is already escaped.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live) return;
  const every = Number(live.dataset.refresh || "5") * 1000;
  async function refresh() {
    if (document.hidden) return;
    try {
      const answer = await fetch(window.location.href, { credentials: "same-origin",
        headers: { "Accept": "text/html" } });
      if (!answer.ok || answer.redirected) return;
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const fresh = page.getElementById("live");
      if (fresh) live.replaceChildren(...fresh.childNodes);
      live.dataset.refreshed = new Date().toISOString();
    } catch (_) { /* the next tick tries again */ }
  }
  setInterval(refresh, every);
})();
