//! How long the answers were where the model ended them (`--natural-stop`): one row a level.

use std::fmt::Write;

use crate::fmt::num;
use crate::summary::LevelSummary;

/// The answer lengths of every level sent with natural stops: the cap, the median, p90 and
/// longest answer, and how many reached the cap or were ended by the model. Empty when no
/// level was.
pub fn answer_lengths_section(levels: &[LevelSummary]) -> String {
    let mut rows = String::new();
    for l in levels {
        let Some(st) = &l.stats else { continue };
        let (Some(at_cap), Some(d)) = (
            st.scalars.reached_output_cap,
            st.dists.output_tokens_per_request.as_ref(),
        ) else {
            continue;
        };
        let _ = writeln!(
            rows,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            l.label(),
            l.output_len,
            st.scalars.completed,
            num(Some(d.p50)),
            num(Some(d.p90)),
            num(Some(d.max)),
            at_cap,
            st.scalars.ended_by_model.unwrap_or(0)
        );
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n## Answer lengths (natural stops)\n\n| level | cap | done | median | p90 | longest | reached the cap | ended by the model |\n|---|---:|---:|---:|---:|---:|---:|---:|\n{rows}\nOutput tokens of each level's completed answers, sent without ignore_eos so the model ends them (--natural-stop): the cap is the most each could write; reached the cap: finish reason `length`; ended by the model: any other finish reason. Throughput, TPOT and E2E above are those of answers this long.\n"
    )
}
