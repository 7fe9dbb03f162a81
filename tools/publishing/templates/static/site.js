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
        // A hit in a deep dive or an exercise says so: "Core path only" hides those parts,
        // and the lesson page turns the switch off to show one (setUpCoreSwitch).
        var part = e.part === "deep_dive" ? word("searchDeepDive", "deep dive")
          : e.part === "exercise" ? word("searchExercise", "exercises") : "";
        var badge = part ? ' <span class="blitz-search-part" title="' +
          escapeHtml(word("searchHiddenNote", "")) + '">' + escapeHtml(part) + "</span>" : "";
        return '<li><a href="' + escapeHtml(href) + '">' + escapeHtml(e.section) + "</a>" +
          badge + ' <span class="blitz-search-lesson">' + escapeHtml(e.lesson) + "</span>" +
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

  // The sticky header's height, for the CSS that keeps a linked heading below it (it wraps to
  // several rows on a phone, and grows when the core switch's notice shows).
  function measureHeader() {
    var header = document.querySelector(".blitz-header");
    if (header) {
      document.documentElement.style.setProperty("--blitz-header-height", header.offsetHeight + "px");
    }
  }

  function trackHeader() {
    var header = document.querySelector(".blitz-header");
    measureHeader();
    if (header && window.ResizeObserver) { new window.ResizeObserver(measureHeader).observe(header); }
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

  // Solutions (cells tagged "solution", collapsed in JupyterLab too) start hidden: under each
  // solution heading, the rest of its cell (the explanation, which gives the answer away)
  // and the cells after it, up to the next heading, fold behind one button.
  function foldSolutions() {
    var headingSelector = ".jp-MarkdownOutput h1, .jp-MarkdownOutput h2, .jp-MarkdownOutput h3";
    document.querySelectorAll(".jp-MarkdownOutput.celltag_solution").forEach(function (marker) {
      var heading = marker.querySelector("h1, h2, h3");
      var head = marker.closest(".jp-Cell");
      if (!heading || !head) { return; }
      var hidden = [];
      var el = head.nextElementSibling;
      while (el && el.classList.contains("jp-Cell") && !el.querySelector(headingSelector)) {
        hidden.push(el);
        el = el.nextElementSibling;
      }
      if (!hidden.length) { return; }  // "## Solutions" and its note: nothing to give away
      // The explanation under the heading moves into a box of its own, so that it hides
      // with the code; the heading stays as the solution's title.
      var body = document.createElement("div");
      body.className = "blitz-solution-body";
      while (heading.nextSibling) { body.appendChild(heading.nextSibling); }
      if (body.textContent.trim()) {
        marker.appendChild(body);
        hidden.unshift(body);
      }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "blitz-solution-toggle";
      function set(show) {
        hidden.forEach(function (part) { part.hidden = !show; });
        button.textContent = show ? word("hideSolution", "Hide the solution")
                                  : word("showSolution", "Show the solution");
        button.setAttribute("aria-expanded", String(show));
        // MathJax measured the explanation's formulas while they were hidden: typeset again
        // once they can be seen, so they get their real size.
        if (show && window.MathJax && window.MathJax.Hub && body.parentNode) {
          window.MathJax.Hub.Queue(["Rerender", window.MathJax.Hub, body]);
        }
      }
      button.addEventListener("click", function () { set(hidden[0].hidden); });
      set(false);
      heading.insertAdjacentElement("afterend", button);
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
    var notice = document.getElementById("blitz-core-notice");
    function apply(on) {
      box.checked = on;
      document.body.classList.toggle("blitz-core-only", on);
      if (notice) { notice.textContent = ""; }
      try { window.localStorage.setItem("blitz-core-only", on ? "1" : "0"); } catch (e) { /* file:// without storage */ }
    }
    // A link into a part the switch hides (a search hit, a contents entry, a link in the
    // text) would land on nothing: the switch goes off, the page says why, and the part shows.
    function reveal() {
      // nbconvert writes a non-ASCII heading's id percent-encoded (the Chinese pages): look
      // the fragment up as it is, then decoded, as the browser itself does.
      var raw = window.location.hash.slice(1);
      var decoded = raw;
      try { decoded = decodeURIComponent(raw); } catch (e) { /* a stray % */ }
      var target = raw && (document.getElementById(raw) || document.getElementById(decoded));
      if (!target || !box.checked || !target.closest(".blitz-optional, .blitz-exercise")) { return; }
      apply(false);
      if (notice) { notice.textContent = word("coreOnlyOff", "“Core path only” is now off."); }
      measureHeader();  // the notice made the header taller: measure before scrolling
      target.scrollIntoView();
    }
    box.addEventListener("change", function () { apply(box.checked); });
    window.addEventListener("hashchange", reveal);
    apply(wanted);
    reveal();
  }

  document.addEventListener("DOMContentLoaded", function () {
    trackHeader();
    setUpCoreSwitch();
    foldSolutions();
    foldToc();
    flagMath();
    setUpSearch();
  });
}());
