// The watches pages' form: create or change a watch through the REST API with the token
// saved on the submit page. The pages themselves only read.
(function () {
  'use strict';

  var form = document.getElementById('watch-form');
  if (!form) { return; }
  var errorBox = document.getElementById('form-error');

  function token() {
    try { return localStorage.getItem('perfbisect.apiToken') || ''; } catch (e) { return ''; }
  }

  // `name [direction] [threshold]`, one a line.
  function metrics(text) {
    return text.split('\n').map(function (l) { return l.trim(); }).filter(Boolean).map(function (l) {
      var parts = l.split(/\s+/);
      var m = { name: parts[0] };
      if (parts[1]) { m.direction = parts[1]; }
      if (parts[2]) { m.threshold_pct = Number(parts[2]); }
      return m;
    });
  }

  function clearErrors() {
    errorBox.textContent = '';
    form.querySelectorAll('.field-error').forEach(function (p) { p.textContent = ''; });
    form.querySelectorAll('[aria-invalid]').forEach(function (el) { el.removeAttribute('aria-invalid'); });
  }

  // The API names the field it refused (`runs_per_head`, `metrics[0].direction`,
  // `job.testcase`): the message goes next to the control of that name, which is marked
  // invalid and focused. A refusal no control answers to goes to the box above the form.
  function showError(status, field, message) {
    var name = field ? field.split(/[.[]/)[0] : '';
    var control = name && form.elements[name];
    var slot = control && control.id && document.getElementById(control.id + '-error');
    if (!slot) {
      errorBox.textContent = status + ': ' + (field ? field + ': ' : '') + message;
      return;
    }
    slot.textContent = (field !== name ? field + ': ' : '') + message;
    control.setAttribute('aria-invalid', 'true');
    control.focus();
  }

  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    clearErrors();
    var body = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name) { return; }
      if (el.type === 'checkbox') { body[el.name] = el.checked; return; }
      var v = el.value.trim();
      if (v === '') { return; }
      if (el.name === 'metrics') { body.metrics = metrics(v); }
      else if (el.name === 'recipients') {
        body.recipients = v.split(',').map(function (s) { return s.trim(); }).filter(Boolean);
      } else if (el.type === 'number') { body[el.name] = Number(v); }
      else { body[el.name] = v; }
    });
    var headers = { 'Content-Type': 'application/json' };
    if (token()) { headers.Authorization = 'Bearer ' + token(); }
    fetch(form.dataset.action, { method: form.dataset.method, headers: headers, body: JSON.stringify(body) })
      .then(function (resp) {
        if (resp.ok) {
          return resp.json().then(function (w) {
            window.location.assign(form.dataset.after || ('/watches/' + w.id));
          });
        }
        return resp.text().then(function (text) {
          var field = '';
          var msg = text;
          try {
            var e = JSON.parse(text).error;
            field = e.field || '';
            msg = e.message;
          } catch (x) { /* not JSON */ }
          showError(resp.status, field, msg);
        });
      })
      .catch(function (err) { errorBox.textContent = String(err); });
  });
})();
