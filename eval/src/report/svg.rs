//! A small hand-written SVG writer, the one every plot of `ccp-eval` uses (the report's and
//! `iw-web`'s): panels with axes, round-number ticks, grid, labels and a legend. Every
//! coordinate is checked: an element with a non-finite coordinate is skipped, so no `NaN` or
//! infinity ever reaches the file. A [`Style`] says how numbers and a few attributes are
//! written.

use std::fmt::Write as _;

/// Colours per scheme, by the scheme's index in the sorted scheme list.
const PALETTE: [&str; 20] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#3182bd",
    "#e6550d", "#31a354", "#756bb1", "#636363",
];

/// The colour of the scheme at `index` in the sorted scheme list.
pub(crate) fn color(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

/// Escapes text for use in SVG text nodes and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A step of 1, 2 or 5 times a power of ten, near `raw`.
fn nice_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// Formats a tick value with as few decimals as it needs.
pub(crate) fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Formats a fraction as a percentage tick.
pub(crate) fn fmt_pct_tick(v: f64) -> String {
    format!("{}%", fmt_tick(v * 100.0))
}

/// An axis: a value range, linear or logarithmic (base 10).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Axis {
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) log: bool,
    /// Linear ticks at whole numbers only.
    pub(crate) integer: bool,
}

impl Axis {
    /// A linear axis from `lo` to `hi` (widened if empty, `[0, 1]` if not finite).
    pub(crate) fn linear(lo: f64, hi: f64) -> Self {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
            (lo.min(hi), lo.max(hi))
        } else {
            (0.0, 1.0)
        };
        if hi - lo <= 1e-12 * hi.abs().max(1.0) {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            lo -= pad;
            hi += pad;
        }
        Self {
            min: lo,
            max: hi,
            log: false,
            integer: false,
        }
    }

    /// A linear axis covering `values` (finite ones), extended to round ticks.
    pub(crate) fn fit(values: &[f64], include_zero: bool) -> Self {
        let finite = values.iter().copied().filter(|v| v.is_finite());
        let (mut lo, mut hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if lo > hi {
            return Self::linear(0.0, 1.0);
        }
        if include_zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        let a = Self::linear(lo, hi);
        let step = nice_step((a.max - a.min) / 5.0);
        Self::linear((a.min / step).floor() * step, (a.max / step).ceil() * step)
    }

    /// A log axis covering the positive finite `values`, extended to whole decades; linear if
    /// there are none.
    pub(crate) fn fit_log(values: &[f64]) -> Self {
        let pos = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
        let (lo, hi) = pos.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if lo > hi {
            return Self::fit(values, true);
        }
        let dlo = lo.log10().floor();
        let mut dhi = hi.log10().ceil();
        if dhi <= dlo {
            dhi = dlo + 1.0;
        }
        Self {
            min: 10f64.powf(dlo),
            max: 10f64.powf(dhi),
            log: true,
            integer: false,
        }
    }

    /// Position of `v` along the axis, 0 at `min` and 1 at `max`; `None` if it cannot be shown.
    fn frac(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        let f = if self.log {
            if v <= 0.0 {
                return None;
            }
            (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
        } else {
            (v - self.min) / (self.max - self.min)
        };
        f.is_finite().then_some(f)
    }

    /// Tick values: 1-2-5 steps (about 5 ticks) or decades (with 2 and 5 for short log ranges).
    pub(crate) fn ticks(&self) -> Vec<f64> {
        let mut out = Vec::new();
        if self.log {
            let (dlo, dhi) = (
                self.min.log10().floor() as i32,
                self.max.log10().ceil() as i32,
            );
            let mults: &[f64] = if dhi - dlo <= 2 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            for d in dlo..=dhi {
                for m in mults {
                    let v = m * 10f64.powi(d);
                    if v >= self.min * (1.0 - 1e-9) && v <= self.max * (1.0 + 1e-9) {
                        out.push(v);
                    }
                }
            }
        } else {
            let mut step = nice_step((self.max - self.min) / 5.0);
            if self.integer {
                step = step.max(1.0);
            }
            let first = (self.min / step - 1e-9).ceil() as i64;
            let last = (self.max / step + 1e-9).floor() as i64;
            for k in first..=last.min(first + 100) {
                out.push(k as f64 * step);
            }
        }
        out
    }
}

/// A rectangular plotting area in pixels with its two axes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Panel {
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) width: f64,
    pub(crate) height: f64,
    pub(crate) x: Axis,
    pub(crate) y: Axis,
}

