//! Charts of the report (plotters), each written as SVG and as PNG: log-log line charts whose
//! axes are labelled at every decade, and at 2 and 5 within a decade when the axis spans less
//! than three decades, with light grid lines at every other integer multiple; every range
//! starts and ends on a labelled tick, so every point lies within the labelled range.
//! [`check_svg`] reads a written SVG back and refuses one with an axis of fewer than two tick
//! labels or a series outside the labelled range; [`draw`] runs it on every chart it writes.
//!
//! Text is drawn with DejaVu Sans (shipped in `assets/`, Bitstream Vera licence), registered
//! with plotters' `ab_glyph` font support, so the PNGs need no system font.

use std::path::{Path, PathBuf};
use std::sync::Once;

use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::coord::combinators::{LogCoord, WithKeyPoints};
use plotters::prelude::*;
use plotters::style::FontStyle;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (x, y) points, x and y > 0.
    pub points: Vec<(f64, f64)>,
}

/// A second y axis: the same values in another unit (`y × factor`), e.g. US$ per million ops
/// beside cycles per op.
#[derive(Debug, Clone, PartialEq)]
pub struct SecondaryAxis {
    /// Its label, with the unit.
    pub label: String,
    /// Value on this axis = value on the primary axis × factor.
    pub factor: f64,
}

/// A log-log line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// Footer: where the figures come from (engine, date, fee schedule), one line per `\n`.
    pub footer: String,
    /// X axis label, with the unit.
    pub x_label: String,
    /// Y axis label, with the unit.
    pub y_label: String,
    /// Optional right-hand axis in another unit.
    pub secondary: Option<SecondaryAxis>,
    /// Lines.
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Size of every chart in pixels.
pub const SIZE: (u32, u32) = (960, 600);

static FONT: Once = Once::new();

/// Registers the shipped font as plotters' `sans-serif` (once per process).
fn register_font() {
    FONT.call_once(|| {
        // The bytes are a valid TrueType font (tested below); a failure would leave plotters
        // without a font, which every draw then reports as an error.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            include_bytes!("../assets/DejaVuSans.ttf"),
        );
    });
}

/// Ticks of a log axis over the data range `[lo, hi]`: the range (rounded out to ticks), the
/// labelled ticks and the light ones.
#[derive(Debug, Clone, PartialEq)]
pub struct LogTicks {
    /// Start of the axis: the largest labelled tick ≤ the smallest value.
    pub lo: f64,
    /// End of the axis: the smallest labelled tick ≥ the largest value.
    pub hi: f64,
    /// Labelled ticks, ascending.
    pub labelled: Vec<f64>,
    /// Light grid lines (unlabelled), ascending.
    pub light: Vec<f64>,
}

/// `m × 10^e` for e in a range, ascending.
fn multiples(mantissas: &[f64], e_lo: i32, e_hi: i32) -> Vec<f64> {
    let mut out = Vec::new();
    for e in e_lo..=e_hi {
        for m in mantissas {
            out.push(m * 10f64.powi(e));
        }
    }
    out
}

