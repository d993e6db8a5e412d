//! `--serve-param NAME=V1,V2`: each flag's values (numeric ranges expanded), and every
//! combination of one value per flag, each a server configuration of its own.

/// Every combination of one value per `--serve-param NAME=V1,V2` (the first flag's values vary
/// slowest), as `(NAME, value)` lists; empty without the flag. A NAME without a leading dash
/// gets `--`. A value may be a numeric range: `A..B` (step 1), `A..B:S` (step S) or `A..B*F`
/// (each value F times the last), both ends included when reached.
pub fn serve_combinations(specs: &[String]) -> Result<Vec<Vec<(String, String)>>, String> {
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for spec in specs {
        let bad = || {
            format!(
                "--serve-param takes NAME=V1,V2,... (e.g. --serve-param=--max-num-seqs=64,128), not '{spec}'"
            )
        };
        let (name, values) = spec.split_once('=').ok_or_else(bad)?;
        let name = name.trim();
        let mut expanded: Vec<String> = Vec::new();
        for v in values.split(',').map(str::trim).filter(|v| !v.is_empty()) {
            match range(v) {
                Some(r) => expanded.extend(r.map_err(|e| format!("--serve-param {spec}: {e}"))?),
                None => expanded.push(v.to_string()),
            }
        }
        let values = expanded;
        if name.trim_start_matches('-').is_empty() || values.is_empty() {
            return Err(bad());
        }
        if let Some(twice) = values
            .iter()
            .enumerate()
            .find_map(|(i, v)| values[..i].contains(v).then_some(v))
        {
            return Err(format!(
                "--serve-param {spec}: the value {twice} is given twice (two configurations alike would share one run directory)"
            ));
        }
        let name = if name.starts_with('-') {
            name.to_string()
        } else {
            format!("--{name}")
        };
        if axes.iter().any(|(n, _)| *n == name) {
            return Err(format!(
                "--serve-param {name} is given twice: list all its values in one (NAME=V1,V2)"
            ));
        }
        axes.push((name, values));
    }
    let mut combos: Vec<Vec<(String, String)>> = if axes.is_empty() {
        Vec::new()
    } else {
        vec![Vec::new()]
    };
    for (name, values) in &axes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    Ok(combos)
}

/// A `--serve-param` value that is a numeric range (`1..8`, `0.80..0.90:0.05`, `1..64*2`),
/// expanded; `None` when the value is not a range (`../model.gguf` is a value).
fn range(v: &str) -> Option<Result<Vec<String>, String>> {
    let (a, rest) = v.split_once("..")?;
    let (b, step, geometric) = match (rest.split_once(':'), rest.split_once('*')) {
        (Some((b, s)), _) => (b, Some(s), false),
        (None, Some((b, f))) => (b, Some(f), true),
        (None, None) => (rest, None, false),
    };
    // Plain decimals only (`1e-3` would print as `0`): anything else is a value, not a range.
    let plain = |t: &str| {
        let t = t.trim();
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == '-')
    };
    let num = |t: &str| t.trim().parse::<f64>().ok().filter(|x| x.is_finite());
    if !plain(a) || !plain(b) {
        return None;
    }
    let (start, end) = (num(a)?, num(b)?);
    // Values print with the ends' decimals (and an arithmetic step's): 1..16*1.5 is whole.
    let decimals = [a, b, if geometric { "1" } else { step.unwrap_or("1") }]
        .iter()
        .map(|t| t.trim().split_once('.').map_or(0, |(_, d)| d.len()))
        .max()
        .unwrap_or(0);
    let Some(by) = step.map_or(Some(1.0), num) else {
        return Some(Err(format!(
            "'{v}': the step after the range is not a number"
        )));
    };
    if end < start {
        return Some(Err(format!("'{v}': the range ends below its start")));
    }
    if (geometric && (by <= 1.0 || start <= 0.0)) || (!geometric && by <= 0.0) {
        return Some(Err(format!(
            "'{v}': a range steps up by a positive step (A..B:S) or a factor above 1 from a positive start (A..B*F)"
        )));
    }
    let mut out: Vec<String> = Vec::new();
    let mut x = start;
    let mut steps = 0u32;
    // A small slack so 0.80..0.90:0.05 ends at 0.90 despite rounding.
    while x <= end + by.abs() * 1e-9 && out.len() <= 1000 {
        let text = format!("{x:.decimals$}");
        // Rounding can print two steps of a geometric range alike (1..16*1.5: 2.25 and 2): once.
        if out.last() != Some(&text) {
            out.push(text);
        }
        steps += 1;
        x = if geometric {
            x * by
        } else {
            start + by * f64::from(steps)
        };
    }
    if out.len() > 1000 {
        return Some(Err(format!("'{v}': more than 1000 values")));
    }
    Some(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::serve_combinations;

    #[test]
    fn serve_param_ranges_expand_and_paths_stay_values() {
        let values = |spec: &str| -> Vec<String> {
            serve_combinations(&[spec.to_string()])
                .unwrap()
                .into_iter()
                .map(|c| c[0].1.clone())
                .collect()
        };
        assert_eq!(values("-np=1..4"), ["1", "2", "3", "4"]);
        assert_eq!(
            values("-np=1..64*2"),
            ["1", "2", "4", "8", "16", "32", "64"]
        );
        assert_eq!(values("--mem=0.80..0.90:0.05"), ["0.80", "0.85", "0.90"]);
        assert_eq!(values("-np=1..5:2,8"), ["1", "3", "5", "8"]);
        assert_eq!(values("-m=../m.gguf,a..b"), ["../m.gguf", "a..b"]);
        assert_eq!(values("-np=1..16*1.5"), ["1", "2", "3", "5", "8", "11"]);
        assert_eq!(values("--lr=1e-3..1e-2"), ["1e-3..1e-2"]);
        for bad in [
            "-np=4..1",
            "-np=1..4:0",
            "-np=1..8*1",
            "-np=1..4:x",
            "-np=0..1000000",
            "-np=1..4,2",
            "-np=1,1",
        ] {
            assert!(
                serve_combinations(&[bad.to_string()])
                    .is_err_and(|e| e.starts_with("--serve-param")),
                "{bad}"
            );
        }
    }

    #[test]
    fn serve_params_make_every_combination_and_bad_ones_are_named() {
        let c = serve_combinations(&["-np=1,2".into(), "max-num-seqs=64,128,256".into()]).unwrap();
        assert_eq!(c.len(), 6);
        assert_eq!(
            c[0],
            [
                ("-np".to_string(), "1".to_string()),
                ("--max-num-seqs".into(), "64".into())
            ]
        );
        assert_eq!(c[5][0].1, "2");
        assert_eq!(c[5][1].1, "256");
        assert!(serve_combinations(&[]).unwrap().is_empty());
        for bad in ["-np", "-np=", "=1,2", "--=3"] {
            let e = serve_combinations(&[bad.into()]).unwrap_err();
            assert!(e.contains("NAME=V1,V2"), "{bad}: {e}");
        }
        let e = serve_combinations(&["-np=1".into(), "-np=2".into()]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }
}
