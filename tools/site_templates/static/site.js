/* Teaching-site behaviour: offline search on the index and a "math is typeset" flag.
   No module loader and no fetch(): both are refused for file:// pages. */
(function () {
  "use strict";

  // Tests (and curious teachers) can wait for data-mathjax="done" on <html>.
  function flagMath() {
    var root = document.documentElement;
    if (window.MathJax && window.MathJax.Hub) {
      window.MathJax.Hub.Queue(function () { root.setAttribute("data-mathjax", "done"); });
    } else {
      root.setAttribute("data-mathjax", "none");
    }
  }

  // A formula MathJax cannot parse is an error in the lesson: say so on the console, where
  // authors (and the browser tests) look.
  if (window.MathJax && window.MathJax.Hub) {
    window.MathJax.Hub.Register.MessageHook("TeX Jax - parse error", function (message) {
      console.error("MathJax could not typeset $" + message[2] + "$: " + message[1]);
    });
  }

  // The page's own words (strings.json, written onto <body> by the templates), English
  // when a page lacks them.
  function word(name, fallback) {
    return (document.body && document.body.dataset[name]) || fallback;
  }

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function snippet(text, term) {
    var at = text.toLowerCase().indexOf(term);
    if (at < 0) { return text.slice(0, 160); }
    var start = Math.max(0, at - 60);
    return (start > 0 ? "… " : "") + text.slice(start, at + term.length + 100) + " …";
  }

  // Terms are matched as substrings, which is what Chinese needs: it has no spaces between
  // words, so 张量 must find 张量的形状. Chinese punctuation separates terms like spaces.
  function termsOf(query) {
    return query.toLowerCase().split(/[\s\u3000-\u303f\uff01\uff0c\uff1a\uff1b\uff1f]+/)
      .filter(Boolean);
  }

  function search(query) {
    var index = window.BLITZ_SEARCH_INDEX || [];
    var terms = termsOf(query);
    if (!terms.length) { return []; }
    return index.map(function (entry) {
      var section = entry.section.toLowerCase();
      var body = entry.text.toLowerCase();
      var score = 0;
      for (var i = 0; i < terms.length; i++) {
        var inTitle = section.indexOf(terms[i]) >= 0;
        var inBody = body.indexOf(terms[i]) >= 0;
        if (!inTitle && !inBody) { return null; }  // every term must match
        score += (inTitle ? 10 : 0) + (inBody ? 1 : 0);
      }
      return { entry: entry, score: score };
    }).filter(Boolean).sort(function (a, b) { return b.score - a.score; });
  }

  function setUpSearch() {
    var input = document.getElementById("blitz-search-input");
    var list = document.getElementById("blitz-search-results");
    var status = document.getElementById("blitz-search-status");
    if (!input || !list) { return; }
    function show() {
      var query = input.value.trim();
      var hits = search(query);
      list.innerHTML = hits.slice(0, 20).map(function (hit) {
        var e = hit.entry;
        var href = e.page + (e.anchor ? "#" + e.anchor : "");
        return '<li><a href="' + escapeHtml(href) + '">' + escapeHtml(e.section) + "</a>" +
          ' <span class="blitz-search-lesson">' + escapeHtml(e.lesson) + "</span>" +
          "<p>" + escapeHtml(snippet(e.text, termsOf(query)[0])) + "</p></li>";
      }).join("");
      var count = hits.length === 1 ? word("oneMatch", "{n} match") : word("matches", "{n} matches");
      status.textContent = query ? count.replace("{n}", hits.length) : "";
    }
    var params = new URLSearchParams(window.location.search);
    if (params.get("q")) { input.value = params.get("q"); }
    input.addEventListener("input", show);
    input.form.addEventListener("submit", function (event) { event.preventDefault(); show(); });
    show();
  }

  // On a phone the table of contents would fill the first screen: start it folded.
  function foldToc() {
    var toc = document.querySelector(".blitz-toc");
    var narrow = window.matchMedia("(max-width: 900px)");
    if (!toc) { return; }
    function apply() { toc.open = !narrow.matches; }
    apply();
    narrow.addEventListener("change", apply);  // a rotated phone or a resized window
  }

  // Solutions (markdown cells tagged "solution", collapsed in JupyterLab too) start hidden:
  // everything after such a heading, up to the next heading, folds behind a button.
  function foldSolutions() {
    document.querySelectorAll(".jp-Cell .celltag_solution").forEach(function (marker) {
      var head = marker.closest(".jp-Cell");
      var hidden = [];
      var el = head.nextElementSibling;
      while (el && el.classList.contains("jp-Cell") &&
             !el.querySelector(".jp-MarkdownOutput h1, .jp-MarkdownOutput h2, .jp-MarkdownOutput h3")) {
        hidden.push(el);
        el = el.nextElementSibling;
      }
      if (!hidden.length) { return; }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "blitz-solution-toggle";
      function set(show) {
        hidden.forEach(function (cell) { cell.hidden = !show; });
        button.textContent = show ? word("hideSolution", "Hide the solution")
                                  : word("showSolution", "Show the solution");
        button.setAttribute("aria-expanded", String(show));
      }
      button.addEventListener("click", function () { set(hidden[0].hidden); });
      set(false);
      marker.appendChild(button);
    });
  }

  // Deep dives (cells tagged "optional") and exercises ("exercise", "solution") get a class on
  // their cell, and the header's switch hides them all: the core path alone, for a class.
  // The choice is remembered (localStorage, per site) and ?core=1 in a link turns it on.
  function setUpCoreSwitch() {
    var parts = { optional: "blitz-optional", exercise: "blitz-exercise", solution: "blitz-exercise" };
    Object.keys(parts).forEach(function (tag) {
      document.querySelectorAll(".celltag_" + tag).forEach(function (marker) {
        var cell = marker.closest(".jp-Cell") || marker;
        cell.classList.add(parts[tag]);
        cell.querySelectorAll("[id]").forEach(function (anchor) {
          var link = document.querySelector('.blitz-toc a[href="#' + anchor.id + '"]');
          if (link) { link.parentElement.classList.add(parts[tag]); }
        });
      });
    });
    var box = document.getElementById("blitz-core-only");
    if (!box) { return; }
    var stored = null;
    try { stored = window.localStorage.getItem("blitz-core-only"); } catch (e) { stored = null; }
    var wanted = /[?&]core=1\b/.test(window.location.search) || stored === "1";
    function apply(on) {
      box.checked = on;
      document.body.classList.toggle("blitz-core-only", on);
      try { window.localStorage.setItem("blitz-core-only", on ? "1" : "0"); } catch (e) { /* file:// without storage */ }
    }
    box.addEventListener("change", function () { apply(box.checked); });
    apply(wanted);
  }

  document.addEventListener("DOMContentLoaded", function () {
    setUpCoreSwitch();
    foldSolutions();
    foldToc();
    flagMath();
    setUpSearch();
  });
}());