/// Close enough to be the same tick (float decades).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The ticks of a log axis covering `[lo, hi]` (both > 0). Decades are labelled; so are 2 and 5
/// times a decade when the rounded range spans fewer than three decades. The range is rounded
/// out to the nearest labelled ticks, so every value lies between two labels.
pub fn log_ticks(lo: f64, hi: f64) -> LogTicks {
    let e_lo = lo.log10().floor() as i32;
    let e_hi = hi.log10().ceil() as i32;
    let fine = e_hi - e_lo < 3;
    let mantissas: &[f64] = if fine { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let all = multiples(mantissas, e_lo - 1, e_hi);
    let start = all
        .iter()
        .copied()
        .filter(|t| *t <= lo || same(*t, lo))
        .fold(f64::NAN, f64::max);
    let end = all
        .iter()
        .copied()
        .find(|t| *t >= hi || same(*t, hi))
        .unwrap_or(10f64.powi(e_hi));
    let mut labelled: Vec<f64> = all
        .iter()
        .copied()
        .filter(|t| (*t >= start || same(*t, start)) && (*t <= end || same(*t, end)))
        .collect();
    if labelled.len() < 2 {
        // One value on a tick: widen to the neighbouring ticks.
        let below = all
            .iter()
            .copied()
            .rfind(|t| *t < start && !same(*t, start));
        let above = multiples(mantissas, e_hi + 1, e_hi + 1)[0];
        labelled = below.into_iter().chain(labelled).chain([above]).collect();
    }
    let (lo, hi) = (labelled[0], *labelled.last().unwrap_or(&labelled[0]));
    let light = multiples(
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
        lo.log10().floor() as i32,
        hi.log10().ceil() as i32,
    )
    .into_iter()
    .filter(|t| *t > lo && *t < hi && !labelled.iter().any(|l| same(*l, *t)))
    .collect();
    LogTicks {
        lo,
        hi,
        labelled,
        light,
    }
}

/// A tick label: `100`, `20,000`, `500 K`, `1 M`, `6.5 T`, `0.05`; [`parse_tick`] reads it back.
pub fn tick_label(v: f64) -> String {
    let (x, unit) = if v >= 1e12 {
        (v / 1e12, " T")
    } else if v >= 1e9 {
        (v / 1e9, " B")
    } else if v >= 1e6 {
        (v / 1e6, " M")
    } else if v >= 1e5 {
        (v / 1e3, " K")
    } else {
        (v, "")
    };
    let text = if x >= 1.0 && same(x, x.round()) {
        crate::analysis::fmt_f(x)
    } else {
        let s = format!("{x:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    format!("{text}{unit}")
}

/// Reads a tick label written by [`tick_label`]; `None` for any other text.
pub fn parse_tick(text: &str) -> Option<f64> {
    let t = text.trim();
    let (num, mult) = match t.rsplit_once(' ') {
        Some((n, "K")) => (n, 1e3),
        Some((n, "M")) => (n, 1e6),
        Some((n, "B")) => (n, 1e9),
        Some((n, "T")) => (n, 1e12),
        Some(_) => return None,
        None => (t, 1.0),
    };
    let clean = num.replace(',', "");
    if clean.is_empty() || !clean.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    clean.parse::<f64>().ok().map(|v| v * mult)
}

fn err<E: std::fmt::Debug>(what: &str) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("drawing {what}: {e:?}")
}

/// Draws the chart on any plotters backend.
fn render<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> Result<()> {
    let what = chart.title.as_str();
    let points = || chart.series.iter().flat_map(|s| s.points.iter());
    let positive = |v: &f64| v.is_finite() && *v > 0.0;
    let xs: Vec<f64> = points().map(|p| p.0).filter(positive).collect();
    let ys: Vec<f64> = points().map(|p| p.1).filter(positive).collect();
    if xs.is_empty() || ys.is_empty() {
        bail!("{what}: no data");
    }
    let bounds = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(*x), b.max(*x)))
    };
    let (x0, x1) = bounds(&xs);
    let (y0, y1) = bounds(&ys);
    let xt = log_ticks(x0, x1);
    let yt = log_ticks(y0, y1);

    root.fill(&WHITE).map_err(err(what))?;
    let height = root.dim_in_pixel().1 as i32;
    let footer_lines: Vec<&str> = chart.footer.lines().collect();
    let (plot, footer) = root.split_vertically(height - 8 - 22 * footer_lines.len() as i32);
    for (i, line) in footer_lines.iter().enumerate() {
        footer
            .draw(&Text::new(
                line.to_string(),
                (12, 4 + 22 * i as i32),
                ("sans-serif", 16).into_font().color(&RGBColor(80, 80, 80)),
            ))
            .map_err(err(what))?;
    }

    let mut builder = ChartBuilder::on(&plot);
    builder
        .caption(&chart.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(56)
        .y_label_area_size(100);
    match chart.secondary {
        Some(_) => builder.right_y_label_area_size(100),
        // Room for the last x label, centred on the axis's end.
        None => builder.margin_right(44),
    };
    let x_range = (xt.lo..xt.hi)
        .log_scale()
        .with_key_points(xt.labelled.clone())
        .with_light_points(xt.light.clone());
    let y_range = (yt.lo..yt.hi)
        .log_scale()
        .with_key_points(yt.labelled.clone())
        .with_light_points(yt.light.clone());
    let mut ctx = builder
        .build_cartesian_2d(x_range, y_range)
        .map_err(err(what))?;
    let label_font = ("sans-serif", 17);
    match &chart.secondary {
        Some(axis) => {
            let (lo, hi) = (yt.lo * axis.factor, yt.hi * axis.factor);
            let t = log_ticks(lo, hi);
            // The labels of the secondary axis that fall within its range (not rounded out:
            // it must map onto the primary axis exactly).
            let within = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
            let mut labelled: Vec<f64> = t.labelled.iter().copied().filter(within).collect();
            if labelled.len() < 2 {
                labelled = t
                    .labelled
                    .iter()
                    .chain(t.light.iter())
                    .copied()
                    .filter(within)
                    .collect();
                labelled.sort_by(f64::total_cmp);
            }
            // The mesh after the secondary coordinates exist, so the primary labels stay left.
            let mut dual = ctx.set_secondary_coord(
                (xt.lo..xt.hi).log_scale(),
                (lo..hi).log_scale().with_key_points(labelled),
            );
            mesh(&mut dual, chart)?;
            dual.configure_secondary_axes()
                .y_desc(axis.label.as_str())
                .axis_desc_style(("sans-serif", 18))
                .label_style(label_font)
                .y_label_formatter(&|v| tick_label(*v))
                .draw()
                .map_err(err(what))?;
            draw_lines(&mut dual, chart)?;
        }
        None => {
            mesh(&mut ctx, chart)?;
            draw_lines(&mut ctx, chart)?;
        }
    }
    root.present().map_err(err(what))?;
    Ok(())
}

