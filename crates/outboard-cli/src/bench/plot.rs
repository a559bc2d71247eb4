//! SVG line plots for the benches, drawn the way the Gigabit Nectar paper
//! (Steenkiste et al.) drew its measurements: throughput against write size
//! on a logarithmic x axis (one tick per measured size), one curve per
//! system, with further panels below for CPU utilisation and efficiency.
//! No dependencies: the SVG is written by hand, stacked panels in one file.

use std::fmt::Write;

/// One curve: (x, y) points, x > 0 (a log axis).
pub struct Series {
    pub name: String,
    /// Any SVG colour.
    pub color: &'static str,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

pub struct Panel {
    pub title: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

const WIDTH: f64 = 820.0;
const PANEL_H: f64 = 300.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;
const HEADER: f64 = 56.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A byte count as the axis shows it: 64 B, 1 KiB, 1 MiB.
pub fn size_label(x: f64) -> String {
    let b = x.round() as u64;
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// A "nice" step (1, 2 or 5 times a power of ten) near `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let f = raw / p;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * p
}

fn fmt_tick(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else {
        let digits = (-step.log10().floor()) as usize;
        format!("{v:.digits$}")
    }
}

/// The whole figure: a title, a subtitle line, and the panels stacked.
pub fn svg(title: &str, subtitle: &str, panels: &[Panel]) -> String {
    let height = HEADER + panels.len() as f64 * (PANEL_H + TOP + BOTTOM);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" font-size="16" font-weight="bold">{}</text>"#,
        LEFT,
        esc(title)
    );
    let _ = writeln!(
        o,
        r##"<text x="{}" y="42" fill="#444">{}</text>"##,
        LEFT,
        esc(subtitle)
    );
    for (i, p) in panels.iter().enumerate() {
        let top = HEADER + i as f64 * (PANEL_H + TOP + BOTTOM) + TOP;
        panel(&mut o, p, top);
    }
    o.push_str("</svg>\n");
    o
}

fn panel(o: &mut String, p: &Panel, top: f64) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let bottom = top + PANEL_H;
    // x: log2 over the sizes measured.
    let mut xs: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.0))
        .filter(|x| *x > 0.0)
        .collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs.dedup();
    let (mut x0, mut x1) = match (xs.first(), xs.last()) {
        (Some(a), Some(b)) => (a.log2(), b.log2()),
        _ => (0.0, 1.0),
    };
    if x1 - x0 < 1e-9 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    let pad = (x1 - x0) * 0.04;
    let (x0, x1) = (x0 - pad, x1 + pad);
    let sx = |x: f64| LEFT + (x.log2() - x0) / (x1 - x0) * plot_w;
    // y: linear from 0.
    let ymax_data = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    let step = nice_step(ymax_data.max(1e-9) / 5.0);
    let ymax = ((ymax_data / step).ceil().max(1.0)) * step;
    let sy = |y: f64| bottom - (y.clamp(0.0, ymax) / ymax) * PANEL_H;
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        top - 12.0,
        esc(&p.title)
    );
    // Grid and y ticks.
    let mut v = 0.0;
    while v <= ymax + step * 0.5 {
        let y = sy(v);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            fmt_tick(v, step)
        );
        v += step;
    }
    // x ticks: one per measured size.
    for &x in &xs {
        let px = sx(x);
        let _ = writeln!(
            o,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{bottom}" stroke="#eee"/><line x1="{px:.1}" y1="{bottom}" x2="{px:.1}" y2="{:.1}" stroke="#000"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            bottom + 5.0,
            bottom + 18.0,
            esc(&size_label(x))
        );
    }
    // Axes.
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{top}" width="{plot_w:.1}" height="{PANEL_H}" fill="none" stroke="#000"/>"##
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">write size (bytes, log scale)</text>"#,
        LEFT + plot_w / 2.0,
        bottom + 38.0
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        LEFT - 52.0,
        top + PANEL_H / 2.0,
        esc(&p.y_label)
    );
    // Curves and the legend.
    for (k, s) in p.series.iter().enumerate() {
        let pts: Vec<String> = s
            .points
            .iter()
            .filter(|q| q.0 > 0.0 && q.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let dash = if s.dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        if !pts.is_empty() {
            let _ = writeln!(
                o,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
                pts.join(" "),
                s.color
            );
            for q in &pts {
                let (x, y) = q.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(o, r#"<circle cx="{x}" cy="{y}" r="3" fill="{}"/>"#, s.color);
            }
        }
        let ly = top + 14.0 + k as f64 * 18.0;
        let lx = LEFT + plot_w + 14.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 24.0,
            s.color,
            lx + 30.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_steps() {
        assert_eq!(size_label(64.0), "64 B");
        assert_eq!(size_label(65536.0), "64 KiB");
        assert_eq!(size_label(1048576.0), "1 MiB");
        assert_eq!(nice_step(0.23), 0.5);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(10.0), 10.0);
    }

    #[test]
    fn a_figure_is_well_formed() {
        let s = svg(
            "t <x>",
            "sub & more",
            &[Panel {
                title: "Throughput".into(),
                y_label: "Gbit/s".into(),
                series: vec![
                    Series {
                        name: "a".into(),
                        color: "#1f77b4",
                        dashed: false,
                        points: vec![(64.0, 0.1), (1024.0, 2.0)],
                    },
                    Series {
                        name: "b".into(),
                        color: "#d62728",
                        dashed: true,
                        points: vec![(64.0, 0.2), (1024.0, f64::NAN)],
                    },
                ],
            }],
        );
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert!(s.contains("t &lt;x&gt;") && s.contains("sub &amp; more"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("1 KiB"));
        // A single size still gives a usable axis.
        let one = svg(
            "",
            "",
            &[Panel {
                title: String::new(),
                y_label: String::new(),
                series: vec![Series {
                    name: "x".into(),
                    color: "black",
                    dashed: false,
                    points: vec![(4096.0, 0.0)],
                }],
            }],
        );
        assert!(!one.contains("NaN") && !one.contains("inf"));
    }
}
