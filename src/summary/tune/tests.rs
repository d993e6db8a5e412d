use super::pareto::{front, points};
use super::*;

fn cfg(np: &str, status: ConfigStatus, capacity: Option<f64>, fail: Option<f64>) -> TuneConfig {
    let mut c = TuneConfig::pending(
        &[("-np".into(), np.into())],
        format!("srv -np {np}"),
        format!("np-{np}"),
    );
    c.status = status;
    c.capacity = capacity;
    c.fail_rate = fail;
    if status == ConfigStatus::StoppedEarly {
        c.below = fail;
    }
    c
}

#[test]
fn the_best_is_the_highest_capacity_and_a_close_runner_up_is_a_tie() {
    let configs = vec![
        cfg("1", ConfigStatus::Measured, Some(2.0), Some(2.1)),
        cfg("2", ConfigStatus::StoppedEarly, None, Some(4.0)),
        cfg("4", ConfigStatus::Measured, Some(4.0), Some(4.2)),
        cfg("8", ConfigStatus::Failed, None, None),
    ];
    assert_eq!(ranked(&configs), vec![2, 0, 1, 3]);
    let t = TuneSummary::new("ttft:500".into(), true, configs.clone());
    assert_eq!(t.best.as_ref().map(|b| b.label.as_str()), Some("-np 4"));
    let r = t.runner_up.clone().unwrap();
    assert_eq!((r.label.as_str(), r.tie), ("-np 1", false));
    assert!((r.margin_pct - 100.0).abs() < 1e-9);
    // -np 2 stopped early below 4: it may lie anywhere above -np 1's 2, so the margin over the
    // true runner-up is not known.
    assert!(r.margin_unknown);
    let h = t.headline();
    assert!(
        h.contains("at most 100 % more than the next measured"),
        "{h}"
    );
    assert!(h.ends_with("; 1 stopped early, each below 4 req/s"), "{h}");
    // Stopped early below the runner-up's own capacity: the margin stands.
    let mut known = configs.clone();
    known[1].below = Some(2.0);
    let k = TuneSummary::new("ttft:500".into(), true, known);
    assert!(!k.runner_up.as_ref().unwrap().margin_unknown);
    assert!(
        k.headline().contains("; 100 % more than the runner-up"),
        "{}",
        k.headline()
    );
    assert_eq!(t.rate_to_beat(), Some(4.0));
    assert_eq!(rate_to_beat(&configs, false), None);
    // The runner-up's bracket reaches past the best's capacity: either may be better.
    let close = vec![
        cfg("1", ConfigStatus::Measured, Some(3.9), Some(4.1)),
        cfg("4", ConfigStatus::Measured, Some(4.0), Some(4.2)),
    ];
    let t = TuneSummary::new("ttft:500".into(), false, close);
    assert!(t.runner_up.as_ref().unwrap().tie);
    assert!(
        t.headline().contains("a tie with -np 1"),
        "{}",
        t.headline()
    );
    // Nothing measured: no best, and said so.
    let t = TuneSummary::new(
        "ttft:500".into(),
        true,
        vec![cfg("1", ConfigStatus::Failed, None, None)],
    );
    assert!(t.best.is_none() && t.headline().starts_with("no configuration met"));
}

#[test]
fn statuses_are_written_as_the_checks_read_them() {
    let c = cfg("2", ConfigStatus::StoppedEarly, None, Some(3.1));
    let v = serde_json::to_value(&c).unwrap();
    assert_eq!(v["status"], "stopped early");
    assert_eq!(v["params"]["-np"], "2");
    assert!(v["capacity"].is_null());
    assert_eq!(c.capacity_text(), "below 3.1 req/s");
    let back: TuneConfig = serde_json::from_value(v).unwrap();
    assert_eq!(back, c);
}

#[test]
fn the_front_holds_the_points_nothing_beats_on_both_speeds() {
    let mut a = cfg("1", ConfigStatus::Measured, Some(1.0), None);
    let mut b = cfg("2", ConfigStatus::Measured, Some(2.0), None);
    let p = |level: &str, user: f64, agg: f64| LoadPoint {
        level: level.into(),
        per_user_tokens_per_s: user,
        aggregate_tokens_per_s: agg,
        meets_slo: None,
    };
    // a: fast per user, little in aggregate; b: the reverse, plus a point a beats on both.
    a.points = vec![p("C=1", 50.0, 50.0), p("C=8", 30.0, 200.0)];
    b.points = vec![p("C=1", 40.0, 40.0), p("C=64", 10.0, 500.0)];
    let all = points(&[a, b]);
    let on: Vec<(usize, &str)> = all
        .iter()
        .filter(|p| p.on_front)
        .map(|p| (p.config, p.level.as_str()))
        .collect();
    assert_eq!(on, vec![(0, "C=1"), (0, "C=8"), (1, "C=64")]);
    let line: Vec<f64> = front(&all)
        .iter()
        .map(|p| p.per_user_tokens_per_s)
        .collect();
    assert_eq!(line, vec![10.0, 30.0, 50.0]);
}