/// The primary coordinates of every chart.
type LogLog = Cartesian2d<WithKeyPoints<LogCoord<f64>>, WithKeyPoints<LogCoord<f64>>>;

/// Draws the grid, the primary axes, their tick labels and descriptions.
fn mesh<'a, DB: DrawingBackend + 'a>(
    ctx: &mut ChartContext<'a, DB, LogLog>,
    chart: &Chart,
) -> Result<()> {
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 17))
        .x_label_formatter(&|v| tick_label(*v))
        .y_label_formatter(&|v| tick_label(*v))
        .light_line_style(RGBColor(200, 200, 200).mix(0.6))
        .bold_line_style(RGBColor(150, 150, 150).mix(0.6))
        .draw()
        .map_err(err(&chart.title))?;
    Ok(())
}

/// Draws the series (lines and markers) and the legend.
fn draw_lines<'a, DB: DrawingBackend + 'a>(
    ctx: &mut ChartContext<'a, DB, LogLog>,
    chart: &Chart,
) -> Result<()> {
    let what = chart.title.as_str();
    let positive = |v: &f64| v.is_finite() && *v > 0.0;
    for (i, s) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| positive(x) && positive(y))
            .collect();
        ctx.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err(what))?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        ctx.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
            .map_err(err(what))?;
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 17))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err(what))?;
    Ok(())
}

/// Draws `chart` as an SVG at `path` and as a PNG beside it (same name, `.png`), checks the SVG
/// with [`check_svg`], and returns both paths. Fails when there is nothing to draw or the chart
/// would not be readable.
pub fn draw(chart: &Chart, path: &Path) -> Result<Vec<PathBuf>> {
    register_font();
    render(SVGBackend::new(path, SIZE).into_drawing_area(), chart)?;
    let svg =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    check_svg(&svg).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let png = path.with_extension("png");
    let mut pixels = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
    render(
        BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area(),
        chart,
    )?;
    write_png(&png, &pixels, SIZE)?;
    Ok(vec![path.to_path_buf(), png])
}

/// Writes RGB pixels as a PNG.
fn write_png(path: &Path, rgb: &[u8], (w, h): (u32, u32)) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder
        .write_header()
        .with_context(|| format!("writing {}", path.display()))?;
    writer
        .write_image_data(rgb)
        .with_context(|| format!("writing {}", path.display()))?;
    writer
        .finish()
        .with_context(|| format!("writing {}", path.display()))
}

/// What [`check_svg`] read from a chart: the tick labels of each axis (value, pixel) and the
/// points of every drawn line and marker (pixels).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SvgAxes {
    /// X tick labels: (value, x pixel).
    pub x_ticks: Vec<(f64, f64)>,
    /// Left y tick labels: (value, y pixel).
    pub y_ticks: Vec<(f64, f64)>,
    /// Right y tick labels: (value, y pixel).
    pub y2_ticks: Vec<(f64, f64)>,
    /// Every point of every polyline and circle.
    pub points: Vec<(f64, f64)>,
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(tag[start..end].to_string())
}