impl Panel {
    /// Pixel position of a data point; `None` if it cannot be shown.
    pub(crate) fn map(&self, x: f64, y: f64) -> Option<(f64, f64)> {
        let fx = self.x.frac(x)?;
        let fy = self.y.frac(y)?;
        let p = (
            self.left + fx * self.width,
            self.top + (1.0 - fy) * self.height,
        );
        (p.0.is_finite() && p.1.is_finite()).then_some(p)
    }

    fn right(&self) -> f64 {
        self.left + self.width
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// Tick label formatter.
pub(crate) type TickFmt = fn(f64) -> String;

/// How a document writes numbers and a few attributes: [`Style::REPORT`] for the report's
/// plots, [`Style::COMPACT`] for the `iw-web` plots (each keeps the files it always wrote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    /// Decimals of coordinates, lengths and stroke widths.
    decimals: usize,
    /// Decimals of font sizes.
    font_decimals: usize,
    /// Leaves out what has a default: the background's origin (and it goes on the `<svg>` line),
    /// a line's stroke width of 1, a polyline's opacity and line join, the title's weight (and
    /// it sits at y = 20, not 22), and the space before `>` of a text without extra attributes.
    compact: bool,
}

impl Style {
    /// The report's plots: two decimals, bold title.
    pub(crate) const REPORT: Self = Self {
        decimals: 2,
        font_decimals: 1,
        compact: false,
    };
    /// The `iw-web` plots: one decimal, whole font sizes, defaults left out.
    pub(crate) const COMPACT: Self = Self {
        decimals: 1,
        font_decimals: 0,
        compact: true,
    };
}

/// An SVG document being written.
pub(crate) struct Svg {
    out: String,
    style: Style,
}

fn finite(vals: &[f64]) -> bool {
    vals.iter().all(|v| v.is_finite())
}

impl Svg {
    /// A document of the given size with a white background and a title at the top, in the
    /// report's style.
    pub(crate) fn new(width: f64, height: f64, title: &str) -> Self {
        Self::with_style(width, height, title, Style::REPORT)
    }

    /// A document of the given size with a white background and a title at the top.
    pub(crate) fn with_style(width: f64, height: f64, title: &str, style: Style) -> Self {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="Helvetica, Arial, sans-serif">"#
        );
        if style.compact {
            let _ = writeln!(
                out,
                r#"<rect width="{width:.0}" height="{height:.0}" fill="white"/>"#
            );
        } else {
            let _ = writeln!(
                out,
                "\n<rect x=\"0\" y=\"0\" width=\"{width:.0}\" height=\"{height:.0}\" fill=\"white\"/>"
            );
        }
        let mut s = Self { out, style };
        let (title_y, weight) = if style.compact {
            (20.0, "")
        } else {
            (22.0, "font-weight=\"bold\"")
        };
        s.text(width / 2.0, title_y, title, 15.0, "middle", weight);
        s
    }

    /// Text at (x, y); `anchor` is `start`, `middle` or `end`; `extra` holds more attributes.
    pub(crate) fn text(&mut self, x: f64, y: f64, s: &str, size: f64, anchor: &str, extra: &str) {
        if !finite(&[x, y, size]) {
            return;
        }
        let (dp, fp) = (self.style.decimals, self.style.font_decimals);
        let sep = if extra.is_empty() && self.style.compact {
            ""
        } else {
            " "
        };
        let _ = writeln!(
            self.out,
            r#"<text x="{x:.dp$}" y="{y:.dp$}" font-size="{size:.fp$}" text-anchor="{anchor}"{sep}{extra}>{}</text>"#,
            escape(s)
        );
    }

