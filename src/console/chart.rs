//! Usage charts drawn on the server: an SVG of stacked bars (granted below, then denied,
//! then a shadow policy's would-be denials on top, each its own colour) per time span, with its scale, time axis and totals as text beside it (text inside an
//! SVG that stretches to the page's width would shrink to nothing on a phone). No script.

use std::fmt::Write;

use ratekeeper_limiter::MinuteCounts;

use super::format::number;

/// The drawing's own units; the page stretches it to its width.
const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 100.0;

/// One span's chart as a page shows it.
pub struct UsageChart {
    /// "Last hour".
    pub title: &'static str,
    /// "1 minute", "15 minutes", "1 hour": what one bar counts.
    pub per_bar: &'static str,
    /// Where the time axis starts: "60 min ago".
    pub starts: &'static str,
    /// The times (UTC) at the axis' two ends: the first bar's start, the last one's end
    /// (the last bar is the span so far, drawn fainter); empty without points.
    pub start_time: String,
    pub end_time: String,
    pub granted: u64,
    pub denied: u64,
    /// Granted by shadow mode where the limit would have denied.
    pub shadow_denied: u64,
    /// Refused (503) because Redis could not be reached; not drawn (no decision was
    /// taken), only counted.
    pub unavailable: u64,
    /// The most a bar holds: the top of the scale.
    pub peak: u64,
    /// The SVG element (numbers and fixed words only: nothing from a user).
    pub svg: String,
    /// The versions saved in the span, marked on it: number and time (UTC), oldest last.
    pub versions: Vec<(i64, String)>,
}

impl UsageChart {
    pub fn new(
        title: &'static str,
        per_bar: &'static str,
        starts: &'static str,
        points: &[MinuteCounts],
    ) -> Self {
        let granted = points.iter().map(|p| p.granted).sum();
        let denied = points.iter().map(|p| p.denied).sum();
        let shadow_denied = points.iter().map(|p| p.shadow_denied).sum();
        let unavailable = points.iter().map(|p| p.unavailable).sum();
        let peak = points
            .iter()
            .map(|p| p.granted + p.denied + p.shadow_denied)
            .max()
            .unwrap_or(0);
        let mut label = format!("{title}: {granted} granted, {denied} denied");
        if shadow_denied > 0 {
            let _ = write!(
                label,
                ", {shadow_denied} would have been denied (shadow mode)"
            );
        }
        let (start_time, end_time) = axis_times(points);
        Self {
            title,
            per_bar,
            starts,
            start_time,
            end_time,
            granted,
            denied,
            shadow_denied,
            unavailable,
            peak,
            svg: bars(&label, points, peak),
            versions: Vec::new(),
        }
    }

    /// The chart with a marker at each saved version inside its span (`saved`: version
    /// and unix ms), so that a change in traffic can be read against the change that
    /// caused it; the versions are also listed, as links to them in the history, in
    /// `versions` (an image holds no links).
    pub fn with_versions(mut self, saved: &[(i64, i64)], points: &[MinuteCounts]) -> Self {
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            return self;
        };
        let each = minutes_per_point(points);
        let span = (last.minute + each - first.minute) as f64;
        let mut markers = String::new();
        for &(version, at_ms) in saved {
            let at = at_ms as f64 / 60_000.0 - first.minute as f64;
            if !(0.0..span).contains(&at) {
                continue;
            }
            let x = at / span * WIDTH;
            let _ = write!(
                markers,
                r#"<line class="version" x1="{x:.2}" y1="0" x2="{x:.2}" y2="{HEIGHT}" vector-effect="non-scaling-stroke"/>"#,
            );
            let when = chrono::DateTime::from_timestamp_millis(at_ms)
                .map_or_else(String::new, |t| t.format("%Y-%m-%d %H:%M UTC").to_string());
            self.versions.push((version, when));
        }
        if let Some(end) = self.svg.rfind("</svg>") {
            self.svg.insert_str(end, &markers);
        }
        self
    }

    pub fn granted_text(&self) -> String {
        number(self.granted as f64)
    }

    pub fn denied_text(&self) -> String {
        number(self.denied as f64)
    }

    pub fn shadow_denied_text(&self) -> String {
        number(self.shadow_denied as f64)
    }
}

/// The minutes (Unix) one point of `points` counts, from the first two.
fn minutes_per_point(points: &[MinuteCounts]) -> i64 {
    match points {
        [first, second, ..] => (second.minute - first.minute).max(1),
        _ => 1,
    }
}

