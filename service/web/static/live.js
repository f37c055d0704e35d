// The job page while its job is queued or running: every two seconds, read the job's state,
// steps, progress and log tail as JSON and show them; when the job ends, load the page again
// (it then has the report). Only textContent is set: nothing from the server becomes markup.
(function () {
  "use strict";
  var root = document.getElementById("job");
  if (!root || root.dataset.active !== "yes") { return; }
  var url = root.dataset.live;
  var status = root.dataset.status;

  function text(id, value) {
    var el = document.getElementById(id);
    if (el && value !== undefined && value !== null) { el.textContent = value; }
  }

  function steps(list) {
    var ol = document.getElementById("timeline");
    if (!ol) { return; }
    while (ol.firstChild) { ol.removeChild(ol.firstChild); }
    list.forEach(function (step) {
      var li = document.createElement("li");
      li.className = step.state;
      li.dataset.step = step.name;
      var label = step.name;
      if (step.duration) { label += " · " + step.duration; }
      else if (step.state === "running") { label += " · running"; }
      li.textContent = label;
      ol.appendChild(li);
    });
  }

  function tick() {
    fetch(url, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) { return; }
        if (data.status !== status && !data.active) { window.location.reload(); return; }
        var state = document.getElementById("state");
        if (state) { state.textContent = data.status; state.className = "state " + data.status; }
        status = data.status;
        root.dataset.status = status;
        text("summary", data.summary);
        text("runner", data.runner || "—");
        text("elapsed", data.elapsed || "—");
        text("progress", data.progress || "");
        text("logsize", "(" + data.log_size + " bytes" + (data.log_cut ? ", the last part)" : ")"));
        var log = document.getElementById("log");
        if (log && log.textContent !== data.log) {
          var atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
          log.textContent = data.log;
          if (atEnd) { log.scrollTop = log.scrollHeight; }
        }
        steps(data.timeline);
      })
      .catch(function () { /* the next tick tries again */ })
      .finally(function () { window.setTimeout(tick, 2000); });
  }
  window.setTimeout(tick, 2000);
})();
