// The live tail of the event log: it long-polls the console for the events after the
// page's last cursor and appends them. Every value is set as text, never as HTML.
(function () {
  "use strict";
  var body = document.getElementById("events-body");
  var status = document.getElementById("tail-status");
  if (!body || !status) {
    return;
  }
  var cursor = body.getAttribute("data-cursor");
  var kind = body.getAttribute("data-kind");

  function cell(row, text, className) {
    var td = document.createElement("td");
    if (className) {
      td.className = className;
    }
    td.textContent = text;
    row.appendChild(td);
  }

  function iso(ms) {
    return new Date(ms).toISOString().replace("T", " ");
  }

  function append(e) {
    var row = document.createElement("tr");
    row.className = "tailed";
    cell(row, String(e.sequence), "mono");
    cell(row, iso(e.createdAtMs), "mono");
    cell(row, e.kind);
    cell(row, e.actor);
    var td = document.createElement("td");
    var pre = document.createElement("pre");
    pre.textContent = JSON.stringify(e.payload, null, 2);
    td.appendChild(pre);
    row.appendChild(td);
    body.appendChild(row);
  }

  function poll() {
    var url = "/console/events/tail?cursor=" + encodeURIComponent(cursor);
    if (kind) {
      url += "&kind=" + encodeURIComponent(kind);
    }
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("status " + r.status);
        }
        return r.json();
      })
      .then(function (page) {
        page.events.forEach(append);
        cursor = page.nextCursor;
        status.textContent = "live: following new events";
        window.setTimeout(poll, 0);
      })
      .catch(function () {
        status.textContent = "live tail paused; retrying";
        window.setTimeout(poll, 5000);
      });
  }

  status.textContent = "live: following new events";
  poll();
})();