/// Reads the axes and series of an SVG plotters wrote: tick labels are `<text>` elements whose
/// content is a number ([`parse_tick`]); those centred on one row are the x axis, those
/// right-aligned (`text-anchor="end"`) the left y axis and left-aligned ones the right y axis;
/// series are the coloured `<polyline>` points (axes and ticks are black) and `<circle>` centres.
pub fn read_svg(svg: &str) -> SvgAxes {
    let mut out = SvgAxes::default();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        rest = &rest[i..];
        let Some(close) = rest.find('>') else { break };
        let tag = &rest[..=close];
        if tag.starts_with("<text") {
            let body_end = rest.find("</text>").unwrap_or(close + 1);
            let body = rest[close + 1..body_end].trim();
            let num = |a: &str| attr(tag, a).and_then(|v| v.parse::<f64>().ok());
            if let (Some(v), Some(x), Some(y)) = (parse_tick(body), num("x"), num("y"))
                && !tag.contains("rotate")
            {
                match attr(tag, "text-anchor").as_deref() {
                    Some("middle") => out.x_ticks.push((v, x)),
                    Some("end") => out.y_ticks.push((v, y)),
                    _ => out.y2_ticks.push((v, y)),
                }
            }
        } else if tag.starts_with("<polyline") && attr(tag, "stroke").as_deref() != Some("#000000")
        {
            // Axis lines and tick marks are black; series lines are coloured.
            if let Some(points) = attr(tag, "points") {
                for p in points.split_whitespace() {
                    if let Some((x, y)) = p.split_once(',')
                        && let (Ok(x), Ok(y)) = (x.parse(), y.parse())
                    {
                        out.points.push((x, y));
                    }
                }
            }
        } else if tag.starts_with("<circle") {
            let num = |a: &str| attr(tag, a).and_then(|v| v.parse::<f64>().ok());
            if let (Some(x), Some(y)) = (num("cx"), num("cy")) {
                out.points.push((x, y));
            }
        }
        rest = &rest[close + 1..];
    }
    out
}

