// The page at / (server/web_page.h): the caller's sessions, asked of the JSON API under /v1
// (README: HTTP/JSON API) every few seconds and drawn with Chart.js (window.Chart, Debian's
// libjs-chart.js, served from /static/chart.js).
//
// Everything the API returns goes into the DOM as text (textContent, attribute values), never
// as HTML: session names and string keys are whatever bytes someone ingested. Chart.js draws
// keys on a canvas, where markup means nothing.
//
// The token, if the server has a tokens file, comes from the field in the header or from the URL
// fragment (/#token=TOKEN: a fragment never reaches the server, and the page removes it from the
// address bar); it is kept in sessionStorage (this tab only) and sent as
// "Authorization: Bearer TOKEN".
'use strict';

(() => {
  // The quantile curve's φ grid; it holds 0.5, 0.9 and 0.99 exactly (i / 100 is the double
  // nearest to the decimal, as the server parses "0.99"), so one request per session serves the
  // curve and the p50/p90/p99 series.
  const PHIS = [0.001, 0.005];
  for (let i = 1; i <= 99; ++i) PHIS.push(i / 100);
  PHIS.push(0.995, 0.999);
  const SERIES = [[0.5, 'p50', 'rgb(54, 162, 235)'], [0.9, 'p90', 'rgb(255, 159, 64)'],
                  [0.99, 'p99', 'rgb(220, 53, 69)']];
  const MAX_SERIES_POINTS = 900;  // 30 min at the default 2 s
  const MAX_BARS = 20;
  // Summaries that may answer heavy hitters; the server says when one cannot (400), shown as a
  // note on the session.
  const FREQUENCY_KINDS = new Set(['lossy_counting', 'misra_gries', 'count_min', 'fcm', 'pbf',
                                   'count_sketch']);
  const TOKEN_KEY = 'streamstats.token';
  const opened = performance.now();

  const $ = (id) => document.getElementById(id);
  const sessions = new Map();  // name -> the session's card and charts
  let timer = null;
  let running = false;
  let refreshes = 0;

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
    toString() {
      return `${this.status ? 'HTTP ' + this.status + ' ' : ''}${this.code}: ${this.message}`;
    }
  }

  // ---- token ----
  function takeTokenFromFragment() {
    const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!m) return;
    let token = m[1];
    try {
      token = decodeURIComponent(token);
    } catch (e) { /* keep it as written */ }
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, '', location.pathname + location.search);
  }
  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';
  function showTokenState() {
    $('token').value = '';
    $('token').placeholder = token() ? 'set (hidden)' : 'none';
  }

  // ---- the API ----
  async function api(path) {
    const headers = {};
    if (token()) headers.Authorization = 'Bearer ' + token();
    let r;
    try {
      r = await fetch(path, {headers, cache: 'no-store', credentials: 'omit'});
    } catch (e) {
      throw new ApiError(0, 'UNAVAILABLE', `the request failed: ${e.message}`);
    }
    const text = await r.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch (e) { /* not JSON: said below */ }
    if (!r.ok) {
      throw new ApiError(r.status, (body && body.code) || r.statusText,
                         (body && body.message) || text);
    }
    if (body === null) throw new ApiError(r.status, 'BAD_RESPONSE', 'the answer is not JSON');
    return body;
  }
  const sessionPath = (name, action, query) =>
      `/v1/sessions/${encodeURIComponent(name)}/${action}?${query}`;

  // ---- text ----
  function fmt(v) {
    if (typeof v === 'string') return v;  // 64-bit integers arrive as strings: exact
    if (!Number.isFinite(v)) return String(v);
    return Number.isInteger(v) && Math.abs(v) < 1e15 ? String(v) : String(Number(v.toPrecision(6)));
  }
  function fmtBytes(s) {
    const n = Number(s);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n, u = 0;
    while (v >= 1024 && u < units.length - 1) {
      v /= 1024;
      ++u;
    }
    return u === 0 ? `${s} B` : `${v.toFixed(1)} ${units[u]} (${s} B)`;
  }
  // A heavy hitter's key as text: bytes (base64 in proto JSON) decoded as UTF-8.
  function keyText(item) {
    if (item.string_key !== undefined) {
      const raw = atob(item.string_key);
      const bytes = Uint8Array.from(raw, (c) => c.charCodeAt(0));
      return new TextDecoder('utf-8').decode(bytes);
    }
    if (item.uint64_key !== undefined) return String(item.uint64_key);
    if (item.value !== undefined) return fmt(item.value);
    return '?';
  }
  // An element with text children only (strings become text nodes) and attributes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);  // a string is appended as a text node
    return e;
  }
  function setRows(table, header, rows) {
    table.replaceChildren(el('tr', {}, ...header.map((h) => el('th', {}, h))));
    for (const row of rows) {
      table.append(el('tr', {}, ...row.map(([text, cls]) => el('td', cls ? {class: cls} : {}, text))));
    }
  }

  // ---- errors ----
  function showError(err) {
    const box = $('error');
    if (!err) {
      box.hidden = true;
      box.textContent = '';
      return;
    }
    let hint = '';
    if (err.status === 401) hint = '\nGive a token above (or open this page as /#token=TOKEN).';
    if (err.status === 403) hint = '\nThis token may not read these sessions.';
    box.textContent = String(err) + hint;
    box.hidden = false;
  }

  // ---- charts ----
  const baseOptions = (xTitle, yTitle) => ({
    animation: false,
    responsive: true,
    maintainAspectRatio: false,
    interaction: {mode: 'nearest', intersect: false},
    scales: {
      x: {type: 'linear', title: {display: true, text: xTitle}},
      y: {title: {display: true, text: yTitle}},
    },
  });
  function cdfChart(canvas) {
    const options = baseOptions('value', 'φ');
    options.scales.y.min = 0;
    options.scales.y.max = 1;
    // The band's lower edge needs no legend entry.
    options.plugins = {legend: {labels: {filter: (item) => item.datasetIndex !== 1}}};
    const band = 'rgba(54, 162, 235, 0.3)';
    return new Chart(canvas, {
      type: 'line',
      data: {datasets: [
        {label: 'rank interval / N', data: [], fill: '+1', backgroundColor: band,
         borderColor: band, borderWidth: 1, pointRadius: 0},
        {label: 'rank lower / N', data: [], fill: false, borderColor: band, borderWidth: 1,
         pointRadius: 0},
        {label: 'φ', data: [], fill: false, borderColor: 'rgb(54, 162, 235)',
         backgroundColor: 'rgb(54, 162, 235)', borderWidth: 2, pointRadius: 0},
      ]},
      options,
    });
  }
  function seriesChart(canvas) {
    return new Chart(canvas, {
      type: 'line',
      data: {datasets: SERIES.map(([, label, color]) => ({
        label, data: [], fill: false, borderColor: color, backgroundColor: color, borderWidth: 2,
        pointRadius: 1,
      }))},
      options: baseOptions('seconds since this page opened', 'value'),
    });
  }
  function barChart(canvas) {
    const options = baseOptions('estimated count', '');
    options.indexAxis = 'y';
    options.scales = {x: {beginAtZero: true, title: {display: true, text: 'estimated count'}},
                      y: {type: 'category', ticks: {autoSkip: false}}};
    options.plugins = {legend: {display: false}};
    return new Chart(canvas, {
      type: 'bar',
      data: {labels: [], datasets: [{label: 'estimate', data: [],
                                     backgroundColor: 'rgba(75, 192, 192, 0.7)'}]},
      options,
    });
  }

  // ---- one session's card ----
  function chartBox(cls, title) {
    const canvas = el('canvas', {'data-chart': cls});
    const box = el('div', {class: 'chart ' + cls}, el('h3', {}, title),
                   el('div', {class: 'canvas'}, canvas));
    box.hidden = true;
    return {box, canvas};
  }
  function card(name) {
    let s = sessions.get(name);
    if (s) return s;
    s = {name, stats: {}, series: []};
    const dl = el('dl', {class: 'stats'});
    s.quantileStats = [];  // shown for sessions with a quantiles summary only
    for (const [k, label] of [['n', 'N'], ['memory', 'memory'], ['p50', 'p50'], ['p90', 'p90'],
                              ['p99', 'p99'], ['rank_error', 'rank error ≤'],
                              ['backend', 'backend']]) {
      s.stats[k] = el('dd', {'data-k': k}, '–');
      const item = el('div', {}, el('dt', {}, label), s.stats[k]);
      if (['p50', 'p90', 'p99', 'rank_error'].includes(k)) s.quantileStats.push(item);
      dl.append(item);
    }
    s.summaries = el('p', {class: 'summaries'});
    s.note = el('p', {class: 'note', role: 'status'});
    s.note.hidden = true;
    s.cdf = chartBox('cdf', 'Quantiles: φ by value, with the rank error band');
    s.trend = chartBox('series', 'p50 / p90 / p99 since this page opened');
    s.hh = chartBox('hh', 'Heavy hitters');
    s.tables = {cdf: el('table', {class: 'cdf-points'}), series: el('table', {class: 'series-points'}),
                hh: el('table', {class: 'hh-points'})};
    const details = el('details', {}, el('summary', {}, 'The plotted points'),
                       s.tables.cdf, s.tables.series, s.tables.hh);
    s.section = el('section', {class: 'session', 'data-name': name}, el('h2', {}, name), dl,
                   s.summaries, s.note, el('div', {class: 'charts'}, s.cdf.box, s.trend.box,
                                                s.hh.box), details);
    sessions.set(name, s);
    return s;
  }
  function drop(name) {
    const s = sessions.get(name);
    for (const c of [s.cdfChart, s.trendChart, s.hhChart]) if (c) c.destroy();
    s.section.remove();
    sessions.delete(name);
  }
  function dropAll() {
    for (const name of [...sessions.keys()]) drop(name);
  }

  function showInfo(s, info) {
    s.stats.n.textContent = fmt(info.count);
    s.stats.memory.textContent = fmtBytes(info.memory_bytes);
    s.stats.backend.textContent = info.backend || '–';
    s.summaries.textContent = 'summaries: ' + (info.summaries || []).map(
        (x) => `${x.kind}(${x.parameters}) ${fmtBytes(x.memory_bytes)}`).join('; ');
  }

  function showQuantiles(s, q) {
    const n = Number(q.count);
    const points = q.quantiles.filter((x) => Number.isFinite(x.value));
    s.stats.rank_error.textContent = `${fmt(q.max_rank_error)} (ε = ${fmt(q.epsilon)})`;
    const at = (phi) => points.find((x) => x.phi === phi);
    for (const [phi, key] of SERIES) {
      const x = at(phi);
      s.stats[key].textContent = x ? fmt(x.value) : '–';
    }
    s.cdf.box.hidden = false;
    s.cdfChart = s.cdfChart || cdfChart(s.cdf.canvas);
    const ds = s.cdfChart.data.datasets;
    ds[0].data = points.map((x) => ({x: x.value, y: Number(x.rank_upper) / n}));
    ds[1].data = points.map((x) => ({x: x.value, y: Number(x.rank_lower) / n}));
    ds[2].data = points.map((x) => ({x: x.value, y: x.phi}));
    // A log value axis (latencies, sizes) where every value is positive.
    const log = $('logx').checked && points.length > 0 && points[0].value > 0;
    s.cdfChart.options.scales.x.type = log ? 'logarithmic' : 'linear';
    s.cdfChart.update('none');
    setRows(s.tables.cdf, ['φ', 'value', 'rank_lower / N', 'rank_upper / N'],
            points.map((x) => [[fmt(x.phi)], [fmt(x.value)], [fmt(Number(x.rank_lower) / n)],
                               [fmt(Number(x.rank_upper) / n)]]));
    // The series: one point per refresh.
    const t = Math.round((performance.now() - opened) / 100) / 10;
    s.series.push([t, ...SERIES.map(([phi]) => (at(phi) ? at(phi).value : NaN))]);
    if (s.series.length > MAX_SERIES_POINTS) s.series.shift();
    s.trend.box.hidden = false;
    s.trendChart = s.trendChart || seriesChart(s.trend.canvas);
    s.trendChart.data.datasets.forEach((d, i) => {
      d.data = s.series.map((p) => ({x: p[0], y: p[i + 1]}));
    });
    s.trendChart.options.scales.y.type =
        log && s.series.every((p) => p.slice(1).every((v) => v > 0)) ? 'logarithmic' : 'linear';
    s.trendChart.update('none');
    setRows(s.tables.series, ['seconds', 'p50', 'p90', 'p99'],
            s.series.map((p) => p.map((v) => [fmt(v)])));
  }

  function showHeavyHitters(s, hh, support) {
    const items = hh.items.slice(0, MAX_BARS);
    s.hh.box.hidden = false;
    s.hh.box.querySelector('h3').textContent =
        `Heavy hitters: support ${support} (${hh.summary}; ${items.length} of ${hh.items.length})`;
    s.hhChart = s.hhChart || barChart(s.hh.canvas);
    const keys = items.map(keyText);
    // Labels are drawn on the canvas; long keys are cut there, whole in the table.
    s.hhChart.data.labels = keys.map((k) => (k.length > 40 ? k.slice(0, 39) + '…' : k));
    s.hhChart.data.datasets[0].data = items.map((x) => Number(x.frequency.estimate));
    s.hhChart.update('none');
    setRows(s.tables.hh, ['key', 'estimate', 'lower', 'upper'],
            items.map((x, i) => [[keys[i], 'key'], [fmt(x.frequency.estimate)],
                                 [fmt(x.frequency.lower)], [fmt(x.frequency.upper)]]));
  }

  // ---- one refresh ----
  async function refreshSession(info, support) {
    const name = info.spec.name;
    const s = card(name);
    showInfo(s, info);
    const kinds = new Set((info.summaries || []).map((x) => x.kind));
    for (const item of s.quantileStats) item.hidden = !kinds.has('quantiles');
    const notes = [];
    if (Number(info.count) === 0) {
      notes.push('no items yet');
    } else {
      if (kinds.has('quantiles')) {
        try {
          showQuantiles(s, await api(sessionPath(name, 'quantiles', 'phi=' + PHIS.join(','))));
        } catch (e) {
          notes.push('quantiles: ' + e);
        }
      }
      if ([...kinds].some((k) => FREQUENCY_KINDS.has(k))) {
        try {
          showHeavyHitters(s, await api(sessionPath(name, 'heavy-hitters', 'support=' + support)),
                           support);
        } catch (e) {
          s.hh.box.hidden = true;
          notes.push('heavy hitters: ' + e);
        }
      }
    }
    s.note.textContent = notes.join('\n');
    s.note.hidden = notes.length === 0;
  }

  async function tick() {
    let list;
    try {
      list = await api('/v1/sessions');
    } catch (e) {
      // No data under an error: a token that stopped working takes the cards away.
      dropAll();
      showError(e);
      $('empty').hidden = true;
      document.body.dataset.state = 'error';
      $('status').textContent = 'failed at ' + new Date().toLocaleTimeString();
      return;
    }
    showError(null);
    const infos = (list.sessions || []).slice().sort(
        (a, b) => (a.spec.name < b.spec.name ? -1 : a.spec.name > b.spec.name ? 1 : 0));
    const names = new Set(infos.map((x) => x.spec.name));
    for (const name of [...sessions.keys()]) if (!names.has(name)) drop(name);
    const support = Number($('support').value) || 0.01;
    // A few sessions at a time: the server serves --http_threads (4) requests at once, and a
    // tenant may have many sessions.
    for (let i = 0; i < infos.length; i += 4) {
      await Promise.all(infos.slice(i, i + 4).map((info) => refreshSession(info, support)));
    }
    // Cards in name order (appending an existing node moves it).
    for (const info of infos) $('sessions').append(sessions.get(info.spec.name).section);
    $('empty').hidden = infos.length > 0;
    ++refreshes;
    document.body.dataset.state = 'ready';
    document.body.dataset.refreshes = String(refreshes);
    $('status').textContent = `${infos.length} session${infos.length === 1 ? '' : 's'}, ` +
                              `updated ${new Date().toLocaleTimeString()}`;
    // Where each chart's plot area (inside the axes, below the legend) is on the page, for
    // tests that look at a screenshot.
    for (const s of sessions.values()) {
      for (const chart of [s.cdfChart, s.trendChart, s.hhChart]) {
        if (!chart || !chart.chartArea) continue;
        const r = chart.canvas.getBoundingClientRect();
        const a = chart.chartArea;
        chart.canvas.dataset.plot = [r.left + scrollX + a.left, r.top + scrollY + a.top,
                                     a.right - a.left, a.bottom - a.top].map(Math.round).join(',');
      }
    }
  }

  async function refresh() {
    clearTimeout(timer);
    // Nothing is asked while the tab is hidden; showing it again refreshes at once.
    if (!running && !document.hidden) {
      running = true;
      try {
        await tick();
      } catch (e) {
        showError(new ApiError(0, 'PAGE_ERROR', String(e && e.stack || e)));
      } finally {
        running = false;
      }
    }
    timer = setTimeout(refresh, Number($('interval').value) || 2000);
  }

  function start() {
    if (typeof Chart === 'undefined') {
      showError(new ApiError(0, 'PAGE_ERROR', 'Chart.js did not load from /static/chart.js'));
      return;
    }
    takeTokenFromFragment();
    window.addEventListener('hashchange', () => {
      takeTokenFromFragment();
      showTokenState();
      refresh();
    });
    showTokenState();
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token').value.trim();
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      showTokenState();
      refresh();
    });
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      showTokenState();
      refresh();
    });
    $('interval').addEventListener('change', refresh);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) refresh();
    });
    $('support').addEventListener('change', refresh);
    $('logx').addEventListener('change', refresh);
    refresh();
  }
  start();
})();