    /// A straight line.
    pub(crate) fn line(
        &mut self,
        (x1, y1): (f64, f64),
        (x2, y2): (f64, f64),
        stroke: &str,
        width: f64,
    ) {
        if !finite(&[x1, y1, x2, y2, width]) {
            return;
        }
        let dp = self.style.decimals;
        // A width that prints as 1 is the SVG default.
        let width = if self.style.compact && (width - 1.0).abs() < 1e-9 {
            String::new()
        } else {
            format!(r#" stroke-width="{width:.dp$}""#)
        };
        let _ = writeln!(
            self.out,
            r#"<line x1="{x1:.dp$}" y1="{y1:.dp$}" x2="{x2:.dp$}" y2="{y2:.dp$}" stroke="{stroke}"{width}/>"#
        );
    }

    /// A filled circle.
    pub(crate) fn circle(
        &mut self,
        (cx, cy): (f64, f64),
        r: f64,
        fill: &str,
        opacity: f64,
        title: Option<&str>,
    ) {
        if !finite(&[cx, cy, r, opacity]) {
            return;
        }
        let dp = self.style.decimals;
        match title {
            Some(t) => {
                let _ = writeln!(
                    self.out,
                    r#"<circle cx="{cx:.dp$}" cy="{cy:.dp$}" r="{r:.dp$}" fill="{fill}" fill-opacity="{opacity:.2}" stroke="black" stroke-width="0.8"><title>{}</title></circle>"#,
                    escape(t)
                );
            }
            None => {
                let _ = writeln!(
                    self.out,
                    r#"<circle cx="{cx:.dp$}" cy="{cy:.dp$}" r="{r:.dp$}" fill="{fill}" fill-opacity="{opacity:.2}"/>"#
                );
            }
        }
    }

    /// A filled rectangle.
    pub(crate) fn rect(
        &mut self,
        (x, y): (f64, f64),
        (w, h): (f64, f64),
        fill: &str,
        stroke: &str,
    ) {
        if !finite(&[x, y, w, h]) || w < 0.0 || h < 0.0 {
            return;
        }
        let dp = self.style.decimals;
        let _ = writeln!(
            self.out,
            r#"<rect x="{x:.dp$}" y="{y:.dp$}" width="{w:.dp$}" height="{h:.dp$}" fill="{fill}" stroke="{stroke}"/>"#
        );
    }

    /// A polyline through the finite points (skipped if fewer than two); `dash` is a
    /// `stroke-dasharray` value.
    pub(crate) fn polyline(
        &mut self,
        pts: &[(f64, f64)],
        stroke: &str,
        width: f64,
        dash: Option<&str>,
    ) {
        let dp = self.style.decimals;
        let mut coords = String::new();
        let mut n = 0;
        for &(x, y) in pts {
            if x.is_finite() && y.is_finite() {
                let _ = write!(coords, "{x:.dp$},{y:.dp$} ");
                n += 1;
            }
        }
        if n < 2 || !width.is_finite() {
            return;
        }
        let dash = dash
            .map(|d| format!(r#" stroke-dasharray="{d}""#))
            .unwrap_or_default();
        let (opacity, join) = if self.style.compact {
            ("", "")
        } else {
            (r#" stroke-opacity="0.9""#, r#" stroke-linejoin="round""#)
        };
        let _ = writeln!(
            self.out,
            r#"<polyline points="{}" fill="none" stroke="{stroke}"{opacity} stroke-width="{width:.dp$}"{join}{dash}/>"#,
            coords.trim_end()
        );
    }

    /// Frame, grid, ticks and axis labels of a panel.
    /// Without `xfmt` the x axis gets no ticks (e.g. for categories).
    pub(crate) fn axes(
        &mut self,
        p: &Panel,
        xlabel: &str,
        ylabel: &str,
        xfmt: Option<TickFmt>,
        yfmt: TickFmt,
    ) {
        if let Some(xfmt) = xfmt {
            for v in p.x.ticks() {
                if let Some((x, _)) = p.map(v, p.y.min) {
                    self.line((x, p.top), (x, p.bottom()), "#e5e5e5", 1.0);
                    self.line((x, p.bottom()), (x, p.bottom() + 5.0), "#333333", 1.0);
                    self.text(x, p.bottom() + 18.0, &xfmt(v), 11.0, "middle", "");
                }
            }
        }
        for v in p.y.ticks() {
            if let Some((_, y)) = p.map(p.x.min, v) {
                self.line((p.left, y), (p.right(), y), "#e5e5e5", 1.0);
                self.line((p.left - 5.0, y), (p.left, y), "#333333", 1.0);
                self.text(p.left - 8.0, y + 4.0, &yfmt(v), 11.0, "end", "");
            }
        }
        self.rect((p.left, p.top), (p.width, p.height), "none", "#333333");
        self.text(
            p.left + p.width / 2.0,
            p.bottom() + 38.0,
            xlabel,
            12.0,
            "middle",
            "",
        );
        let (lx, ly) = (p.left - 52.0, p.top + p.height / 2.0);
        if finite(&[lx, ly]) {
            let rot = format!(r#"transform="rotate(-90 {lx:.2} {ly:.2})""#);
            self.text(lx, ly, ylabel, 12.0, "middle", &rot);
        }
    }

    /// A legend: a coloured swatch and a label per entry, one per line from (x, y).
    pub(crate) fn legend(&mut self, x: f64, y: f64, entries: &[(String, &'static str)]) {
        for (i, (label, col)) in entries.iter().enumerate() {
            let yy = y + 18.0 * i as f64;
            self.rect((x, yy - 9.0), (12.0, 12.0), col, col);
            self.text(x + 18.0, yy + 1.0, label, 11.0, "start", "");
        }
    }

    /// Centered note inside a panel (e.g. "no data").
    pub(crate) fn note(&mut self, p: &Panel, s: &str) {
        self.text(
            p.left + p.width / 2.0,
            p.top + p.height / 2.0,
            s,
            13.0,
            "middle",
            r##"fill="#888888""##,
        );
    }

    /// The finished document.
    pub(crate) fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        let a = Axis::fit(&[0.3, 87.0], true);
        assert_eq!((a.min, a.max), (0.0, 100.0));
        assert_eq!(a.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let l = Axis::fit_log(&[3.0, 450.0]);
        assert_eq!((l.min, l.max), (1.0, 1000.0));
        assert_eq!(l.ticks(), vec![1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(fmt_tick(0.1 + 0.2), "0.3");
        assert_eq!(fmt_tick(-2.0), "-2");
        assert_eq!(fmt_pct_tick(0.25), "25%");
    }

    /// The `iw-web` plots' format, element by element, as they have always been written.
    #[test]
    fn compact_style_leaves_defaults_out() {
        let mut s = Svg::with_style(100.0, 50.0, "T", Style::COMPACT);
        s.line((1.0, 2.0), (3.0, 4.0), "#e5e5e5", 1.0);
        s.polyline(&[(1.0, 2.0), (3.0, 4.0)], "red", 1.8, Some("2 3"));
        s.rect((1.0, 2.0), (3.0, 4.0), "none", "#333");
        s.text(5.0, 6.0, "x", 11.0, "end", "");
        assert_eq!(
            s.finish(),
            concat!(
                r#"<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50" viewBox="0 0 100 50" font-family="Helvetica, Arial, sans-serif"><rect width="100" height="50" fill="white"/>"#,
                "\n",
                r#"<text x="50.0" y="20.0" font-size="15" text-anchor="middle">T</text>"#,
                "\n",
                r##"<line x1="1.0" y1="2.0" x2="3.0" y2="4.0" stroke="#e5e5e5"/>"##,
                "\n",
                r#"<polyline points="1.0,2.0 3.0,4.0" fill="none" stroke="red" stroke-width="1.8" stroke-dasharray="2 3"/>"#,
                "\n",
                r##"<rect x="1.0" y="2.0" width="3.0" height="4.0" fill="none" stroke="#333"/>"##,
                "\n",
                r#"<text x="5.0" y="6.0" font-size="11" text-anchor="end">x</text>"#,
                "\n</svg>\n"
            )
        );
    }

    #[test]
    fn degenerate_axes_and_points() {
        let a = Axis::fit(&[5.0, 5.0], false);
        assert!(a.min < 5.0 && a.max > 5.0);
        let e = Axis::fit(&[f64::NAN], false);
        assert_eq!((e.min, e.max), (0.0, 1.0));
        let p = Panel {
            left: 0.0,
            top: 0.0,
            width: 100.0,
            height: 100.0,
            x: Axis::fit_log(&[1.0, 10.0]),
            y: e,
        };
        assert!(p.map(0.0, 0.5).is_none());
        assert!(p.map(f64::INFINITY, 0.5).is_none());
        let mut s = Svg::new(100.0, 100.0, "a < b & \"c\"");
        s.polyline(&[(f64::NAN, 1.0), (1.0, 2.0)], "red", 1.0, None);
        s.circle((f64::INFINITY, 0.0), 1.0, "red", 1.0, None);
        let out = s.finish();
        assert!(out.contains("a &lt; b &amp; &quot;c&quot;"));
        assert!(!out.contains("NaN") && !out.contains("inf") && !out.contains("polyline"));
    }
}
