// sysray report: builds every view from the JSON document in #sysray-data.
// Text from the capture (names, paths, argv) only ever reaches the page
// through textContent, attributes or canvas text, never as markup.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('sysray-data').textContent);
  D.containers = D.containers || [];
  D.findings = D.findings || [];
  D.heatmap.series = D.heatmap.series || [];
  var VIEWS = ['findings', 'table', 'heatmap', 'timeline', 'flame', 'meta'];
  var redraw = {};

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'cls') e.className = attrs[k];
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) {
      if (c == null) return;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }
  function ns(v) {
    if (v == null) return '';
    if (v < 1e3) return v + 'ns';
    if (v < 1e6) return (v / 1e3).toFixed(v < 1e4 ? 2 : 1) + 'µs';
    if (v < 1e9) return (v / 1e6).toFixed(v < 1e7 ? 2 : 1) + 'ms';
    return (v / 1e9).toFixed(v < 1e10 ? 3 : 2) + 's';
  }
  function short(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }
  function num(v) { return Number(v).toLocaleString('en-US'); }
  function secs(v) { return (v / 1e9).toFixed(v < 1e10 ? 3 : 1) + 's'; }
  function pageWidth() { return Math.max(640, (document.documentElement.clientWidth || window.innerWidth || 1200) - 34); }

  var tip = document.getElementById('tip');
  function showTip(ev, text) {
    if (!text) { tip.hidden = true; return; }
    tip.textContent = text;
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth) x = Math.max(0, ev.clientX - r.width - 10);
    if (y + r.height > window.innerHeight) y = Math.max(0, ev.clientY - r.height - 10);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  function hideTip() { tip.hidden = true; }

  // A canvas sized in CSS pixels, sharp on high-density screens.
  function canvas(w, h) {
    var c = el('canvas', { cls: 'plot' });
    sizeCanvas(c, w, h);
    return c;
  }
  function sizeCanvas(c, w, h) {
    var r = window.devicePixelRatio || 1;
    c.width = Math.round(w * r); c.height = Math.round(h * r);
    c.style.width = w + 'px'; c.style.height = h + 'px';
    var g = c.getContext('2d');
    g.setTransform(r, 0, 0, r, 0, 0);
    return g;
  }
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }

  // ---- banner: what the numbers cannot be trusted for
  (function () {
    var m = D.meta, msgs = [];
    var lost = Math.max(m.drops || 0, m.drop_events || 0);
    if (lost > 0) msgs.push(num(lost) + ' events were lost while recording (ring buffer full): counts are lower bounds.');
    if (m.warning) msgs.push(m.warning);
    document.getElementById('banner').textContent = msgs.join(' ');
  })();

  // ---- findings
  (function () {
    var s = document.getElementById('view-findings');
    var f = D.findings || [];
    var n = { critical: 0, warning: 0, info: 0 };
    f.forEach(function (x) { n[x.severity] = (n[x.severity] || 0) + 1; });
    s.appendChild(el('h2', { text: f.length + ' finding' + (f.length === 1 ? '' : 's') + ': ' + n.critical + ' critical, ' +
      n.warning + ' warning, ' + n.info + ' info' }));
    s.appendChild(el('p', { cls: 'note', text: 'The doctor on ' + num(D.meta.events) + ' events over ' + secs(D.meta.span) +
      ' (kernel ' + (D.meta.kernel || '?') + ', vsyscall=' + (D.meta.vsyscall_mode || '?') + ').' }));
    if (!f.length) s.appendChild(el('div', { cls: 'nothing', text: 'Nothing wrong found between these programs and the kernel.' }));
    // As in the text report: when nothing was found, what came within a
    // tenth of a rule, so a reader sees what the doctor looked at.
    var near = f.length ? [] : (D.near || []).filter(function (x) { return x.closeness >= 0.1; });
    if (near.length) {
      s.appendChild(el('h3', { text: 'Closest to a finding, not reported (the rule each fell short of)' }));
      s.appendChild(el('ul', { cls: 'near' }, near.map(function (x) {
        return el('li', { 'data-id': x.id }, [el('span', { cls: 'id mono', text: '[' + x.id + '] ' + Math.round(100 * x.closeness) + '% of the way: ' }),
          x.subject, el('br'), el('span', { cls: 'muted', text: x.short })]);
      })));
    }
    s.setAttribute('data-near', near.length);
    f.forEach(function (x) {
      var dl = el('dl');
      Object.keys(x.evidence || {}).sort().forEach(function (k) {
        dl.appendChild(el('dt', { text: k }));
        dl.appendChild(el('dd', null, [value(x.evidence[k])]));
      });
      s.appendChild(el('article', { cls: 'finding ' + x.severity, 'data-id': x.id, 'data-severity': x.severity }, [
        el('h3', null, [el('span', { cls: 'sev', text: String(x.severity).toUpperCase() }), el('span', { cls: 'id mono', text: '[' + x.id + ']' }), x.title]),
        el('p', { text: x.summary }),
        (x.evidence && Object.keys(x.evidence).length) ? el('details', { open: '' }, [el('summary', { text: 'evidence' }), dl]) : null,
        el('div', { cls: 'fix' }, [el('b', { text: 'FIX' }), el('span', { text: x.fix })])
      ]));
    });
    s.setAttribute('data-count', f.length);
    s.setAttribute('data-rendered', s.querySelectorAll('.finding').length || (f.length ? 0 : 1));
  })();
  function value(v) {
    if (v == null) return el('span', { cls: 'muted', text: '—' });
    if (Array.isArray(v)) {
      if (!v.length) return el('span', { cls: 'muted', text: '(none)' });
      return el('ul', null, v.map(function (x) { return el('li', null, [el('pre', { text: typeof x === 'object' ? JSON.stringify(x) : String(x) })]); }));
    }
    if (typeof v === 'object') return el('pre', { text: JSON.stringify(v, null, 2) });
    return el('pre', { text: String(v) });
  }

  // ---- containers → processes → syscalls
  (function () {
    var s = document.getElementById('view-table');
    var cols = [['name', 'name'], ['calls', 'count'], ['errors', 'errors'], ['time', 'time'], ['p50', 'p50'], ['p99', 'p99'], ['max', 'max']];
    var sortKey = 'time', asc = false;
    var nprocs = 0;
    D.containers.forEach(function (c) { nprocs += c.procs.length; });
    var open = {};
    D.containers.forEach(function (c, i) {
      open['c' + i] = true;
      if (nprocs <= 12) c.procs.forEach(function (p, j) { open['p' + i + ':' + j] = true; });
    });
    s.appendChild(el('h2', { text: 'Containers → processes → syscalls' }));
    s.appendChild(el('p', { cls: 'note', text: 'Click a header to sort, a row to open or close it. Latency percentiles come from log-linear histograms (within 12.5%).' }));
    var filter = el('input', { type: 'search', placeholder: 'filter: process, pid, command or syscall', size: '40', oninput: function () { render(); } });
    s.appendChild(el('div', { cls: 'controls' }, [filter]));
    var table = el('table', { cls: 'stats' });
    var head = el('tr');
    cols.forEach(function (c) {
      head.appendChild(el('th', { 'data-key': c[1], text: c[0], onclick: function () {
        if (sortKey === c[1]) asc = !asc; else { sortKey = c[1]; asc = c[1] === 'name'; }
        render();
      } }));
    });
    table.appendChild(el('thead', null, [head]));
    var body = el('tbody');
    table.appendChild(body);
    s.appendChild(table);
    function cmp(a, b) {
      var x = sortKey === 'name' ? (a.name != null ? a.name : a.comm) : a[sortKey];
      var y = sortKey === 'name' ? (b.name != null ? b.name : b.comm) : b[sortKey];
      var r = x < y ? -1 : x > y ? 1 : 0;
      return asc ? r : -r;
    }
    function cells(tr, st) {
      tr.appendChild(el('td', { text: num(st.count) }));
      var errs = el('td', { cls: st.errors ? 'err' : '', text: st.errors ? num(st.errors) : '' });
      if (st.errnos) {
        var by = Object.keys(st.errnos).sort(function (a, b) { return st.errnos[b] - st.errnos[a] || (a < b ? -1 : 1); });
        errs.setAttribute('title', by.map(function (k) { return k + ' ' + st.errnos[k]; }).join(', '));
        errs.appendChild(el('span', { cls: 'errno', text: ' ' + by[0] + (by.length > 1 ? ' +' + (by.length - 1) : '') }));
      }
      tr.appendChild(errs);
      tr.appendChild(el('td', { text: ns(st.time) }));
      tr.appendChild(el('td', { text: ns(st.p50) }));
      tr.appendChild(el('td', { text: ns(st.p99) }));
      tr.appendChild(el('td', { text: ns(st.max) }));
    }
    function toggle(key) { open[key] = !open[key]; render(); }
    function render() {
      [].forEach.call(head.children, function (th) {
        th.className = th.getAttribute('data-key') === sortKey ? 'sorted' + (asc ? ' asc' : '') : '';
      });
      while (body.firstChild) body.removeChild(body.firstChild);
      var rows = 0, q = filter.value.trim().toLowerCase();
      // With a filter, what matches is shown open, whatever was open.
      function has(s) { return String(s).toLowerCase().indexOf(q) >= 0; }
      function procHit(c, p) { return has(c.name) || has(p.comm) || has(p.pid) || has(p.cmd || ''); }
      function shown(c, p) { return !q || procHit(c, p) || p.syscalls.some(function (sc) { return has(sc.name); }); }
      D.containers.map(function (c, i) { return [c, i]; }).sort(function (a, b) { return cmp(a[0], b[0]); }).forEach(function (ci) {
        var c = ci[0], i = ci[1], ck = 'c' + i;
        var cOpen = q ? true : open[ck];
        var tr = el('tr', { cls: 'l0' + (!q || c.procs.some(function (p) { return shown(c, p); }) ? '' : ' hid'), 'data-level': 'container', 'data-name': c.name, 'data-count': c.count, onclick: function () { toggle(ck); } }, [
          el('td', null, [el('span', { cls: 'tog', text: cOpen ? '▾' : '▸' }), c.name || 'host (no container)',
            el('span', { cls: 'cmd', text: c.procs.length + ' process' + (c.procs.length === 1 ? '' : 'es') })])]);
        cells(tr, c);
        body.appendChild(tr);
        c.procs.map(function (p, j) { return [p, j]; }).sort(function (a, b) { return cmp(a[0], b[0]); }).forEach(function (pj) {
          var p = pj[0], pk = 'p' + i + ':' + pj[1];
          var label = p.pid ? p.comm + '[' + p.pid + ']' : p.comm;
          var pOpen = q ? true : open[pk], whole = q && procHit(c, p);
          var tr = el('tr', { cls: 'l1' + (cOpen && shown(c, p) ? '' : ' hid'), 'data-level': 'process', 'data-pid': p.pid, 'data-name': p.comm, 'data-count': p.count,
            onclick: function () { toggle(pk); } }, [
            el('td', { title: p.cmd || '' }, [el('span', { cls: 'tog', text: pOpen ? '▾' : '▸' }), label,
              el('span', { cls: 'cmd', text: short(p.cmd || '', 140) + (p.threads > 1 ? '  (' + p.threads + ' threads)' : '') })])]);
          cells(tr, p);
          body.appendChild(tr);
          p.syscalls.slice().sort(cmp).forEach(function (sc) {
            var tr = el('tr', { cls: 'l2' + (cOpen && pOpen && (!q || whole || has(sc.name)) ? '' : ' hid'), 'data-level': 'syscall', 'data-pid': p.pid,
              'data-comm': p.comm, 'data-name': sc.name, 'data-count': sc.count, 'data-errors': sc.errors }, [el('td', { text: sc.name })]);
            cells(tr, sc);
            body.appendChild(tr);
            rows++;
          });
        });
      });
      s.setAttribute('data-rendered', rows);
    }
    render();
  })();

  // ---- latency heatmap
  (function () {
    var s = document.getElementById('view-heatmap');
    var H = D.heatmap, series = H.series || [];
    s.appendChild(el('h2', { text: 'Syscall latency over time' }));
    s.appendChild(el('p', { cls: 'note', text: 'Time runs left to right (' + ns(H.bin_ns) + ' a column), latency bottom to top on a log scale ' +
      '(two rows per power of two), colour is the number of calls. ' +
      (H.others ? H.others + ' more syscalls are only in "all syscalls". ' : '') + 'Click a small map to enlarge it.' }));
    if (!series.length || !series[0].count) {
      s.appendChild(el('p', { cls: 'nothing', text: 'This capture holds no syscalls.' }));
      s.setAttribute('data-rendered', '0');
      return;
    }
    // Rows and columns anything uses, so the maps are not mostly empty.
    var rlo = 1e9, rhi = 0, chi = 0;
    series[0].cells.forEach(function (v, i) {
      if (i % 3 === 0) chi = Math.max(chi, v);
      if (i % 3 === 1) { rlo = Math.min(rlo, v); rhi = Math.max(rhi, v); }
    });
    rlo = Math.max(0, rlo - 1); rhi = Math.min(H.row_ns.length - 1, rhi + 1);
    var ncols = Math.min(H.cols, chi + 1);
    var sel = el('select', { onchange: function () { pick(+sel.value); } });
    series.forEach(function (x, i) { sel.appendChild(el('option', { value: i, text: x.name + ' — ' + num(x.count) + ' calls, ' + ns(x.time) })); });
    s.appendChild(el('div', { cls: 'controls' }, ['syscall ', sel]));
    var main = el('div');
    s.appendChild(main);
    var legend = el('div', { cls: 'legend note' });
    s.appendChild(legend);
    var grid = el('div', { cls: 'multiples' });
    s.appendChild(grid);
    var stops = [[255, 255, 204], [254, 217, 118], [253, 141, 60], [227, 26, 28], [128, 0, 38]];
    function colour(t) {
      var p = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(p)), f = p - i;
      var a = stops[i], b = stops[i + 1];
      return 'rgb(' + Math.round(a[0] + (b[0] - a[0]) * f) + ',' + Math.round(a[1] + (b[1] - a[1]) * f) + ',' + Math.round(a[2] + (b[2] - a[2]) * f) + ')';
    }
    function rowLabel(r) { return r === 0 ? '<' + ns(H.row_ns[1]) : ns(H.row_ns[r]); }
    // draw paints one series; returns the number of cells drawn.
    function draw(g, x, w, h, axes) {
      var L = axes ? 64 : 0, B = axes ? 26 : 0, T = axes ? 6 : 0;
      var pw = w - L - 8 * (axes ? 1 : 0), ph = h - B - T;
      var cw = pw / ncols, rh = ph / (rhi - rlo + 1);
      g.fillStyle = '#fff'; g.fillRect(0, 0, w, h);
      var maxc = 1, c = x.cells, drawn = 0;
      for (var i = 2; i < c.length; i += 3) maxc = Math.max(maxc, c[i]);
      for (i = 0; i < c.length; i += 3) {
        if (c[i] >= ncols || c[i + 1] < rlo || c[i + 1] > rhi) continue;
        g.fillStyle = colour(Math.log(1 + c[i + 2]) / Math.log(1 + maxc));
        g.fillRect(L + c[i] * cw, T + (rhi - c[i + 1]) * rh, Math.max(cw, 1), Math.max(rh, 1));
        drawn++;
      }
      if (axes) {
        g.fillStyle = '#667085'; g.strokeStyle = '#d9dee7'; g.font = '11px sans-serif'; g.textAlign = 'right'; g.textBaseline = 'middle';
        for (var r = rlo; r <= rhi; r++) {
          if ((r - rlo) % 2) continue;
          var y = T + (rhi - r + 0.5) * rh;
          g.fillText(rowLabel(r), L - 6, y);
        }
        g.textAlign = 'center'; g.textBaseline = 'top';
        var span = ncols * H.bin_ns, step = niceStep(span / 8);
        for (var t = 0; t <= span; t += step) {
          var px = L + (t / H.bin_ns) * cw;
          g.beginPath(); g.moveTo(px, T + ph); g.lineTo(px, T + ph + 4); g.stroke();
          g.fillText('+' + secs(t + H.t0), px, T + ph + 7);
        }
        g.strokeRect(L - 0.5, T - 0.5, pw + 1, ph + 1);
      }
      return { drawn: drawn, maxc: maxc, L: L, T: T, cw: cw, rh: rh, pw: pw, ph: ph };
    }
    var cur = 0, geo = null, big = null;
    function pick(i) {
      cur = i; sel.value = i;
      [].forEach.call(grid.children, function (m, j) { m.className = 'multiple' + (j === i ? ' sel' : ''); });
      paint();
    }
    function paint() {
      var w = pageWidth();
      if (!big) {
        big = canvas(w, 360);
        big.addEventListener('mousemove', function (ev) {
          var r = big.getBoundingClientRect(), x = ev.clientX - r.left - geo.L, y = ev.clientY - r.top - geo.T;
          if (x < 0 || y < 0 || x > geo.pw || y > geo.ph) { hideTip(); return; }
          var col = Math.floor(x / geo.cw), row = rhi - Math.floor(y / geo.rh), n = 0, c = series[cur].cells;
          for (var i = 0; i < c.length; i += 3) if (c[i] === col && c[i + 1] === row) n = c[i + 2];
          var hi = row + 1 < H.row_ns.length ? ns(H.row_ns[row + 1]) : '∞';
          showTip(ev, series[cur].name + '\n+' + secs(H.t0 + col * H.bin_ns) + ' to +' + secs(H.t0 + (col + 1) * H.bin_ns) +
            '\nlatency ' + (row === 0 ? '0' : ns(H.row_ns[row])) + ' to ' + hi + '\n' + num(n) + ' calls');
        });
        big.addEventListener('mouseleave', hideTip);
        main.appendChild(big);
      }
      var g = sizeCanvas(big, w, 360);
      geo = draw(g, series[cur], w, 360, true);
      big.setAttribute('data-cells', geo.drawn);
      legend.textContent = series[cur].name + ': ' + num(series[cur].count) + ' calls, ' + ns(series[cur].time) +
        ' in all; the darkest cell holds ' + num(geo.maxc) + ' calls.';
      s.setAttribute('data-rendered', geo.drawn);
      s.setAttribute('data-series', series.length);
    }
    series.forEach(function (x, i) {
      var c = canvas(236, 96);
      draw(c.getContext('2d'), x, 236, 96, false);
      grid.appendChild(el('div', { cls: 'multiple', onclick: function () { pick(i); } }, [el('div', { cls: 'mono', text: x.name + ' · ' + num(x.count) }), c]));
    });
    pick(0);
    redraw.heatmap = paint;
  })();
  function niceStep(v) {
    if (v <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }

  // ---- per-thread timeline
  (function () {
    var s = document.getElementById('view-timeline');
    var T = D.timeline, items = T.items || [], lanes = T.threads || [];
    var span = Math.max(D.meta.span, 1);
    var KIND = { syscall: ['#2e90fa', 'slow syscall'], error: ['#f79009', 'failed syscall'], fault: ['#7a5af8', 'page fault'],
      vsyscall: ['#ee46bc', 'vsyscall emulation'], signal: ['#d92d20', 'signal'], exec: ['#12b76a', 'exec'], exit: ['#1d2330', 'exit'] };
    s.appendChild(el('h2', { text: 'Per-thread timeline' }));
    var left = [];
    Object.keys(T.total || {}).sort().forEach(function (k) {
      var out = T.total[k] - (T.shown[k] || 0);
      if (out > 0) left.push(num(out) + ' ' + k + (k === 'syscall' ? ' calls' : ' events'));
    });
    var shown = items.length;
    s.appendChild(el('p', { cls: 'note', text: 'Drawn: ' + num(shown) + ' items on ' + lanes.length + ' threads' +
      (T.slow_floor ? '; the slowest syscalls are kept (all those of ' + ns(T.slow_floor) + ' or more)' : '; every syscall is drawn') +
      (left.length ? '; left out: ' + left.join(', ') : '') + (T.threads_omitted ? ', and every item of ' + T.threads_omitted + ' more threads' : '') +
      '. Pale bars are calls still in progress when their thread exited or the capture ended. Wheel or the buttons zoom, drag pans, double-click resets.' }));
    var legend = el('div', { cls: 'legend' });
    Object.keys(KIND).forEach(function (k) { legend.appendChild(el('span', null, [el('i', { style: 'background:' + KIND[k][0] }), KIND[k][1]])); });
    var v0 = 0, v1 = span;
    function zoom(f, at) {
      var w = (v1 - v0) * f, c = at == null ? (v0 + v1) / 2 : at;
      w = Math.min(Math.max(w, 1000), span);
      var r = (c - v0) / (v1 - v0);
      v0 = c - r * w; v1 = v0 + w;
      if (v0 < 0) { v0 = 0; v1 = w; }
      if (v1 > span) { v1 = span; v0 = span - w; }
      paint();
    }
    s.appendChild(el('div', { cls: 'controls' }, [
      el('button', { text: '−', title: 'zoom out', onclick: function () { zoom(2); } }),
      el('button', { text: '+', title: 'zoom in', onclick: function () { zoom(0.5); } }),
      el('button', { text: 'reset', onclick: function () { v0 = 0; v1 = span; paint(); } }), legend]));
    if (!lanes.length) {
      s.appendChild(el('p', { cls: 'nothing', text: 'Nothing to draw: the capture holds no syscalls, faults, signals, exec or exit.' }));
      s.setAttribute('data-rendered', '0');
      return;
    }
    var LW = 200, LH = 18, TOP = 26;
    var wrap = el('div', { cls: 'tlwrap' });
    var cv = canvas(pageWidth(), TOP + lanes.length * LH + 4);
    wrap.appendChild(cv);
    s.appendChild(wrap);
    var byLane = lanes.map(function () { return []; });
    items.forEach(function (it) { byLane[it.l].push(it); });
    // Drawn in this order, so a signal is not hidden under the fault that raised it.
    var RANK = { syscall: 0, fault: 1, vsyscall: 1, exec: 2, exit: 3, signal: 4 };
    byLane.forEach(function (l) { l.sort(function (a, b) { return RANK[a.k] - RANK[b.k] || a.t - b.t; }); });
    var W = 0;
    function X(t) { return LW + (t - v0) / (v1 - v0) * (W - LW - 10); }
    function colourOf(it) { return KIND[it.k === 'syscall' && it.e ? 'error' : it.k][0]; }
    function paint() {
      W = pageWidth();
      var H = TOP + lanes.length * LH + 4;
      var g = sizeCanvas(cv, W, H);
      g.fillStyle = '#fff'; g.fillRect(0, 0, W, H);
      g.font = '11px sans-serif'; g.textBaseline = 'middle';
      var step = niceStep((v1 - v0) / 8);
      g.strokeStyle = '#eef0f3'; g.fillStyle = '#667085'; g.textAlign = 'center';
      for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
        var x = X(t);
        g.beginPath(); g.moveTo(x, TOP - 4); g.lineTo(x, H); g.stroke();
        g.fillText('+' + secs(t), x, 12);
      }
      var drawn = 0;
      lanes.forEach(function (th, l) {
        var y = TOP + l * LH;
        if (l % 2) { g.fillStyle = '#f9fafb'; g.fillRect(0, y, W, LH); }
        g.fillStyle = '#1d2330'; g.textAlign = 'left';
        var name = th.comm + ' ' + th.pid + (th.tid !== th.pid ? ':' + th.tid : '');
        g.save(); g.beginPath(); g.rect(0, y, LW - 6, LH); g.clip();
        g.fillText(name, 4, y + LH / 2); g.restore();
        g.save(); g.beginPath(); g.rect(LW, y, W - LW, LH); g.clip();
        byLane[l].forEach(function (it) {
          if (it.t + (it.d || 0) < v0 || it.t > v1) return;
          var x0 = X(it.t);
          g.fillStyle = colourOf(it);
          g.globalAlpha = it.u ? 0.45 : 1;
          if (it.k === 'syscall') {
            g.fillRect(x0, y + 4, Math.max(X(it.t + it.d) - x0, 2), LH - 8);
          } else {
            g.beginPath(); g.moveTo(x0, y + 2); g.lineTo(x0 + 5, y + LH / 2); g.lineTo(x0, y + LH - 2); g.lineTo(x0 - 5, y + LH / 2); g.closePath(); g.fill();
          }
          g.globalAlpha = 1;
          drawn++;
        });
        g.restore();
      });
      g.strokeStyle = '#d9dee7'; g.beginPath(); g.moveTo(LW - 0.5, 0); g.lineTo(LW - 0.5, H); g.stroke();
      s.setAttribute('data-rendered', drawn);
      s.setAttribute('data-items', items.length);
      s.setAttribute('data-kinds', Object.keys(T.shown || {}).sort().map(function (k) { return k + ':' + T.shown[k]; }).join(','));
    }
    function timeAt(ev) { var r = cv.getBoundingClientRect(); return v0 + (ev.clientX - r.left - LW) / (W - LW - 10) * (v1 - v0); }
    cv.addEventListener('wheel', function (ev) {
      var r = cv.getBoundingClientRect();
      if (ev.clientX - r.left < LW) return;
      ev.preventDefault();
      zoom(ev.deltaY > 0 ? 1.25 : 0.8, timeAt(ev));
    }, { passive: false });
    var drag = null;
    cv.addEventListener('mousedown', function (ev) { drag = { x: ev.clientX, v0: v0, v1: v1 }; });
    window.addEventListener('mouseup', function () { drag = null; });
    cv.addEventListener('dblclick', function () { v0 = 0; v1 = span; paint(); });
    cv.addEventListener('mousemove', function (ev) {
      if (drag) {
        var dt = (ev.clientX - drag.x) / (W - LW - 10) * (drag.v1 - drag.v0);
        var w = drag.v1 - drag.v0;
        v0 = Math.min(Math.max(drag.v0 - dt, 0), span - w); v1 = v0 + w;
        paint(); hideTip(); return;
      }
      var r = cv.getBoundingClientRect(), l = Math.floor((ev.clientY - r.top - TOP) / LH), x = ev.clientX - r.left;
      if (l < 0 || l >= lanes.length || x < LW) { hideTip(); return; }
      var best = null, bd = 7;
      byLane[l].forEach(function (it) {
        var a = X(it.t), b = Math.max(X(it.t + (it.d || 0)), a + 2);
        var d = x < a ? a - x : x > b ? x - b : 0;
        if (d <= bd) { bd = d; best = it; }
      });
      var th = lanes[l];
      showTip(ev, best ? th.comm + ' ' + th.pid + ':' + th.tid + '  +' + secs(best.t) + (best.d ? '  ' + ns(best.d) : '') + '\n' + best.s : null);
    });
    cv.addEventListener('mouseleave', hideTip);
    paint();
    redraw.timeline = paint;
  })();

  // ---- flame graphs
  (function () {
    var s = document.getElementById('view-flame');
    s.appendChild(el('h2', { text: 'Flame graphs of time in syscalls' }));
    var GRAPHS = [
      ['on_cpu', 'on CPU', 'Time inside syscalls on a CPU, by process, user stack (where the capture has one) and syscall: a slow call\'s latency less the sleeps recorded for it. Calls faster than the recording\'s --slow carry no record of their sleeps: their whole time is counted, as an upper bound, and frames made mostly of it are drawn pale. Calls cut off by an exit are left out. A capture holds no samples of user code: `sysray profile` records those.'],
      ['off_cpu', 'off CPU', 'Time slow syscalls spent asleep, by process, user stack and the kernel stack where they slept; "(runnable, waiting for a CPU)" marks time preempted rather than blocked.']];
    var input = el('input', { type: 'search', placeholder: 'search frames', oninput: function () { graphs.forEach(function (g) { g.paint(); }); } });
    var which = 0, buttons = [];
    var bar = el('div', { cls: 'controls' });
    GRAPHS.forEach(function (x, i) {
      var b = el('button', { text: x[1], onclick: function () { which = i; showOne(); } });
      buttons.push(b); bar.appendChild(b);
    });
    var reset = el('button', { text: 'reset zoom', onclick: function () { graphs[which].zoomTo(null); } });
    var matched = el('span', { cls: 'muted' });
    bar.appendChild(input); bar.appendChild(reset); bar.appendChild(matched);
    s.appendChild(bar);
    if (!D.meta.stacks) GRAPHS[0][2] = 'Time inside syscalls, by process and syscall. This capture has no stacks, so no call\'s sleeps were recorded: each bar is all of its calls\' time, an upper bound of their time on CPU (drawn pale).';
    var graphs = GRAPHS.map(function (x) { return flame(x[0], D.flame[x[0]], x[2]); });
    function showOne() {
      buttons.forEach(function (b, i) { b.className = i === which ? 'on' : ''; });
      graphs.forEach(function (g, i) { g.box.hidden = i !== which; });
      graphs[which].paint();
    }
    var total = 0;
    graphs.forEach(function (g) { s.appendChild(g.box); total += g.drawn(); });
    if (!D.meta.stacks) s.appendChild(el('p', { cls: 'note', text: 'This capture has no stacks: it was recorded without --stacks, or no syscall was slower than --slow. The off-CPU graph needs them; record with --stacks (sysray report and doctor turn it on).' }));
    showOne();
    s.setAttribute('data-rendered', total);
    redraw.flame = function (sub) {
      if (sub === 'off') which = 1; else if (sub === 'on') which = 0;
      showOne();
    };

    function flame(id, root, about) {
      var box = el('div', { id: 'flame-' + id, 'data-rendered': '0' });
      box.appendChild(el('p', { cls: 'note', text: about }));
      if (!root) {
        box.appendChild(el('p', { cls: 'nothing', text: id === 'off_cpu' ? 'No sleeps recorded: the capture has no stacks, or no syscall slept past --slow.' : 'No syscall time in this capture.' }));
        return { box: box, paint: function () { matched.textContent = ''; }, zoomTo: function () {}, drawn: function () { return 0; } };
      }
      // Flatten: each frame with its place as fractions of the root.
      var frames = [], depth = 0;
      (function walk(n, x, d, parent) {
        var f = { n: n.n, v: n.v, b: n.b || 0, x: x, w: n.v / root.v, d: d, p: parent };
        frames.push(f);
        depth = Math.max(depth, d);
        var cx = x;
        (n.c || []).forEach(function (c) { walk(c, cx, d + 1, f); cx += c.v / root.v; });
      })(root, 0, 0, null);
      var RH = 17, zoomed = frames[0], cv, W = 0, H = (depth + 1) * RH + 4, count = 0, boxes = [];
      cv = canvas(pageWidth(), H);
      box.appendChild(cv);
      function label(n) { return n.slice(-4) === '_[k]' ? n.slice(0, -4) : n; }
      function fill(f, hit) {
        if (hit) return 'rgb(230,60,230)';
        var h = hash(f.n);
        if (f.d === 0) return 'rgb(200,200,210)';
        if (f.n.slice(-4) === '_[k]') return 'rgb(230,' + (140 + h % 60) + ',' + (40 + h % 30) + ')';
        if (f.d === 1) return 'rgb(' + (190 + h % 20) + ',' + (190 + h % 20) + ',' + (205 + h % 20) + ')';
        return 'rgb(' + (205 + h % 50) + ',' + (80 + h % 110) + ',' + (40 + h % 40) + ')';
      }
      function paint() {
        W = pageWidth();
        var g = sizeCanvas(cv, W, H);
        g.fillStyle = '#fff'; g.fillRect(0, 0, W, H);
        g.font = '11.5px ui-monospace, "DejaVu Sans Mono", monospace'; g.textBaseline = 'middle';
        var q = input.value.toLowerCase(), z = zoomed, hitV = 0;
        count = 0; boxes = [];
        frames.forEach(function (f) {
          var inside = f.x >= z.x - 1e-12 && f.x + f.w <= z.x + z.w + 1e-12 && f.d >= z.d;
          var above = f.d < z.d && f.x <= z.x + 1e-12 && f.x + f.w >= z.x + z.w - 1e-12;
          if (!inside && !above) return;
          var x = inside ? (f.x - z.x) / z.w * W : 0, w = inside ? f.w / z.w * W : W;
          var hit = q && label(f.n).toLowerCase().indexOf(q) >= 0;
          if (hit && inside) {
            var anc = f.p, under = false;
            while (anc && anc.d >= z.d) { if (label(anc.n).toLowerCase().indexOf(q) >= 0) { under = true; break; } anc = anc.p; }
            if (!under) hitV += f.v;
          }
          if (w < 0.5) return;
          var y = H - 4 - (f.d + 1) * RH;
          g.globalAlpha = above || 2 * f.b > f.v ? 0.5 : 1;
          g.fillStyle = fill(f, hit);
          g.fillRect(x, y, Math.max(w - 0.5, 0.5), RH - 1);
          if (w > 30) {
            g.fillStyle = '#000';
            var t = label(f.n), room = Math.floor((w - 6) / 7);
            if (t.length > room) t = room > 2 ? t.slice(0, room - 2) + '..' : '';
            g.fillText(t, x + 3, y + RH / 2);
          }
          boxes.push([x, y, w, f]);
          count++;
        });
        g.globalAlpha = 1;
        box.setAttribute('data-rendered', count);
        matched.textContent = q ? 'matched ' + (100 * hitV / z.v).toFixed(1) + '% of ' + ns(z.v) : '';
      }
      function at(ev) {
        var r = cv.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
        for (var i = boxes.length - 1; i >= 0; i--) {
          var b = boxes[i];
          if (x >= b[0] && x < b[0] + b[2] && y >= b[1] && y < b[1] + RH) return b[3];
        }
        return null;
      }
      cv.addEventListener('mousemove', function (ev) {
        var f = at(ev);
        showTip(ev, f ? label(f.n) + (f.n.slice(-4) === '_[k]' ? ' [kernel]' : '') + '\n' + ns(f.v) + ', ' + (100 * f.v / root.v).toFixed(2) + '% of all' +
          (f.b ? '\n' + ns(f.b) + ' of it at most: calls faster than --slow, whose sleeps were not recorded' : '') : null);
      });
      cv.addEventListener('mouseleave', hideTip);
      cv.addEventListener('click', function (ev) { var f = at(ev); if (f) zoomTo(f); });
      function zoomTo(f) { zoomed = f || frames[0]; paint(); }
      paint();
      return { box: box, paint: paint, zoomTo: zoomTo, drawn: function () { return count; } };
    }
  })();

  // ---- capture metadata and drops
  (function () {
    var s = document.getElementById('view-meta'), m = D.meta;
    s.appendChild(el('h2', { text: 'Capture' }));
    var t = el('table', { cls: 'kv' });
    function row(k, v) { if (v !== '' && v != null) t.appendChild(el('tr', null, [el('td', { text: k }), el('td', null, [el('pre', { text: String(v) })])])); }
    function when(u) { return u ? new Date(u / 1e6).toISOString() : ''; }
    row('file', m.file);
    row('host', m.hostname);
    row('kernel', m.kernel);
    row('architecture', m.arch);
    row('vsyscall mode', m.vsyscall_mode);
    row('recorded by', (m.command || []).join(' '));
    row('started', when(m.start));
    row('ended', m.end ? when(m.end) : 'unknown (no trailer)');
    row('events span', secs(m.span));
    row('events', num(m.events));
    row('events by kind', Object.keys(m.by_kind || {}).sort().map(function (k) { return k + ' ' + num(m.by_kind[k]); }).join(', '));
    row('syscalls with stacks', num(m.stacks || 0));
    row('events lost (trailer)', num(m.drops || 0));
    var per = (m.drops_per_cpu || []).map(function (n, i) { return n ? 'cpu' + i + ' ' + num(n) : ''; }).filter(Boolean).join(', ');
    row('lost per CPU', per);
    row('drops reported in the stream', num(m.drop_events || 0));
    if (m.warning) row('warning', m.warning);
    Object.keys(m.facts || {}).sort().forEach(function (k) { row('fact: ' + k, m.facts[k]); });
    row('report made', when(m.generated) + (m.version ? ' by sysray ' + m.version : ''));
    s.appendChild(t);
    s.setAttribute('data-rendered', t.children.length);
  })();

  function show() {
    // #flame-off: a view, then what in it (here, which flame graph).
    var parts = (location.hash || '').slice(1).split('-'), h = parts[0];
    if (VIEWS.indexOf(h) < 0) h = 'findings';
    VIEWS.forEach(function (v) { document.getElementById('view-' + v).hidden = v !== h; });
    [].forEach.call(document.querySelectorAll('#nav a'), function (a) { a.className = a.getAttribute('href') === '#' + h ? 'active' : ''; });
    if (redraw[h]) redraw[h](parts[1]);
    window.scrollTo(0, 0);
  }
  window.addEventListener('hashchange', show);
  var resizing = 0;
  window.addEventListener('resize', function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () { var h = (location.hash || '#findings').slice(1).split('-')[0]; if (redraw[h]) redraw[h](); }, 150);
  });
  show();
  document.body.setAttribute('data-events', D.meta.events);
  document.body.setAttribute('data-drops', Math.max(D.meta.drops || 0, D.meta.drop_events || 0));
  document.body.setAttribute('data-ready', '1');
})();
