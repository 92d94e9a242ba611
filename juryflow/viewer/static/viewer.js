// juryflow view: keyboard shortcuts and "mark the selection as missed" on the item page.
// No build step, no dependency; every page works without it (forms, links, CSS toggles).
(function () {
  "use strict";

  // -- keyboard: j / → next, k / ← previous, q the queue, m mark the selection missed --
  var KEYS = { j: "next-item", ArrowRight: "next-item", k: "prev-item", ArrowLeft: "prev-item",
               q: "queue-link" };
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(target.tagName))) return;
    if (event.key === "m" && document.getElementById("mark-missed")) {
      event.preventDefault();
      markMissed();
      return;
    }
    var link = KEYS[event.key] && document.getElementById(KEYS[event.key]);
    if (link && link.href) {
      event.preventDefault();
      window.location.href = link.href;
    }
  });

  // -- missed spans -----------------------------------------------------------------
  // Offsets are the server's: Python string indices (code points). Each .seg carries its
  // data-start; a DOM offset inside a segment's text counts UTF-16 units, so it is turned
  // into code points before being added.
  function codePoints(text) { return Array.from(text).length; }

  function segments() {
    var text = document.querySelector("#item-text .overlay-text");
    return text ? Array.prototype.slice.call(text.querySelectorAll(".seg")) : [];
  }

  function localOffset(seg, node, offset) {
    if (node.nodeType === Node.TEXT_NODE) return codePoints(node.data.slice(0, offset));
    // an element boundary: count the text of the children before it
    var before = "";
    for (var i = 0; i < offset && i < node.childNodes.length; i++) before += node.childNodes[i].textContent;
    return codePoints(before);
  }

  function selectedSpan() {
    var selection = window.getSelection();
    if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return null;
    var range = selection.getRangeAt(0);
    var start = null, end = null;
    segments().forEach(function (seg) {
      if (!range.intersectsNode(seg)) return;
      var base = parseInt(seg.dataset.start, 10);
      var length = codePoints(seg.textContent);
      var from = seg.contains(range.startContainer) ? localOffset(seg, range.startContainer, range.startOffset) : 0;
      var to = seg.contains(range.endContainer) ? localOffset(seg, range.endContainer, range.endOffset) : length;
      if (to <= from) return;
      if (start === null || base + from < start) start = base + from;
      if (end === null || base + to > end) end = base + to;
    });
    return start === null || end <= start ? null : [start, end];
  }

  function fullText() {
    return Array.from(segments().map(function (s) { return s.textContent; }).join(""));
  }

  function say(text) {
    var out = document.getElementById("missed-message");
    if (out) out.textContent = text;
  }

  function markMissed() {
    var span = selectedSpan();
    if (!span) { say("select some of the judged text first"); return; }
    var value = span[0] + "-" + span[1];
    var list = document.getElementById("missed-list");
    if (list.querySelector('li[data-span="' + value + '"]')) { say("already marked"); return; }
    var item = document.createElement("li");
    item.dataset.span = value;
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = "missed";
    input.value = value;
    var remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove-missed";
    remove.textContent = "remove";
    item.appendChild(input);
    item.appendChild(document.createTextNode(
      "\u201c" + fullText().slice(span[0], span[1]).join("") + "\u201d (" + span[0] + "\u2013" + span[1] + ") "));
    item.appendChild(remove);
    list.appendChild(item);
    window.getSelection().removeAllRanges();
    say("marked " + value);
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!(target instanceof Element)) return;
    if (target.id === "mark-missed") { markMissed(); return; }
    if (target.classList.contains("remove-missed")) {
      var item = target.closest("li");
      if (item) item.remove();
    }
  });
  // The button takes focus on mousedown, which may clear the selection in some browsers:
  // keep it.
  document.addEventListener("mousedown", function (event) {
    if (event.target instanceof Element && event.target.id === "mark-missed") event.preventDefault();
  });
})();
