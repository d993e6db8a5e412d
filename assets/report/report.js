// report.html's script: draws the charts servetop computed (the JSON in #figures, the same
// series as the PNGs) with uPlot, the per-request timeline (#timeline-data), sorts tables, and
// highlights what a finding rests on. Everything it reads is inline; it fetches nothing.
(function () {
  "use strict";
  const data = (id) => {
    const el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  };
  const figures = data("figures") || [];
  const levelPoints = data("level-points") || {};
  const timeline = data("timeline-data");
  const charts = []; // { el, make, plot }
  let highlight = {}; // x axis name -> x values to mark

  const num = (v) => {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    const a = Math.abs(v);
    if (a >= 1000) return Math.round(v).toString();
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(2);
  };

  // A line per series on one x grid (uPlot's aligned data), gaps where a line has no point.
  function aligned(lines) {
    const xs = [...new Set(lines.flatMap((l) => l.points.map((p) => p[0])))].sort((a, b) => a - b);
    const cols = lines.map((l) => {
      const at = new Map(l.points.map((p) => [p[0], p[1]]));
      return xs.map((x) => (at.has(x) ? at.get(x) : null));
    });
    return [xs, ...cols];
  }

  // Draws `fn(ctx, u)` on the plot's canvas, clipped to its plotting area.
  function overlay(u, fn) {
    const ctx = u.ctx;
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    fn(ctx);
    ctx.restore();
  }

  // Level spans on a time axis: a light band every other level, a level's short name at its
  // start when it does not run into the name before it.
  function levelBands(u, ctx, marks, px) {
    let nameEnd = -Infinity;
    ctx.font = `${11 * px}px system-ui, sans-serif`;
    marks.forEach(([x, label], i) => {
      const x0 = u.valToPos(x, "x", true);
      const next = marks[i + 1];
      const x1 = next ? u.valToPos(next[0], "x", true) : u.bbox.left + u.bbox.width;
      if (i % 2 === 0) {
        ctx.fillStyle = "rgba(0, 0, 0, 0.045)";
        ctx.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
      }
      // A level begun before the axis's left edge is named at the edge.
      const lx = Math.max(x0, u.bbox.left) + 2 * px;
      const w = ctx.measureText(label).width;
      if (lx > nameEnd && lx < x1) {
        ctx.fillStyle = "#555";
        ctx.fillText(label, lx, u.bbox.top + 12 * px);
        nameEnd = lx + w + 6 * px;
      }
    });
  }

  function marksHook(panel) {
    return (u) => {
      const px = devicePixelRatio || 1;
      overlay(u, (ctx) => {
        ctx.font = `${11 * px}px system-ui, sans-serif`;
        // What a clicked finding rests on: a band at each of its levels' x.
        for (const x of highlight[panel.x] || []) {
          const cx = u.valToPos(x, "x", true);
          ctx.fillStyle = "rgba(255, 196, 0, 0.30)";
          ctx.fillRect(cx - 9 * px, u.bbox.top, 18 * px, u.bbox.height);
        }
        // On a time axis each mark starts a level: the levels as alternating bands, each
        // named where its name fits.
        const timeAxis = panel.x === "seconds";
        if (timeAxis) levelBands(u, ctx, panel.marks, px);
        ctx.setLineDash([5 * px, 4 * px]);
        ctx.lineWidth = px;
        const rules = [...(timeAxis ? [] : panel.marks).map((m) => [...m, 12]), ...panel.events.map((m) => [...m, timeAxis ? 26 : 12])];
        for (const [x, label, dy] of rules) {
          const cx = u.valToPos(x, "x", true);
          ctx.strokeStyle = "rgba(90, 90, 90, 0.7)";
          ctx.beginPath();
          ctx.moveTo(cx, u.bbox.top);
          ctx.lineTo(cx, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.fillStyle = "#444";
          ctx.fillText(label, cx + 3 * px, u.bbox.top + dy * px);
        }
        for (const [y, label] of panel.limits) {
          const cy = u.valToPos(y, "y", true);
          ctx.strokeStyle = "#c0392b";
          ctx.beginPath();
          ctx.moveTo(u.bbox.left, cy);
          ctx.lineTo(u.bbox.left + u.bbox.width, cy);
          ctx.stroke();
          ctx.fillStyle = "#c0392b";
          ctx.fillText(label, u.bbox.left + 4 * px, cy - 4 * px);
        }
        ctx.setLineDash([]);
        // Error bars: a 95 % interval across --repeat runs.
        panel.lines.forEach((l, i) => {
          if (!u.series[i + 1].show) return;
          ctx.strokeStyle = l.color;
          for (const [x, lo, hi] of l.errors) {
            const cx = u.valToPos(x, "x", true);
            const y0 = u.valToPos(Math.max(lo, u.scales.y.min), "y", true);
            const y1 = u.valToPos(hi, "y", true);
            ctx.beginPath();
            ctx.moveTo(cx, y0);
            ctx.lineTo(cx, y1);
            ctx.moveTo(cx - 4 * px, y0);
            ctx.lineTo(cx + 4 * px, y0);
            ctx.moveTo(cx - 4 * px, y1);
            ctx.lineTo(cx + 4 * px, y1);
            ctx.stroke();
          }
        });
      });
    };
  }

  function xAxisValues(panel) {
    const whole = (v) => (Math.abs(v - Math.round(v)) < 1e-6 && v >= 0.5 ? String(Math.round(v)) : "");
    if (panel.x === "concurrency") return (u, vals) => vals.map(whole);
    if (panel.x === "context_k") return (u, vals) => vals.map((v) => `${+v.toFixed(1)}K`);
    if (panel.x === "turn") return (u, vals) => vals.map(whole);
    return (u, vals) => vals.map((v) => num(v));
  }

  // A log axis's ticks: the whole powers of `base` within its range.
  const powers = (base) => (u, axis, min, max) => {
    const out = [];
    for (let p = Math.ceil(Math.log(min) / Math.log(base) - 1e-9); base ** p <= max * (1 + 1e-9); p++) out.push(base ** p);
    return out;
  };

  function panelChart(el, panel, opts) {
    const lines = panel.lines.filter((l) => l.points.length > 0);
    const points = lines.reduce((n, l) => n + l.points.length, 0);
    el.dataset.points = String(points);
    const head = document.createElement("div");
    head.className = "chart-head";
    head.innerHTML = `<span class="chart-title"></span>`;
    head.firstChild.textContent = panel.title;
    el.appendChild(head);
    if (points === 0) {
      el.classList.add("empty");
      const p = document.createElement("p");
      p.className = "empty-note";
      p.textContent = panel.empty || "nothing to draw";
      el.appendChild(p);
      return null;
    }
    const positive = lines.every((l) => l.points.every((p) => p[1] > 0));
    const state = { logY: panel.y_log && positive, logX: panel.x === "concurrency" };
    const buttons = [];
    if (positive) buttons.push(["logY", "log y"]);
    if (panel.x === "concurrency" || panel.x === "rate" || panel.x === "context_k") buttons.push(["logX", "log x"]);
    for (const [key, label] of buttons) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "toggle";
      b.textContent = label;
      b.setAttribute("aria-pressed", String(state[key]));
      b.addEventListener("click", () => {
        state[key] = !state[key];
        b.setAttribute("aria-pressed", String(state[key]));
        entry.plot.destroy();
        entry.plot = make();
      });
      head.appendChild(b);
    }
    const holder = document.createElement("div");
    el.appendChild(holder);
    const make = () => {
      const xLog = state.logX && lines.every((l) => l.points.every((p) => p[0] > 0));
      const o = {
        width: Math.max(260, holder.clientWidth || el.clientWidth || 400),
        height: opts.height || 300,
        scales: {
          // As the PNG: a linear x from 0 (or below, for negative values) to 5 % past the
          // last point; a log x a step wider than the points each side.
          x: xLog
            ? { time: false, distr: 3, log: panel.x === "concurrency" ? 2 : 10, range: (u, min, max) => [min / 1.3, max * 1.3] }
            : { time: false, range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.05 : max + 1] },
          y: state.logY ? { distr: 3, log: 10 } : { range: (u, min, max) => [0, panel.y_top || (max > 0 ? max * 1.1 : 1)] },
        },
        axes: [
          { label: panel.x_label, values: xAxisValues(panel), size: 40, splits: xLog ? powers(panel.x === "concurrency" ? 2 : 10) : undefined },
          { label: panel.y_label + (state.logY ? " (log)" : ""), size: 60, values: (u, vals) => vals.map(num) },
        ],
        series: [
          { label: panel.x_label.split(" (")[0], value: (u, v) => num(v) },
          ...lines.map((l) => ({
            label: l.name || panel.title,
            stroke: l.color,
            width: 2,
            dash: l.dashed ? [8, 5] : undefined,
            spanGaps: true,
            points: { show: l.points.length <= 40, size: 6, fill: l.color },
            value: (u, v) => num(v),
          })),
        ],
        legend: { live: true },
        cursor: { drag: { x: true, y: false } },
        hooks: { draw: [marksHook({ ...panel, lines })] },
      };
      return new uPlot(o, aligned(lines), holder);
    };
    const entry = { el, make, plot: make() };
    return entry;
  }

  // The per-request swim lanes: a rectangle a phase, a lane a row.
  function timelineChart(el) {
    const t = timeline;
    const c = t.columns || {};
    const n = (c.lane || []).length;
    el.dataset.points = String(n);
    if (n === 0) {
      el.classList.add("empty");
      el.textContent = "No request was recorded.";
      return null;
    }
    const info = document.createElement("p");
    info.className = "timeline-info";
    info.textContent = "Hover a request for its times.";
    const holder = document.createElement("div");
    el.appendChild(holder);
    el.appendChild(info);
    const sec = (ms) => ms / 1000;
    // The requests' own span of the run's time axis (a run may prepare for a while first).
    const end = c.end.reduce((m, v) => Math.max(m, sec(v)), 0);
    const start = c.sched.reduce((m, v) => Math.min(m, sec(v)), end);
    const pad = Math.max((end - start) * 0.01, 0.001);
    const lanes = t.lanes;
    const laneH = Math.max(1, Math.min(8, Math.floor(480 / lanes)));
    const draw = (u) => {
      overlay(u, (ctx) => {
        levelBands(u, ctx, t.marks || [], devicePixelRatio || 1);
        const h = Math.max(1, u.valToPos(0, "y", true) - u.valToPos(1, "y", true));
        const rect = (a, b, lane, color) => {
          if (b === null || a === null || b < a) return;
          const x0 = u.valToPos(sec(a), "x", true);
          const x1 = u.valToPos(sec(b), "x", true);
          const y = u.valToPos(lane + 1, "y", true);
          ctx.fillStyle = color;
          ctx.fillRect(x0, y + h * 0.1, Math.max(1, x1 - x0), Math.max(1, h * 0.8));
        };
        for (let i = 0; i < n; i++) {
          const lane = c.lane[i];
          if (!c.ok[i]) {
            rect(c.send[i], c.end[i], lane, "#c0392b");
            continue;
          }
          rect(c.sched[i], c.send[i], lane, "#9e9e9e");
          rect(c.send[i], c.first[i] ?? c.end[i], lane, "#d55e00");
          if (c.first[i] !== null) rect(c.first[i], c.end[i], lane, "#0072b2");
        }
      });
    };
    const make = () =>
      new uPlot(
        {
          width: Math.max(300, holder.clientWidth || el.clientWidth || 600),
          height: Math.min(520, Math.max(180, lanes * laneH + 80)),
          scales: { x: { time: false, range: [Math.max(0, start - pad), end + pad] }, y: { range: [0, lanes] } },
          axes: [
            { label: "seconds since the run started", values: (u, v) => v.map(num) },
            { label: "lane", size: 50, values: (u, v) => v.map((x) => (Number.isInteger(x) ? String(x) : "")) },
          ],
          series: [{ label: "s" }, { label: "requests", stroke: "transparent", points: { show: false } }],
          legend: { show: false },
          cursor: { drag: { x: true, y: false }, points: { show: false } },
          hooks: {
            draw: [draw],
            setCursor: [
              (u) => {
                const { left, top } = u.cursor;
                if (left === undefined || left < 0) return;
                const x = u.posToVal(left, "x") * 1000;
                const lane = Math.floor(u.posToVal(top, "y"));
                for (let i = 0; i < n; i++) {
                  if (c.lane[i] === lane && c.sched[i] <= x && x <= c.end[i]) {
                    const wait = c.send[i] - c.sched[i];
                    const ttft = c.first[i] === null ? null : c.first[i] - c.send[i];
                    const dec = c.first[i] === null ? null : c.end[i] - c.first[i];
                    info.textContent = `${t.levels[c.level[i]] || "level " + c.level[i]}: sent at ${num(sec(c.send[i]))} s; wait ${num(wait)} ms, TTFT ${num(ttft)} ms, decode ${num(dec)} ms${c.ok[i] ? "" : " (failed or stopped)"}`;
                    return;
                  }
                }
              },
            ],
          },
        },
        [
          [Math.max(0, start - pad), end + pad],
          [null, null],
        ],
        holder,
      );
    return { el, make, plot: make() };
  }

  function drawAll() {
    const byName = new Map(figures.map((f) => [f.name, f.spec]));
    for (const el of document.querySelectorAll(".chart[data-figure]")) {
      const spec = byName.get(el.dataset.figure);
      const panel = spec && spec.panels[+el.dataset.panel];
      if (!panel) continue;
      const entry = panelChart(el, panel, {});
      if (entry) charts.push(entry);
    }
    const tl = document.querySelector('.chart[data-chart="requests"]');
    if (tl && timeline) {
      const entry = timelineChart(tl);
      if (entry) charts.push(entry);
    }
  }

  // Tables sort by a click on a column's head: numbers by their first number, text as text.
  function sortable() {
    const key = (td) => {
      const m = (td ? td.textContent : "").replace(/,/g, "").match(/-?\d+(\.\d+)?(e-?\d+)?/i);
      return m ? parseFloat(m[0]) : null;
    };
    for (const table of document.querySelectorAll("table.sortable")) {
      const ths = table.querySelectorAll("thead th");
      ths.forEach((th, col) => {
        th.tabIndex = 0;
        th.title = "sort by this column";
        const sort = () => {
          const dir = th.dataset.sort === "asc" ? "desc" : "asc";
          ths.forEach((h) => delete h.dataset.sort);
          th.dataset.sort = dir;
          const body = table.tBodies[0];
          const rows = [...body.rows];
          const sign = dir === "asc" ? 1 : -1;
          rows.sort((a, b) => {
            const x = key(a.cells[col]);
            const y = key(b.cells[col]);
            if (x !== null && y !== null) return sign * (x - y);
            if (x === null && y === null) {
              return sign * (a.cells[col] || {}).textContent.localeCompare((b.cells[col] || {}).textContent);
            }
            return x === null ? 1 : -1;
          });
          rows.forEach((r) => body.appendChild(r));
        };
        th.addEventListener("click", sort);
        th.addEventListener("keydown", (e) => e.key === "Enter" && sort());
      });
    }
  }

  // A click on a finding: its levels' table rows and chart x highlighted; again to clear.
  function findings() {
    const items = document.querySelectorAll("li.finding");
    const select = (li) => {
      const on = !li.classList.contains("active");
      items.forEach((x) => x.classList.remove("active"));
      document.querySelectorAll("tr.hl").forEach((r) => r.classList.remove("hl"));
      highlight = {};
      if (on) {
        li.classList.add("active");
        const levels = JSON.parse(li.dataset.levels || "[]");
        for (const row of document.querySelectorAll("tr[data-level]")) {
          if (levels.includes(row.dataset.level)) row.classList.add("hl");
        }
        for (const l of levels) {
          for (const [axis, x] of levelPoints[l] || []) (highlight[axis] = highlight[axis] || []).push(x);
        }
      }
      document.body.dataset.highlighted = String(document.querySelectorAll("tr.hl").length);
      charts.forEach((c) => c.plot.redraw(false));
    };
    items.forEach((li) => {
      li.addEventListener("click", () => select(li));
      li.addEventListener("keydown", (e) => e.key === "Enter" && select(li));
    });
  }

  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => {
      for (const c of charts) {
        c.plot.destroy();
        c.plot = c.make();
      }
    }, 150);
  });

  drawAll();
  sortable();
  findings();
  // uPlot paints in a microtask after each chart is made: a timer runs after all of them.
  setTimeout(() => {
    document.body.dataset.drawMs = performance.now().toFixed(1);
    document.body.dataset.drawn = "1";
  }, 0);
})();