/// The UTC times at the two ends of the axis: "14:05 UTC" within an hour, with the day
/// ("Thu 14:00 UTC") over longer spans.
fn axis_times(points: &[MinuteCounts]) -> (String, String) {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return (String::new(), String::new());
    };
    let end = last.minute + minutes_per_point(points);
    let format = if end - first.minute <= 60 {
        "%H:%M UTC"
    } else {
        "%a %H:%M UTC"
    };
    let at = |minute: i64| {
        chrono::DateTime::from_timestamp(minute * 60, 0)
            .map_or_else(String::new, |t| t.format(format).to_string())
    };
    (at(first.minute), at(end))
}

fn bars(label: &str, points: &[MinuteCounts], peak: u64) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="usage" viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none" role="img" aria-label="{label}">"#
    );
    let slot = WIDTH / points.len().max(1) as f64;
    // A hair of space between bars while they are wide enough to show it.
    let width = if slot >= 3.0 { slot - 1.0 } else { slot };
    let scale = if peak == 0 { 0.0 } else { HEIGHT / peak as f64 };
    for (i, p) in points.iter().enumerate() {
        let x = i as f64 * slot;
        // The last bar is the span so far: drawn fainter, it reads as unfinished.
        let so_far = i + 1 == points.len();
        if so_far {
            svg.push_str(r#"<g class="so-far">"#);
        }
        let mut top = HEIGHT;
        for (class, n) in [("g", p.granted), ("d", p.denied), ("s", p.shadow_denied)] {
            let h = n as f64 * scale;
            if h > 0.0 {
                top -= h;
                let _ = write!(
                    svg,
                    r#"<rect class="{class}" x="{x:.2}" y="{top:.2}" width="{width:.2}" height="{h:.2}"/>"#
                );
            }
        }
        if so_far {
            svg.push_str("</g>");
        }
    }
    svg.push_str(r#"<line class="base" x1="0" y1="100" x2="600" y2="100"/></svg>"#);
    svg
}

/// A table cell's chart of the last minutes, drawn as `static/console.js` draws it on a
/// refresh (so the first paint needs no request of its own): bars 8 px wide, 22 high,
/// granted below, then denied, then would-be denied; each bar titled with its minute in
/// UTC, the last one (the minute so far) drawn fainter.
pub fn sparkline(points: &[MinuteCounts]) -> String {
    const W: u64 = 8;
    const GAP: u64 = 2;
    const H: u64 = 22;
    let peak = points
        .iter()
        .map(|p| p.granted + p.denied + p.shadow_denied)
        .max()
        .unwrap_or(0)
        .max(1);
    let width = points.len() as u64 * (W + GAP);
    let recent = super::recent::Recent::of(points);
    // About 200 bytes a bar: one allocation for the whole chart.
    let mut svg = String::with_capacity(256 + points.len() * 200);
    let _ = write!(
        svg,
        r#"<svg class="chart" width="{width}" height="{}" role="img" aria-label="Last {} minutes: {}">"#,
        H + 1,
        points.len(),
        recent.words()
    );
    for (i, p) in points.iter().enumerate() {
        let x = i as u64 * (W + GAP);
        let so_far = i + 1 == points.len();
        svg.push_str(if so_far {
            r#"<g class="so-far"><title>"#
        } else {
            "<g><title>"
        });
        write_minute_title(&mut svg, p, so_far);
        svg.push_str("</title>");
        let mut top = H;
        for (class, n) in [("g", p.granted), ("d", p.denied), ("s", p.shadow_denied)] {
            let h = (n * H + peak / 2) / peak;
            if h > 0 {
                top = top.saturating_sub(h);
                let _ = write!(
                    svg,
                    r#"<rect class="{class}" x="{x}" y="{top}" width="{W}" height="{h}"/>"#
                );
            }
        }
        svg.push_str("</g>");
    }
    let _ = write!(
        svg,
        r#"<line class="base" x1="0" y1="{0}.5" x2="{width}" y2="{0}.5"/></svg>"#,
        H
    );
    svg
}

/// A bar's title: "21:10 UTC: 3 granted, 1 denied", "(so far)" for the unfinished minute.
/// Written onto the chart, with the time from the minute's number: a page draws hundreds.
fn write_minute_title(out: &mut String, p: &MinuteCounts, so_far: bool) {
    let of_day = p.minute.rem_euclid(24 * 60);
    let _ = write!(out, "{:02}:{:02} UTC", of_day / 60, of_day % 60);
    out.push_str(if so_far { " (so far): " } else { ": " });
    super::recent::Recent::of(std::slice::from_ref(p)).write_words(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(granted: u64, denied: u64) -> MinuteCounts {
        MinuteCounts {
            minute: 0,
            granted,
            denied,
            shadow_denied: 0,
            ..MinuteCounts::default()
        }
    }

    #[test]
    fn shadow_denials_are_a_bar_of_their_own_on_top() {
        let mut shadowed = point(2, 0);
        shadowed.shadow_denied = 2;
        let chart = UsageChart::new("Last hour", "1 minute", "60 min ago", &[shadowed]);
        assert_eq!(
            (chart.granted, chart.denied, chart.shadow_denied),
            (2, 0, 2)
        );
        assert!(
            chart.svg.contains(r#"class="g" x="0.00" y="50.00""#),
            "{}",
            chart.svg
        );
        assert!(
            chart.svg.contains(r#"class="s" x="0.00" y="0.00""#),
            "{}",
            chart.svg
        );
        assert!(chart.svg.contains("2 would have been denied (shadow mode)"));
    }

    #[test]
    fn totals_and_the_tallest_bar_fill_the_height() {
        let chart = UsageChart::new(
            "Last hour",
            "1 minute",
            "60 min ago",
            &[point(1, 0), point(3, 1), point(0, 0)],
        );
        assert_eq!((chart.granted, chart.denied, chart.peak), (4, 1, 4));
        // The second bar: 3 granted from the bottom, 1 denied on top, reaching the top.
        assert!(
            chart.svg.contains(r#"class="g" x="200.00" y="25.00""#),
            "{}",
            chart.svg
        );
        assert!(
            chart.svg.contains(r#"class="d" x="200.00" y="0.00""#),
            "{}",
            chart.svg
        );
        assert!(
            chart
                .svg
                .contains("aria-label=\"Last hour: 4 granted, 1 denied\"")
        );
        // Nothing drawn for an empty minute.
        assert_eq!(chart.svg.matches("<rect").count(), 3);
    }

    #[test]
    fn the_axis_says_its_ends_in_utc_and_the_last_bar_is_so_far() {
        let hour: Vec<MinuteCounts> = (0..60)
            .map(|i| MinuteCounts {
                minute: 28_998_720 + 10 + i, // 00:10 UTC on
                ..point(1, 0)
            })
            .collect();
        let chart = UsageChart::new("Last hour", "1 minute", "60 min ago", &hour);
        assert_eq!(
            (chart.start_time.as_str(), chart.end_time.as_str()),
            ("00:10 UTC", "01:10 UTC")
        );
        assert_eq!(chart.svg.matches(r#"<g class="so-far">"#).count(), 1);
        assert!(
            chart
                .svg
                .contains(r#"<g class="so-far"><rect class="g" x="590.00""#)
        );
        let week: Vec<MinuteCounts> = (0..168)
            .map(|i| MinuteCounts {
                minute: 28_998_720 + 60 * i,
                ..point(0, 0)
            })
            .collect();
        let chart = UsageChart::new("Last 7 days", "1 hour", "7 days ago", &week);
        assert_eq!(
            (chart.start_time.as_str(), chart.end_time.as_str()),
            ("Wed 00:00 UTC", "Wed 00:00 UTC")
        );
    }

    #[test]
    fn a_sparkline_titles_each_minute_in_utc_and_marks_the_one_so_far() {
        let mut points = [point(3, 1), point(2, 0)];
        points[0].minute = 28_998_720 + 70; // 01:10 UTC
        points[1].minute = 28_998_720 + 71;
        points[1].shadow_denied = 2;
        let svg = sparkline(&points);
        assert!(
            svg.contains("<title>01:10 UTC: 3 granted, 1 denied (25%)</title>"),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<g class="so-far"><title>01:11 UTC (so far): 2 granted, 0 denied, 2 would have been denied</title>"#),
            "{svg}"
        );
        assert!(svg.contains(r#"class="s" x="10""#), "{svg}");
    }

    #[test]
    fn versions_saved_within_the_span_are_marked_and_listed() {
        let points: Vec<MinuteCounts> = (0..60)
            .map(|i| MinuteCounts {
                minute: 1_000 + i,
                ..point(0, 0)
            })
            .collect();
        let chart = UsageChart::new("Last hour", "1 minute", "60 min ago", &points)
            .with_versions(&[(3, 1_030 * 60_000), (2, 900 * 60_000)], &points);
        assert!(
            chart.svg.contains(r#"<line class="version" x1="300.00""#),
            "{}",
            chart.svg
        );
        assert_eq!(chart.versions.len(), 1, "version 2 was before the span");
        assert_eq!(chart.versions[0].0, 3);
    }

    #[test]
    fn no_traffic_is_an_empty_chart() {
        let chart = UsageChart::new("Last day", "15 minutes", "24 h ago", &[point(0, 0); 96]);
        assert_eq!(chart.peak, 0);
        assert!(!chart.svg.contains("<rect"));
    }
}
