//! The scaling results as SVG line charts, written beside the tables in docs/benchmarks.md when
//! `MCPB_BENCH_CHARTS` names a folder (`MCPB_BENCH_CHARTS=docs/charts`).

use std::path::PathBuf;

use plotters::prelude::*;

/// One line: its label and its points.
pub(crate) type Series = (String, Vec<(f64, f64)>);

/// Where charts go, when they are asked for.
fn out_dir() -> Option<PathBuf> {
    std::env::var_os("MCPB_BENCH_CHARTS").map(PathBuf::from)
}

/// Draws `series` against shared axes into `<MCPB_BENCH_CHARTS>/<name>.svg`; nothing when no
/// folder was asked for. Returns the file written.
pub(crate) fn line_chart(
    name: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> anyhow::Result<Option<PathBuf>> {
    let Some(dir) = out_dir() else {
        return Ok(None);
    };
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.svg"));
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (x_max, y_max) = points.fold((0f64, 0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let root = SVGBackend::new(&path, (760, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max * 1.05, 0f64..y_max * 1.1)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    drop(chart);
    drop(root);
    Ok(Some(path))
}
