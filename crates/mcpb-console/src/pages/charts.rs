//! Charts drawn on the server as SVG (no script, nothing fetched): calls, errors and latency
//! per upstream over the last hour, one bar a minute; and the before/after bars of Context.

use maud::{Markup, html};

use crate::backend::{Bucket, Series};

const W: f64 = 360.0;
const H: f64 = 60.0;

/// Room below a chart for its time axis, and left of it for its value axis.
const AXIS_H: f64 = 14.0;
const AXIS_W: f64 = 34.0;

/// A figure as an axis label: no trailing `.0`.
fn figure(v: f64) -> String {
    format!("{v:.1}").trim_end_matches(".0").to_string()
}

/// One small bar chart: a bar per value, scaled to the largest, each with its label as a
/// tooltip; the value axis says 0 and the largest, the time axis the first and last minute.
fn bars(values: &[(f64, String)], times: (&str, &str), class: &str, caption: &str) -> Markup {
    let top = values.iter().map(|v| v.0).fold(0.0_f64, f64::max);
    let n = values.len().max(1) as f64;
    let plot = W - AXIS_W;
    let step = plot / n;
    html! {
        figure.chart {
            svg class=(class) viewBox={ "0 0 " (W) " " (H + AXIS_H) } width=(W) height=(H + AXIS_H) role="img" aria-label=(caption) {
                text.axis x=(AXIS_W - 3.0) y="9" text-anchor="end" { (figure(top)) }
                text.axis x=(AXIS_W - 3.0) y=(H) text-anchor="end" { "0" }
                line.axis x1=(AXIS_W) y1="0" x2=(AXIS_W) y2=(H) {}
                line.axis x1=(AXIS_W) y1=(H) x2=(W) y2=(H) {}
                @for (i, (v, label)) in values.iter().enumerate() {
                    @let h = if top > 0.0 { v / top * (H - 2.0) } else { 0.0 };
                    rect x=(format!("{:.1}", AXIS_W + i as f64 * step)) y=(format!("{:.1}", H - h))
                        width=(format!("{:.1}", (step - 1.0).max(1.0))) height=(format!("{h:.1}")) {
                        title { (label) }
                    }
                }
                text.axis x=(AXIS_W) y=(H + AXIS_H - 2.0) { (times.0) }
                text.axis x=(W) y=(H + AXIS_H - 2.0) text-anchor="end" { (times.1) }
            }
            figcaption { (caption) ": max " (figure(top)) }
        }
    }
}

/// Two horizontal bars: a profile's context before and after, each with its figure, on a
/// scale from 0 to the larger.
pub(crate) fn pair(before: f64, after: f64, a: &str, b: &str) -> Markup {
    let top = before.max(after).max(1.0);
    let plot = W - 2.0;
    let wa = before / top * plot;
    let wb = after / top * plot;
    html! {
        svg.pair viewBox={ "0 0 " (W) " 60" } width=(W) height="60" role="img" aria-label="context before and after" {
            rect.before x="0" y="2" width=(format!("{wa:.1}")) height="18" { title { (a) ": " (before) } }
            text.axis x=(format!("{:.1}", (wa + 4.0).min(W - 150.0))) y="15" { (a) ": " (figure(before)) }
            rect.after x="0" y="24" width=(format!("{wb:.1}")) height="18" { title { (b) ": " (after) } }
            text.axis x=(format!("{:.1}", (wb + 4.0).min(W - 150.0))) y="37" { (b) ": " (figure(after)) }
            line.axis x1="0" y1="45" x2=(W) y2="45" {}
            text.axis x="0" y="57" { "0" }
            text.axis x=(W) y="57" text-anchor="end" { (figure(top)) }
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
            @let times = (
                s.buckets.first().map(minute).unwrap_or_default(),
                s.buckets.last().map(minute).unwrap_or_default(),
            );
            @let times = (times.0.as_str(), times.1.as_str());
            section.series id={ "chart-" (s.upstream) } {
                h2 { (s.upstream) }
                div.charts {
                    (bars(&s.buckets.iter().map(|b| (f64::from(b.calls), format!("{}: {} calls", minute(b), b.calls))).collect::<Vec<_>>(), times, "calls", "calls/min"))
                    (bars(&s.buckets.iter().map(|b| (f64::from(b.errors), format!("{}: {} errors", minute(b), b.errors))).collect::<Vec<_>>(), times, "errors", "errors/min"))
                    (bars(&s.buckets.iter().map(|b| {
                        let mean = if b.calls > 0 { b.ms_sum / f64::from(b.calls) } else { 0.0 };
                        (mean, format!("{}: mean {mean:.1} ms, max {:.1} ms", minute(b), b.ms_max))
                    }).collect::<Vec<_>>(), times, "latency", "mean latency, ms"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_says_its_scale_and_the_minutes_it_spans() {
        let bucket = |minute: u64, calls: u32| Bucket {
            minute,
            calls,
            errors: 0,
            ms_sum: f64::from(calls) * 2.0,
            ms_max: 3.0,
        };
        let series = [Series {
            upstream: "memory".into(),
            buckets: vec![bucket(36_000, 4), bucket(36_060, 0), bucket(39_540, 7)],
        }];
        let page = render(&series).into_string();
        for said in ["10:00 UTC", "10:59 UTC", ">7<", ">0<", "calls/min: max 7"] {
            assert!(page.contains(said), "{said} missing: {page}");
        }
        let pair = pair(9509.0, 620.0, "tokens before", "tokens after").into_string();
        assert!(
            pair.contains("tokens before: 9509") && pair.contains("tokens after: 620"),
            "{pair}"
        );
    }
}
