//! Text shaped to fit a cell: a clock, and cutting to a width.

/// `mm:ss` or `h:mm:ss`.
pub fn clock(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// Cuts `s` to `max` characters, marking the cut with `…`.
pub fn fit(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else if max == 0 {
        String::new()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// The first of `candidates` (longest first) that fits in `max` characters, else the last cut
/// to fit: a panel title that drops its least needed parts before a word is cut.
pub fn first_fitting(candidates: &[String], max: usize) -> String {
    candidates
        .iter()
        .find(|c| c.chars().count() <= max)
        .cloned()
        .unwrap_or_else(|| fit(candidates.last().map_or("", String::as_str), max))
}
