// The dashboard's one script, no build step: the API token, the submit form, cancel, the
// live part of a bisect's page, and its report. Everything else is plain server-rendered HTML.
(function () {
  'use strict';

  var TOKEN_KEY = 'perfbisect.apiToken';

  function getToken() {
    try { return localStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }

  function authHeaders(extra) {
    var h = extra || {};
    var t = getToken();
    if (t) { h.Authorization = 'Bearer ' + t; }
    return h;
  }

  // The API answers refusals as {error: {field, message}}; anything else is reported as is.
  function readError(resp) {
    return resp.text().then(function (text) {
      try {
        var body = JSON.parse(text);
        if (body && body.error) { return body.error; }
      } catch (e) { /* not JSON */ }
      return { message: resp.status + ' ' + (text || resp.statusText) };
    });
  }

  // ---- API token (Submit page) ----
  function initToken() {
    var form = document.getElementById('token-form');
    if (!form) { return; }
    var input = document.getElementById('token-input');
    var state = document.getElementById('token-state');
    function show() {
      state.textContent = getToken()
        ? 'A token is saved in this browser.'
        : 'No token saved: submitting and cancelling will be refused.';
    }
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var v = input.value.trim();
      if (v) { localStorage.setItem(TOKEN_KEY, v); }
      input.value = '';
      show();
    });
    document.getElementById('token-forget').addEventListener('click', function () {
      localStorage.removeItem(TOKEN_KEY);
      show();
    });
    show();
  }

  // ---- Submit form ----
  // The API names fields of the body; the form has one control per body field, except that
  // the job spec's own keys (`job.runs_per_task`) belong to the job box and `notify[2]` to
  // the notify box.
  function controlFor(field) {
    if (!field) { return null; }
    if (field === 'job' || field.indexOf('job.') === 0) { return 'job'; }
    if (field.indexOf('notify') === 0) { return 'notify'; }
    return field;
  }

  function initSubmit() {
    var form = document.getElementById('submit-form');
    if (!form) { return; }
    var formError = document.getElementById('form-error');
    var button = document.getElementById('submit-button');

    document.querySelectorAll('button.example').forEach(function (b) {
      b.addEventListener('click', function () {
        var tpl = document.getElementById('example-' + b.dataset.example);
        form.elements.job.value = tpl.content.textContent;
        if (!form.elements.metric.value && tpl.dataset.metric) {
          form.elements.metric.value = tpl.dataset.metric;
        }
        form.elements.job.focus();
      });
    });

    function clearErrors() {
      formError.textContent = '';
      form.querySelectorAll('.field-error').forEach(function (p) { p.textContent = ''; });
      form.querySelectorAll('[aria-invalid]').forEach(function (el) { el.removeAttribute('aria-invalid'); });
    }

    function showError(field, message) {
      var name = controlFor(field);
      var slot = name && document.getElementById(name + '-error');
      var control = name && form.elements[name];
      if (!slot || !control) {
        formError.textContent = (field ? field + ': ' : '') + message;
        formError.focus();
        return;
      }
      slot.textContent = (field !== name ? field + ': ' : '') + message;
      control.setAttribute('aria-invalid', 'true');
      var details = control.closest('details');
      if (details) { details.open = true; }
      control.focus();
    }

    // Numbers go to the API as numbers; what is not a number is refused here, where the
    // API could only say "invalid type" without naming the field.
    function number(name, integer) {
      var raw = form.elements[name].value.trim();
      if (!raw) { return undefined; }
      var n = Number(raw);
      if (!isFinite(n) || (integer && !Number.isInteger(n))) {
        throw { field: name, message: integer ? 'must be a whole number' : 'must be a number' };
      }
      return n;
    }

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      clearErrors();
      var body;
      try {
        var e = form.elements;
        body = {
          repository: e.repository.value.trim(),
          good: e.good.value.trim(),
          bad: e.bad.value.trim(),
          job: e.job.value,
          metric: e.metric.value.trim(),
          notify: e.notify.value.split(',').map(function (s) { return s.trim(); }).filter(Boolean),
          use_merge_base: e.use_merge_base.checked,
          first_parent: e.first_parent.checked
        };
        if (e.direction.value) { body.direction = e.direction.value; }
        body.magnitude_pct = number('magnitude_pct', false);
        body.confidence = number('confidence', false);
        body.max_runs = number('max_runs', true);
      } catch (err) {
        showError(err.field, err.message);
        return;
      }
      if (!getToken()) {
        formError.textContent = 'Save an API token above first: submitting needs one.';
        document.getElementById('token-input').focus();
        return;
      }
      button.disabled = true;
      button.textContent = 'Submitting… (resolving the range)';
      fetch('/api/v1/bisects', {
        method: 'POST',
        headers: authHeaders({ 'Content-Type': 'application/json' }),
        body: JSON.stringify(body)
      }).then(function (resp) {
        if (resp.ok) {
          return resp.json().then(function (b) { window.location.assign('/bisects/' + b.id); });
        }
        return readError(resp).then(function (err) {
          if (resp.status === 401) {
            formError.textContent = 'The API refused the token: ' + err.message;
            document.getElementById('token-input').focus();
          } else {
            showError(err.field, err.message);
          }
        });
      }).catch(function (err) {
        formError.textContent = 'Could not reach the server: ' + err;
      }).finally(function () {
        button.disabled = false;
        button.textContent = 'Submit bisect';
      });
    });
  }

  // ---- One bisect: live part, cancel, report ----
  function isFinal() {
    var live = document.getElementById('live');
    return !live || live.dataset.final === 'true';
  }

  function updateActions() {
    var cancel = document.getElementById('cancel');
    if (!cancel) { return; }
    var running = !isFinal();
    cancel.hidden = !(running && getToken());
    document.getElementById('cancel-hint').hidden = !(running && !getToken());
  }

  // What a reader did inside the live part survives its replacement: open "why skipped"
  // boxes, tables scrolled sideways (phones), and keyboard focus. Read before, applied after
  // the swap (scroll offsets only hold once the element is laid out).
  var FOCUSABLE = 'a[href], button, summary, [tabindex]';
  var WRAPS = '.table-wrap, .plot-wrap';
  function readerState(current) {
    var open = [];
    current.querySelectorAll('details[open]').forEach(function (d) {
      var row = d.closest('tr[id]');
      if (row) { open.push(row.id); }
    });
    var scrolls = Array.prototype.map.call(current.querySelectorAll(WRAPS), function (w) { return w.scrollLeft; });
    var focused = document.activeElement;
    var focus = focused && current.contains(focused)
      ? Array.prototype.indexOf.call(current.querySelectorAll(FOCUSABLE), focused) : -1;
    return function restore(fresh) {
      open.forEach(function (id) {
        var d = fresh.querySelector('tr[id="' + id + '"] details');
        if (d) { d.open = true; }
      });
      fresh.querySelectorAll(WRAPS).forEach(function (w, i) {
        if (scrolls[i]) { w.scrollLeft = scrolls[i]; }
      });
      var twin = focus >= 0 && fresh.querySelectorAll(FOCUSABLE)[focus];
      if (twin) { twin.focus({ preventScroll: true }); }
    };
  }

  function initLive() {
    var live = document.getElementById('live');
    if (!live) { return; }
    var announce = document.getElementById('live-announce');
    var lost = document.getElementById('live-error');
    var url = live.dataset.url;
    var interval = Number(live.dataset.pollMs) || 2000;
    var failures = 0;
    var timer = null;

    function schedule(ms) {
      clearTimeout(timer);
      if (!isFinal()) { timer = setTimeout(poll, ms); }
    }

    function poll() {
      fetch(url, { cache: 'no-store' }).then(function (resp) {
        if (!resp.ok) { throw new Error(resp.status); }
        return resp.text();
      }).then(function (html) {
        var tpl = document.createElement('template');
        tpl.innerHTML = html.trim();
        var fresh = tpl.content.firstElementChild;
        var current = document.getElementById('live');
        if (current.dataset.announce !== fresh.dataset.announce &&
            current.querySelector('#status').dataset.status !== fresh.querySelector('#status').dataset.status) {
          announce.textContent = fresh.dataset.announce;
        }
        var restore = readerState(current);
        current.replaceWith(fresh);
        restore(fresh);
        failures = 0;
        lost.hidden = true;
        updateActions();
        loadReport();
        schedule(interval);
      }).catch(function () {
        failures += 1;
        lost.hidden = false;
        // Back off while the server is away, up to half a minute.
        schedule(Math.min(30000, interval * Math.pow(2, failures)));
      });
    }

    window.perfbisectRefresh = poll;
    updateActions();
    schedule(interval);

    var cancel = document.getElementById('cancel');
    cancel.addEventListener('click', function () {
      if (!window.confirm('Cancel this bisect? Queued work is dropped and running tasks are stopped.')) { return; }
      var out = document.getElementById('actions-error');
      out.textContent = '';
      cancel.disabled = true;
      fetch(cancel.dataset.url, { method: 'POST', headers: authHeaders() }).then(function (resp) {
        if (resp.ok) { return poll(); }
        return readError(resp).then(function (err) { out.textContent = 'Not cancelled: ' + err.message; });
      }).catch(function (err) {
        out.textContent = 'Could not reach the server: ' + err;
      }).finally(function () { cancel.disabled = false; });
    });
  }

  // REPORT: the report issue serves GET /api/v1/bisects/{id}/report. Show it once it answers;
  // a 404 (no report yet, or a server without reports) leaves the page's placeholder alone.
  var reportShown = false;
  function loadReport() {
    var section = document.getElementById('report');
    if (!section || reportShown || section.dataset.shown === 'true' || !isFinal()) { return; }
    fetch(section.dataset.url, { headers: { Accept: 'text/plain' } }).then(function (resp) {
      if (!resp.ok) { return; }
      var type = resp.headers.get('Content-Type') || '';
      return resp.text().then(function (text) {
        var body = document.getElementById('report-body');
        body.textContent = '';
        var link = document.createElement('a');
        link.href = section.dataset.url;
        link.textContent = 'Open the report';
        var p = document.createElement('p');
        p.appendChild(link);
        body.appendChild(p);
        if (type.indexOf('text/plain') === 0) {
          var pre = document.createElement('pre');
          pre.textContent = text;
          body.appendChild(pre);
        }
        reportShown = true;
      });
    }).catch(function () { /* no report: the placeholder stays */ });
  }

  document.addEventListener('DOMContentLoaded', function () {
    initToken();
    initSubmit();
    initLive();
    loadReport();
  });
})();
