//! SVG charts (plotters): instructions per op vs N (log-log) and vs flush size.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (x, y) points, x and y > 0.
    pub points: Vec<(f64, f64)>,
}

/// A log-log line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title (engine and date included by the caller).
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Lines.
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 4] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    (hi > 0.0).then(|| (lo / 1.5, hi * 1.5))
}

/// Draws `chart` as an SVG at `path` (log scale on both axes). Fails when there is nothing to draw.
pub fn draw(chart: &Chart, path: &Path) -> Result<PathBuf> {
    let pts = || chart.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = range(pts().map(|p| p.0)).ok_or_else(|| anyhow!("{}: no data", chart.title))?;
    let (y0, y1) = range(pts().map(|p| p.1)).ok_or_else(|| anyhow!("{}: no data", chart.title))?;
    let e = |err: &dyn std::fmt::Display| anyhow!("drawing {}: {err}", path.display());
    let root = SVGBackend::new(path, (820, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|x| e(&x))?;
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&|v| crate::analysis::fmt_f(*v))
        .y_label_formatter(&|v| crate::analysis::fmt_f(*v))
        .draw()
        .map_err(|x| e(&x))?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
            .collect();
        ctx.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        ctx.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, color.filled())),
        )
        .map_err(|x| e(&x))?;
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_title_and_legend() {
        let dir = std::env::temp_dir().join(format!("bench_suite_chart_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let chart = Chart {
            title: "insert: instructions per op".into(),
            x_label: "N".into(),
            y_label: "instructions/op".into(),
            series: vec![
                Series {
                    label: "unbatched".into(),
                    points: vec![(1.0, 4e5), (10.0, 4e5), (1000.0, 3.9e5)],
                },
                Series {
                    label: "batched".into(),
                    points: vec![(1.0, 7e5), (10.0, 9e4), (1000.0, 2e4)],
                },
            ],
        };
        let p = draw(&chart, &dir.join("c.svg")).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("insert: instructions per op"));
        assert!(svg.contains("unbatched") && svg.contains("batched"));
        std::fs::remove_dir_all(&dir).unwrap();
        let empty = Chart {
            series: vec![],
            ..chart
        };
        assert!(draw(&empty, Path::new("/nonexistent/x.svg")).is_err());
    }
}