/// Refuses a chart a reader cannot trust: an axis (x, left y, and the right y if present) with
/// fewer than two tick labels, tick labels that do not grow along their axis, or a line point
/// or marker outside the span of the labelled ticks (one pixel of rounding allowed).
pub fn check_svg(svg: &str) -> std::result::Result<SvgAxes, String> {
    let axes = read_svg(svg);
    let spread = |ticks: &[(f64, f64)], name: &str| -> std::result::Result<(f64, f64), String> {
        if ticks.len() < 2 {
            return Err(format!(
                "the {name} axis has {} tick label(s), fewer than two",
                ticks.len()
            ));
        }
        let mut sorted = ticks.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first = sorted[0].1;
        let last = sorted[sorted.len() - 1].1;
        if first == last {
            return Err(format!("the {name} axis labels all sit at one pixel"));
        }
        // Pixels move one way as values grow (x right, y up).
        let rising = last > first;
        if sorted.windows(2).any(|w| (w[1].1 > w[0].1) != rising) {
            return Err(format!("the {name} axis labels are out of order"));
        }
        Ok((first.min(last), first.max(last)))
    };
    let (x_lo, x_hi) = spread(&axes.x_ticks, "x")?;
    let (y_lo, y_hi) = spread(&axes.y_ticks, "y")?;
    if !axes.y2_ticks.is_empty() {
        spread(&axes.y2_ticks, "right y")?;
    }
    if axes.points.is_empty() {
        return Err("no series drawn".into());
    }
    // Legend samples are polylines too; they sit inside the plot, hence inside the span.
    for &(x, y) in &axes.points {
        if x < x_lo - 1.0 || x > x_hi + 1.0 || y < y_lo - 1.0 || y > y_hi + 1.0 {
            return Err(format!(
                "a point at pixel ({x}, {y}) lies outside the labelled range (x {x_lo}..{x_hi}, y {y_lo}..{y_hi})"
            ));
        }
    }
    Ok(axes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bench_suite_{name}_{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn chart(series: Vec<Series>) -> Chart {
        Chart {
            title: "insert: instructions per op".into(),
            footer: "engine: test".into(),
            x_label: "N (ops)".into(),
            y_label: "instructions per op".into(),
            secondary: None,
            series,
        }
    }

    #[test]
    fn ticks_label_decades_and_round_the_range_out() {
        let t = log_ticks(17_000.0, 700_000.0);
        assert_eq!(
            t.labelled,
            [
                10_000.0, 20_000.0, 50_000.0, 100_000.0, 200_000.0, 500_000.0, 1e6
            ]
        );
        assert_eq!((t.lo, t.hi), (10_000.0, 1e6));
        assert!(t.light.contains(&30_000.0) && !t.light.contains(&20_000.0));
        // Narrow: within one decade, the 2 and 5 ticks carry the labels.
        let t = log_ticks(16_000.0, 30_000.0);
        assert_eq!(t.labelled, [10_000.0, 20_000.0, 50_000.0]);
        // Wide: decades only.
        let t = log_ticks(39_850.0, 22_459_390.0);
        assert_eq!(t.labelled, [10_000.0, 100_000.0, 1e6, 1e7, 1e8]);
        // One value exactly on a tick still gets two labels around it.
        let t = log_ticks(100.0, 100.0);
        assert!(t.labelled.len() >= 2 && t.lo <= 100.0 && t.hi >= 100.0);
    }

    #[test]
    fn tick_labels_read_back() {
        for v in [
            1.0, 2.0, 100.0, 1_000.0, 5_000.0, 20_000.0, 1e6, 5e7, 2e9, 6.5e12, 0.05, 0.2,
        ] {
            let text = tick_label(v);
            assert!(same(parse_tick(&text).unwrap(), v), "{v} -> {text}");
        }
        assert_eq!(tick_label(20_000.0), "20,000");
        assert_eq!(tick_label(200_000.0), "200 K");
        assert_eq!(tick_label(1_000.0), "1,000");
        assert_eq!(tick_label(0.05), "0.05");
        assert_eq!(parse_tick("N (ops)"), None);
        assert_eq!(parse_tick("unbatched"), None);
    }

    #[test]
    fn writes_svg_and_png_that_pass_the_check() {
        let d = dir("chart");
        let c = chart(vec![
            Series {
                label: "unbatched".into(),
                points: vec![(1.0, 7e5), (10.0, 2.4e5), (1000.0, 1.9e5)],
            },
            Series {
                label: "batched".into(),
                points: vec![(1.0, 7.3e5), (10.0, 1.4e5), (1000.0, 2e4)],
            },
        ]);
        let files = draw(&c, &d.join("c.svg")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("insert: instructions per op") && svg.contains("engine: test"));
        let axes = check_svg(&svg).unwrap();
        let values = |t: &[(f64, f64)]| t.iter().map(|x| x.0).collect::<Vec<_>>();
        // Below 100,000 the y axis is labelled: 20 K and 50 K.
        assert!(
            values(&axes.y_ticks).contains(&20_000.0),
            "{:?}",
            axes.y_ticks
        );
        assert_eq!(values(&axes.x_ticks), [1.0, 10.0, 100.0, 1_000.0]);
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let reader = decoder.read_info().unwrap();
        assert_eq!((reader.info().width, reader.info().height), SIZE);
        std::fs::remove_dir_all(&d).unwrap();
        assert!(draw(&chart(vec![]), Path::new("/nonexistent/x.svg")).is_err());
    }

    #[test]
    fn a_secondary_axis_is_labelled_too() {
        let d = dir("chart2");
        let mut c = chart(vec![Series {
            label: "a".into(),
            points: vec![(1.0, 7e6), (100.0, 6.5e6), (10_000.0, 4e4)],
        }]);
        c.secondary = Some(SecondaryAxis {
            label: "US$ per 1M ops".into(),
            factor: 1.35482e-6,
        });
        let files = draw(&c, &d.join("c.svg")).unwrap();
        let axes = check_svg(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
        assert!(axes.y2_ticks.len() >= 2, "{:?}", axes.y2_ticks);
        // The left axis keeps the primary labels, the right one only US$.
        assert!(
            axes.y2_ticks.iter().all(|(v, _)| *v < 100.0),
            "{:?}",
            axes.y2_ticks
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_check_refuses_unlabelled_axes_and_points_outside_the_labels() {
        let d = dir("chart3");
        let c = chart(vec![Series {
            label: "a".into(),
            points: vec![(1.0, 3e4), (1000.0, 2e4)],
        }]);
        let files = draw(&c, &d.join("c.svg")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        let axes = check_svg(&svg).unwrap();
        // Strip the y labels (what the old flush-size chart looked like): refused.
        let mut stripped = svg.clone();
        for (v, _) in &axes.y_ticks {
            let label = format!(">\n{}\n</text>", tick_label(*v));
            let alt = format!(">{}</text>", tick_label(*v));
            stripped = stripped
                .replace(&label, ">\n</text>")
                .replace(&alt, "></text>");
        }
        let e = check_svg(&stripped).unwrap_err();
        assert!(e.contains("the y axis has 0 tick label"), "{e}");
        // A polyline beyond the last x label: refused.
        let beyond = svg.replacen(
            "<polyline",
            "<polyline stroke=\"#123456\" points=\"5000,10 5001,11\" x=\"",
            1,
        );
        let e = check_svg(&beyond).unwrap_err();
        assert!(e.contains("outside the labelled range"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_shipped_font_parses() {
        register_font();
        let style: FontDesc = ("sans-serif", 12).into_font();
        assert!(style.box_size("1,000").is_ok_and(|(w, _)| w > 10));
    }
}
