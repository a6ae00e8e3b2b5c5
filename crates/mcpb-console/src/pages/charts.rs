//! Charts drawn on the server as SVG (no script, nothing fetched): calls, errors and latency
//! per upstream over the last hour, one bar a minute; and the before/after bars of Context.

use maud::{Markup, html};

use crate::backend::{Bucket, Series};

const W: f64 = 360.0;
const H: f64 = 60.0;

/// One small bar chart: a bar per value, scaled to the largest, each with its label as a tooltip.
fn bars(values: &[(f64, String)], class: &str, caption: &str) -> Markup {
    let top = values.iter().map(|v| v.0).fold(0.0_f64, f64::max);
    let n = values.len().max(1) as f64;
    let step = W / n;
    html! {
        figure.chart {
            svg class=(class) viewBox={ "0 0 " (W) " " (H) } width=(W) height=(H) role="img" aria-label=(caption) {
                rect.frame x="0" y="0" width=(W) height=(H) {}
                @for (i, (v, label)) in values.iter().enumerate() {
                    @let h = if top > 0.0 { v / top * (H - 2.0) } else { 0.0 };
                    rect x=(format!("{:.1}", i as f64 * step)) y=(format!("{:.1}", H - h))
                        width=(format!("{:.1}", (step - 1.0).max(1.0))) height=(format!("{h:.1}")) {
                        title { (label) }
                    }
                }
            }
            figcaption { (caption) ": max " (format!("{top:.1}").trim_end_matches(".0")) }
        }
    }
}

/// Two horizontal bars: a profile's context before and after.
pub(crate) fn pair(before: f64, after: f64, a: &str, b: &str) -> Markup {
    let top = before.max(after).max(1.0);
    let wa = before / top * (W - 2.0);
    let wb = after / top * (W - 2.0);
    html! {
        svg.pair viewBox={ "0 0 " (W) " 44" } width=(W) height="44" role="img" aria-label="context before and after" {
            rect.before x="0" y="2" width=(format!("{wa:.1}")) height="18" { title { (a) ": " (before) } }
            rect.after x="0" y="24" width=(format!("{wb:.1}")) height="18" { title { (b) ": " (after) } }
        }
    }
}

fn minute(b: &Bucket) -> String {
    let secs = b.minute % 86_400;
    format!("{:02}:{:02} UTC", secs / 3600, secs % 3600 / 60)
}

pub(crate) fn render(series: &[Series]) -> Markup {
    html! {
        p { "Each bar is one minute of the last hour (UTC); hover a bar for its figure." }
        @if series.iter().all(|s| s.buckets.iter().all(|b| b.calls == 0)) {
            p #no-calls { "No call in the last hour." }
        }
        @for s in series {
            section.series id={ "chart-" (s.upstream) } {
                h2 { (s.upstream) }
                div.charts {
                    (bars(&s.buckets.iter().map(|b| (f64::from(b.calls), format!("{}: {} calls", minute(b), b.calls))).collect::<Vec<_>>(), "calls", "calls/min"))
                    (bars(&s.buckets.iter().map(|b| (f64::from(b.errors), format!("{}: {} errors", minute(b), b.errors))).collect::<Vec<_>>(), "errors", "errors/min"))
                    (bars(&s.buckets.iter().map(|b| {
                        let mean = if b.calls > 0 { b.ms_sum / f64::from(b.calls) } else { 0.0 };
                        (mean, format!("{}: mean {mean:.1} ms, max {:.1} ms", minute(b), b.ms_max))
                    }).collect::<Vec<_>>(), "latency", "mean latency, ms"))
                }
            }
        }
    }
}
