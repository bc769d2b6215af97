// ratekeeper console: progressive enhancement only. Every page works without it; with
// it, the policies table shows live state and a small chart, a policy's page draws itself
// again, copy buttons copy, and destructive forms ask first. All text goes in through
// textContent (never innerHTML); a page drawn again swaps in its own sections, parsed
// with DOMParser.
(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  var REFRESH_MS = 2000;

  function el(name, attrs) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }

  // Stacked bars per minute, as the server draws them (src/console/chart.rs): granted
  // (green), then denied (red), then would-be denied in shadow mode (amber); each titled
  // with its minute in UTC, the last one (the minute so far) fainter.
  function chart(activity, words) {
    var w = 8, gap = 2, h = 22;
    var max = 1;
    activity.forEach(function (m) { max = Math.max(max, m.granted + m.denied + m.shadow_denied); });
    var svg = el('svg', { class: 'chart', width: activity.length * (w + gap), height: h + 1, role: 'img' });
    activity.forEach(function (m, i) {
      var x = i * (w + gap);
      var soFar = i === activity.length - 1;
      var at = new Date(m.minute * 60000).toISOString().slice(11, 16) + ' UTC' + (soFar ? ' (so far)' : '');
      var label = at + ': ' + m.granted + ' granted, ' + m.denied + ' denied';
      if (m.shadow_denied > 0) { label += ', ' + m.shadow_denied + ' would have been denied'; }
      var g = el('g', soFar ? { class: 'so-far' } : {});
      var title = el('title', {}); title.textContent = label; g.appendChild(title);
      var top = h;
      [['g', m.granted], ['d', m.denied], ['s', m.shadow_denied]].forEach(function (part) {
        var bar = Math.round(part[1] / max * h);
        if (bar > 0) {
          top -= bar;
          g.appendChild(el('rect', { class: part[0], x: x, y: top, width: w, height: bar }));
        }
      });
      svg.appendChild(g);
    });
    svg.appendChild(el('line', { class: 'base', x1: 0, y1: h + 0.5, x2: activity.length * (w + gap), y2: h + 0.5 }));
    svg.setAttribute('aria-label', 'Last ' + activity.length + ' minutes: ' + words);
    return svg;
  }

  function setText(row, col, text) {
    var cell = row.querySelector('[data-col="' + col + '"]');
    if (cell && cell.textContent !== text) { cell.textContent = text; }
  }

  // The page arrives with its state drawn; every REFRESH_MS the script asks for the rows
  // on screen (the page's own filter, sort and page), saying which state it shows (a
  // digest per row), and redraws only the rows the server sends back: those that changed.
  function startLive(section) {
    var base = section.getAttribute('data-live-url');
    var status = document.getElementById('live-status');
    var timer = null;
    function liveUrl() {
      var params = new URLSearchParams(window.location.search);
      var query = new URLSearchParams();
      ['q', 'sort', 'page'].forEach(function (k) { if (params.get(k)) { query.set(k, params.get(k)); } });
      var seen = [], rows = [];
      section.querySelectorAll('tr[data-policy]').forEach(function (row) {
        seen.push(row.getAttribute('data-digest') || '');
        rows.push(row.getAttribute('data-policy'));
      });
      query.set('seen', seen.join('.'));
      // Only the rows on screen are read again, whatever their order.
      query.set('rows', rows.join(','));
      return base + '?' + query.toString();
    }
    function apply(p) {
      var row = section.querySelector('tr[data-policy="' + CSS.escape(p.name) + '"]');
      if (!row) { return; }
      row.setAttribute('data-digest', p.digest);
      setText(row, 'current', p.current === null ? '–' : p.current);
      setText(row, 'full-in', p.full_in === null ? '–' : p.full_in);
      var badge = row.querySelector('[data-col="status"] .badge');
      if (badge) {
        badge.className = 'badge ' + p.status;
        if (badge.textContent !== p.status_text) { badge.textContent = p.status_text; }
      }
      var cell = row.querySelector('[data-col="activity"]');
      if (cell) {
        var recent = document.createElement('span');
        recent.className = 'badge ' + p.recent_class;
        recent.setAttribute('data-col', 'recent-badge');
        recent.textContent = p.recent_badge;
        var text = document.createElement('span');
        text.className = 'activity-text';
        text.textContent = p.recent_counts;
        text.title = p.recent;
        var line = document.createElement('span');
        line.className = 'activity-line';
        line.replaceChildren(recent, document.createTextNode(' '), chart(p.activity, p.recent));
        cell.replaceChildren(line, text);
      }
    }
    function refresh() {
      if (document.hidden) { schedule(); return; }
      fetch(liveUrl(), { credentials: 'same-origin', headers: { Accept: 'application/json' } })
        .then(function (r) {
          if (r.status === 303 || r.redirected || r.status === 401) { throw new Error('signed out'); }
          if (!r.ok) { throw new Error('HTTP ' + r.status); }
          return r.json();
        })
        .then(function (data) {
          data.policies.forEach(apply);
          section.setAttribute('data-refreshed', String(Date.now()));
          if (status) { status.removeAttribute('data-error'); }
          schedule();
        })
        .catch(function (e) {
          if (status) {
            status.setAttribute('data-error', '1');
            status.textContent = 'Live state unavailable (' + e.message + '); reload the page.';
          }
          if (e.message !== 'signed out') { schedule(); }
        });
    }
    function schedule() { clearTimeout(timer); timer = setTimeout(refresh, REFRESH_MS); }
    schedule();
  }

  // A page that draws itself again (a policy's page): every data-refresh-every ms it
  // fetches its own address and swaps in its sections marked data-refresh-section, except
  // one the user is in (a form being typed into); its "as of" line says when.
  function startRefresh(asOf) {
    var every = parseInt(asOf.getAttribute('data-refresh-every'), 10) || 10000;
    var timer = null;
    function refresh() {
      if (document.hidden) { schedule(); return; }
      fetch(window.location.href, { credentials: 'same-origin', headers: { Accept: 'text/html' } })
        .then(function (r) {
          if (r.redirected || r.status === 401) { throw new Error('signed out'); }
          if (!r.ok) { throw new Error('HTTP ' + r.status); }
          return r.text();
        })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, 'text/html');
          document.querySelectorAll('[data-refresh-section]').forEach(function (old) {
            var next = old.id && fresh.getElementById(old.id);
            if (next && !old.contains(document.activeElement)) { old.replaceWith(document.importNode(next, true)); }
          });
          var line = document.getElementById('as-of');
          if (line) { line.setAttribute('data-refreshed', String(Date.now())); }
          schedule();
        })
        .catch(function (e) {
          var line = document.getElementById('as-of');
          if (line) { line.textContent = 'Not drawn again (' + e.message + '); reload the page.'; }
        });
    }
    function schedule() { clearTimeout(timer); timer = setTimeout(refresh, every); }
    schedule();
  }

  function copyButtons() {
    document.querySelectorAll('[data-copy]').forEach(function (button) {
      button.addEventListener('click', function () {
        var source = document.querySelector(button.getAttribute('data-copy'));
        if (!source) { return; }
        var text = source.textContent.trim();
        var done = function () { button.textContent = 'Copied'; };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done, function () { selectText(source); });
        } else {
          selectText(source);
          try { if (document.execCommand('copy')) { done(); } } catch (e) { /* selected for manual copy */ }
        }
      });
    });
  }

  function selectText(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // The policy form shows only the fields of the chosen algorithm; hidden ones are also
  // disabled, so they are not sent (the server refuses a field the algorithm does not use).
  function algorithmFields() {
    var select = document.getElementById('algorithm');
    if (!select) { return; }
    function apply() {
      document.querySelectorAll('[data-algorithms]').forEach(function (group) {
        var used = group.getAttribute('data-algorithms').split(' ').indexOf(select.value) >= 0;
        group.hidden = !used;
        group.querySelectorAll('input, select').forEach(function (input) { input.disabled = !used; });
      });
    }
    select.addEventListener('change', apply);
    apply();
  }

  function confirmForms() {
    document.querySelectorAll('form[data-confirm]').forEach(function (form) {
      form.addEventListener('submit', function (event) {
        if (!window.confirm(form.getAttribute('data-confirm'))) { event.preventDefault(); }
      });
    });
  }

  // A policy file read from the computer into the form's text box (what the form sends):
  // the chooser is shown only with this script; without it the file is pasted.
  var FILE_LIMIT = 256 * 1024;
  function fileReaders() {
    document.querySelectorAll('input[type=file][data-read-into]').forEach(function (input) {
      var target = document.getElementById(input.getAttribute('data-read-into'));
      var status = document.getElementById(input.id + '-status');
      if (!target || !window.FileReader) { return; }
      var chooser = input.closest('[hidden]');
      if (chooser) { chooser.hidden = false; }
      input.addEventListener('change', function () {
        var file = input.files && input.files[0];
        if (!file) { return; }
        if (file.size > FILE_LIMIT) {
          status.textContent = file.name + ' is larger than 256 KiB: split it into several files.';
          status.className = 'error';
          return;
        }
        var reader = new FileReader();
        reader.onload = function () {
          target.value = reader.result;
          status.className = '';
          status.textContent = 'Read ' + file.name + ' into the box below; show the plan to see what it changes.';
        };
        reader.onerror = function () {
          status.className = 'error';
          status.textContent = file.name + ' could not be read.';
        };
        reader.readAsText(file);
      });
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    var live = document.querySelector('[data-live-url]');
    if (live && live.querySelector('tr[data-policy]')) { startLive(live); }
    var asOf = document.querySelector('[data-refresh-every]');
    if (asOf) { startRefresh(asOf); }
    copyButtons();
    confirmForms();
    algorithmFields();
    fileReaders();
  });
})();
