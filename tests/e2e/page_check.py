#!/usr/bin/env python3
"""Checks of the page at / as headless Chromium left it (tests/e2e/page_test.sh).

  page_check.py data  DOM.html SHOT.png N   the sessions 'latency' (values 1..N, quantiles) and
                                            'words' (a planted heavy key) with their numbers
  page_check.py error DOM.html CODE         an API error shown, and no data

The DOM is Chromium's --dump-dom; the screenshot a PNG decoded here with the standard library
(zlib and the five PNG filters), so no imaging package is needed. Exit 0 when every check holds,
1 with the failed checks printed otherwise.
"""
import html.parser
import re
import struct
import sys
import zlib

HEAVY = '<img src=x onerror=alert(1)>'  # planted 5000 times in 'words'; must stay text
UNICODE = 'héavy ✓'                      # planted 2000 times
WORDS_N = 20000
PHIS = 2 + 99 + 2  # the page's φ grid (server/web/page.js)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


class Dom(html.parser.HTMLParser):
    """The parts of the page the checks read: per session its stats (dd[data-k]), its tables'
    rows and its canvases' data-rect; the body's data-*; the error box; every tag seen."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sessions = {}
        self.body = {}
        self.error = None  # (hidden, text)
        self.tags = set()
        self.attrs_seen = set()
        self._session = None
        self._dd = None
        self._table = None
        self._row = None
        self._cell = None
        self._in_error = False
        self._depth = 0
        self._session_depth = None

    VOID = {'br', 'img', 'input', 'meta', 'link', 'hr', 'source', 'area', 'base', 'col', 'embed',
            'wbr', 'track', 'param'}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        self.attrs_seen.update(k for k, _ in attrs)
        if tag not in self.VOID:
            self._depth += 1
        if tag == 'body':
            self.body = a
        if tag == 'div' and a.get('id') == 'error':
            self._in_error = True
            self.error = ['hidden' in a, '']
        if tag == 'section' and 'session' in (a.get('class') or '').split():
            self._session = {'stats': {}, 'tables': {}, 'canvases': {}}
            self.sessions[a.get('data-name')] = self._session
            self._session_depth = self._depth
        s = self._session
        if s is None:
            return
        if tag == 'dd' and 'data-k' in a:
            self._dd = a['data-k']
            s['stats'][self._dd] = ''
        if tag == 'table':
            self._table = s['tables'].setdefault(a.get('class'), [])
        if tag == 'tr' and self._table is not None:
            self._row = []
            self._table.append(self._row)
        if tag in ('td', 'th') and self._row is not None:
            self._cell = ''
        if tag == 'canvas' and a.get('data-plot'):
            # The chart's plot area on the page (x, y, width, height), by chart: cdf, series, hh.
            s['canvases'][a.get('data-chart')] = tuple(int(v) for v in a['data-plot'].split(','))

    def handle_endtag(self, tag):
        if tag not in self.VOID:
            if self._session is not None and self._depth == self._session_depth and tag == 'section':
                self._session = None
            self._depth -= 1
        if tag == 'div' and self._in_error:
            self._in_error = False
        if tag == 'dd':
            self._dd = None
        if tag in ('td', 'th') and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None
        if tag == 'tr':
            self._row = None
        if tag == 'table':
            self._table = None

    def handle_data(self, data):
        if self._in_error and self.error is not None:
            self.error[1] += data
        if self._session is None:
            return
        if self._dd is not None:
            self._session['stats'][self._dd] += data
        if self._cell is not None:
            self._cell += data


def parse_dom(path):
    dom = Dom()
    with open(path, encoding='utf-8') as f:
        dom.feed(f.read())
    return dom


def png_rgb(path):
    """(width, height, rows): rows[y] is a bytes object of width*channels samples."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError(f'{path} is not a PNG')
    pos, idat, header = 8, b'', None
    while pos < len(data):
        length, kind = struct.unpack('>I4s', data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b'IHDR':
            header = struct.unpack('>IIBBBBB', chunk)
        elif kind == b'IDAT':
            idat += chunk
        elif kind == b'IEND':
            break
    width, height, depth, color, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace != 0:
        raise ValueError(f'PNG depth {depth}, color type {color}, interlace {interlace}: '
                         'only 8-bit RGB/RGBA, not interlaced, is decoded here')
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = prev[x]
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + ((left + up) >> 1)) & 255
            elif kind == 4:
                ul = prev[x - channels] if x >= channels else 0
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                line[x] = (line[x] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def colored_pixels(shot, rect):
    """Pixels inside rect (x, y, w, h) that are neither white, grey nor black: the plot's lines,
    band and bars (axes, grid and text are drawn in greys)."""
    width, height, channels, rows = shot
    x0, y0, w, h = rect
    n = 0
    for y in range(max(0, y0), min(height, y0 + h)):
        row = rows[y]
        for x in range(max(0, x0), min(width, x0 + w)):
            r, g, b = row[x * channels:x * channels + 3]
            if max(r, g, b) - min(r, g, b) > 40:
                n += 1
    return n


def number(text):
    m = re.match(r'\s*(-?[0-9.e+]+)', text)
    return float(m.group(1)) if m else None


def check_data(dom, shot_path, n):
    check(dom.body.get('data-state') == 'ready', f"body data-state is {dom.body.get('data-state')!r}, want 'ready'")
    refreshes = int(dom.body.get('data-refreshes') or 0)
    check(refreshes >= 2, f'{refreshes} refreshes in the virtual time given, want >= 2 (updating)')
    check(dom.error is not None and dom.error[0], f'the error box shows: {dom.error}')
    check(set(dom.sessions) == {'latency', 'words'}, f'sessions on the page: {sorted(dom.sessions)}')
    lat, words = dom.sessions.get('latency'), dom.sessions.get('words')
    if lat is None or words is None:
        return
    # N exactly, memory positive.
    check(lat['stats'].get('n') == str(n), f"latency N is {lat['stats'].get('n')!r}, want {n}")
    check(words['stats'].get('n') == str(WORDS_N), f"words N is {words['stats'].get('n')!r}, want {WORDS_N}")
    for name, s in (('latency', lat), ('words', words)):
        m = re.search(r'(\d+) B\)?$', s['stats'].get('memory', ''))
        check(m and int(m.group(1)) > 0, f"{name} memory is {s['stats'].get('memory')!r}")
    # p50/p90/p99 within the rank bound: the values are 1..n, so the value v has rank v.
    bound = number(lat['stats'].get('rank_error', ''))
    check(bound is not None and 0 < bound < n / 10, f"latency rank error is {lat['stats'].get('rank_error')!r}")
    bound = bound or 0
    for key, phi in (('p50', 0.5), ('p90', 0.9), ('p99', 0.99)):
        v = number(lat['stats'].get(key, ''))
        check(v is not None and abs(v - phi * n) <= bound + 1,
              f"latency {key} shown as {lat['stats'].get(key)!r}: not within {bound} of {phi * n}")
    # The curve: every φ of the grid, each value's true rank inside its band.
    cdf = lat['tables'].get('cdf-points', [])[1:]
    check(len(cdf) == PHIS, f'{len(cdf)} points on the quantile curve, want {PHIS}')
    for phi, value, lo, hi in (r for r in cdf if len(r) == 4):
        rank = float(value) / n
        check(float(lo) - 1e-5 <= rank <= float(hi) + 1e-5,
              f'φ={phi}: value {value} (rank {rank}) outside its band [{lo}, {hi}]')
        check(abs(rank - float(phi)) <= bound / n + 1e-5, f'φ={phi}: value {value} beyond εN')
    # The series: one row per refresh, each p50 within the bound.
    series = lat['tables'].get('series-points', [])[1:]
    check(len(series) >= 2, f'{len(series)} points in the p50/p90/p99 series, want >= 2')
    for row in series:
        check(abs(float(row[1]) - n / 2) <= bound + 1, f'series row {row}: p50 beyond the bound')
    check(len(lat['tables'].get('hh-points', [])) == 0, 'latency (no frequency summary) has heavy hitters')
    # Heavy hitters: the planted keys, as text, with bounds around their true counts.
    hh = {r[0]: r[1:] for r in words['tables'].get('hh-points', [])[1:]}
    for key, f in ((HEAVY, 5000), (UNICODE, 2000)):
        if check(key in hh, f'heavy key {key!r} not among the bars: {list(hh)[:10]}'):
            est, lo, hi = (int(x) for x in hh[key])
            check(lo <= f <= hi and lo <= est <= hi, f'{key!r}: {est} [{lo}, {hi}] misses {f}')
    check(len(words['tables'].get('cdf-points', [])) == 0, 'words (no quantiles) has a curve')
    # No markup from the data: the planted key's <img> never became an element.
    check('img' not in dom.tags and 'onerror' not in dom.attrs_seen,
          'the key <img src=x onerror=...> was inserted as HTML')

    # The screenshot: the plots are drawn, not blank.
    shot = png_rgb(shot_path)
    print(f'screenshot {shot[0]}x{shot[1]}')
    # Inside the axes only grid lines and the data are drawn; the grid is grey, so coloured
    # pixels there are the data (a curve 2 px wide across the plot is ~1000 of them).
    for name, s, chart, what, least in (('latency', lat, 'cdf', 'quantile curve', 500),
                                         ('latency', lat, 'series', 'p50/p90/p99 series', 500),
                                         ('words', words, 'hh', 'heavy hitters bars', 5000)):
        rect = s['canvases'].get(chart)
        if not check(rect is not None and rect[2] > 50 and rect[3] > 50,
                     f'{name}: no plot area for the {what} ({s["canvases"]})'):
            continue
        colored = colored_pixels(shot, rect)
        print(f'{name} {what}: plot area {rect}, {colored} colored pixels')
        check(colored >= least, f'{name} {what}: {colored} colored pixels in its plot area {rect}, want >= {least}')


def check_error(dom, code):
    check(dom.body.get('data-state') == 'error', f"body data-state is {dom.body.get('data-state')!r}, want 'error'")
    check(dom.error is not None and not dom.error[0], 'the error box is hidden')
    text = dom.error[1] if dom.error else ''
    check(code in text, f'the error box says {text!r}, want {code!r} in it')
    check(not dom.sessions, f'sessions shown under an error: {sorted(dom.sessions)}')


def main():
    mode, dom_path = sys.argv[1], sys.argv[2]
    dom = parse_dom(dom_path)
    if mode == 'data':
        check_data(dom, sys.argv[3], int(sys.argv[4]))
    elif mode == 'error':
        check_error(dom, sys.argv[3])
    else:
        sys.exit(f'unknown mode {mode}')
    for f in failures:
        print('FAIL:', f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
