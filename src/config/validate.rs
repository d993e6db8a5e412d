//! What clap cannot check of a run's configuration: values against each other, and the flags
//! that do not go together. Every refusal is one line naming the flag.

use super::{BackendChoice, RunConfig};

/// The fewest tokens a `--content` prompt of a kind other than `random` may have: its head
/// and foot (the instruction) take up to about 60 in common tokenizers, the rest is its body.
pub const MIN_CONTENT_TOKENS: u64 = 128;

impl RunConfig {
    /// The multi-turn level's sizes.
    fn validate_multi_turn(&self) -> Result<(), String> {
        let Some(mt) = self.multi_turn else {
            return Ok(());
        };
        if mt.turns == 0 || mt.conversations == 0 || mt.concurrency == 0 {
            return Err(
                "--multi-turn, --conversations and --conversation-concurrency must be at least 1"
                    .into(),
            );
        }
        if mt.turns > 1000 {
            return Err("--multi-turn must be at most 1000 turns".into());
        }
        if mt.followup_len == 0 {
            return Err("--followup-len must be at least 1".into());
        }
        Ok(())
    }

    /// The session levels' sizes, and what they do not go with yet.
    fn validate_sessions(&self) -> Result<(), String> {
        let Some(s) = &self.sessions else {
            return Ok(());
        };
        if self
            .search
            .as_ref()
            .is_some_and(|c| c.target == crate::workload::search::SearchTarget::Rate)
        {
            return Err(
                "--sessions with --search rate: sessions are searched in users; use --search concurrency"
                    .into(),
            );
        }
        if s.turns == 0 || s.turns > 1000 {
            return Err("--turns must be between 1 and 1000".into());
        }
        if s.tool_result_len == 0 {
            return Err("--tool-result-len must be at least 1".into());
        }
        if !s.rates.is_empty() && self.search.is_some() {
            return Err(
                "--session-rate with --search: the search picks its own levels of users; leave out --session-rate"
                    .into(),
            );
        }
        if s.fan_out > 64 {
            return Err(format!(
                "--fan-out {}: at most 64 sub-agents a session",
                s.fan_out
            ));
        }
        if s.fan_out > 0 && (s.sub_agent_turns == 0 || s.sub_agent_turns > 1000) {
            return Err("--sub-agent-turns must be between 1 and 1000".into());
        }
        for (flag, set) in [
            ("--trace", self.trace.is_some()),
            ("--dataset", self.dataset.is_some()),
            ("--images", self.images > 0),
            ("--response-format", self.response_format.is_some()),
        ] {
            if set {
                return Err(format!(
                    "--sessions with {flag}: not supported yet (run the sessions apart)"
                ));
            }
        }
        Ok(())
    }

    /// What only chat requests carry needs the chat endpoint; a thinking budget list is not
    /// searched over.
    fn validate_chat(&self) -> Result<(), String> {
        if self.wants_chat()
            && matches!(self.backend, BackendChoice::Openai | BackendChoice::Sglang)
        {
            return Err(
                "--tools, --tool-choice, --chat-template-kwargs, --thinking-budget and --images go in chat messages: use --backend openai-chat (or auto)"
                    .into(),
            );
        }
        if self.backend == BackendChoice::Anthropic && self.response_format.is_some() {
            return Err(
                "--response-format with --backend anthropic: not supported yet (the Messages API's output_config is not sent); use --backend openai-chat"
                    .into(),
            );
        }
        if !self.thinking_budgets.is_empty() && self.search.is_some() {
            return Err(
                "--thinking-budget with --search: search once per budget instead (one budget a run)"
                    .into(),
            );
        }
        Ok(())
    }

    /// `--repeat`: at least 1, and not with the search (its probes are chosen as it goes).
    fn validate_repeat(&self) -> Result<(), String> {
        if !(1..=100).contains(&self.repeat) {
            return Err(format!(
                "--repeat {}: run each level 1 to 100 times",
                self.repeat
            ));
        }
        if self.repeat > 1 && self.search.is_some() {
            return Err(
                "--repeat with --search: the search picks each probe from the last; repeat the run instead"
                    .into(),
            );
        }
        Ok(())
    }

    /// `--shard` needs the shared clock; the search cannot be time-bounded.
    fn validate_clock(&self) -> Result<(), String> {
        if let Some(s) = self.shard
            && s.count > 1
            && (self.clock.start_at_unix_ms.is_none() || self.clock.level_seconds.is_none())
        {
            return Err(format!(
                "--shard {}: give every shard the same --start-at TIME and --level-seconds S, so they change levels together",
                s.label()
            ));
        }
        let c = &self.clock;
        if c.start_at_unix_ms.is_some() && c.level_seconds.is_some() && c.drain_s < self.grace_s {
            return Err(format!(
                "--drain-seconds {} is shorter than --grace {}: requests still running at a slot's end take --grace to be cancelled, so every level would overrun its slot; give --drain-seconds at least {}",
                c.drain_s, self.grace_s, self.grace_s
            ));
        }
        if !self.clock.is_off() && self.search.is_some() {
            return Err(
                "--search picks each probe from the last: it cannot run on --level-seconds or --start-at"
                    .into(),
            );
        }
        Ok(())
    }

    /// `--request-rate inf` sends a level's requests all at once: their number must be given, and
    /// there is nothing to ramp up. Sessions start at a rate of sessions, never all at once.
    fn validate_infinite_rate(&self) -> Result<(), String> {
        if self.open_loop.request_rates.iter().any(|r| r.is_infinite()) {
            if !matches!(
                self.requests_per_level,
                crate::workload::RequestCount::Fixed(_)
            ) {
                return Err(
                    "--request-rate inf sends each level's requests all at once: say how many with --requests-per-level N (a number, not Fx)"
                        .into(),
                );
            }
            if self.open_loop.ramp_up_s > 0.0 {
                return Err(
                    "--request-rate inf with --ramp-up: every request is due at once, so there is nothing to ramp; leave out --ramp-up"
                        .into(),
                );
            }
        }
        if self
            .sessions
            .as_ref()
            .is_some_and(|s| s.rates.iter().any(|r| r.is_infinite()))
        {
            return Err(
                "--session-rate inf: sessions start at a rate of sessions a second; give a number"
                    .into(),
            );
        }
        Ok(())
    }

    /// A trace replays alone: flags that would add levels or shape its prompts are refused.
    fn validate_trace(&self) -> Result<(), String> {
        if self.trace.is_none() {
            return Ok(());
        }
        let rates = &self.open_loop.request_rates;
        for (set, flag) in [
            (!rates.is_empty(), "--request-rate"),
            (self.multi_turn.is_some(), "--multi-turn"),
            (self.search.is_some(), "--search"),
            (self.dataset.is_some(), "--dataset"),
            (self.shared_prefix_len > 0, "--shared-prefix-len"),
        ] {
            if set {
                return Err(format!(
                    "--trace replays the trace alone (its requests set their own times, lengths and shared prefixes); leave out {flag}, or run it separately"
                ));
            }
        }
        let agents = self
            .trace
            .as_ref()
            .and_then(|t| t.loaded.as_ref())
            .is_some_and(|t| t.is_sessions());
        if agents && self.shard.is_some() {
            return Err(
                "--shard with an agent trace (lines with session_id): not supported yet; replay it from one process"
                    .into(),
            );
        }
        Ok(())
    }

    /// `--range-ratio` spreads the lengths of random prompts at the sweep's and rate levels, and
    /// each drawn prompt must still hold the shared prefix and a token of its own.
    fn validate_range_ratio(&self, uses_input: bool) -> Result<(), String> {
        let Some(r) = self.range_ratio else {
            return Ok(());
        };
        if !(r.is_finite() && (0.0..1.0).contains(&r)) {
            return Err(format!("--range-ratio {r} must be from 0 to below 1"));
        }
        if self.dataset.is_some() || self.trace.is_some() {
            return Err(
                "--range-ratio spreads random prompts' lengths; a --dataset or --trace sets each request's own: leave one out"
                    .into(),
            );
        }
        let spread = !(self.concurrency.is_empty() && self.open_loop.request_rates.is_empty())
            || self.search.is_some();
        if !spread {
            return Err(
                "--range-ratio spreads the sweep's and rate levels' lengths, and this run has neither (the long-context ladder and multi-turn chats keep theirs)"
                    .into(),
            );
        }
        let (shortest, _) = crate::workload::mix::bounds(self.input_len, r, 1);
        if uses_input && self.shared_prefix_len > 0 && shortest <= self.shared_prefix_len {
            return Err(format!(
                "--range-ratio {r} draws prompts as short as {shortest} tokens, which cannot hold --shared-prefix-len {} and a token of their own: lower one of them",
                self.shared_prefix_len
            ));
        }
        Ok(())
    }

    /// `--response-format` doubles the sweep's, rate and long-context levels: a run must have
    /// one, and a search (whose probes follow each other's results) is run apart.
    fn validate_response_format(&self) -> Result<(), String> {
        if self.response_format.is_none() {
            return Ok(());
        }
        if self.search.is_some() {
            return Err(
                "--response-format runs each level twice, with and without the constraint; an SLO search cannot be paired so: search with and without --response-format separately"
                    .into(),
            );
        }
        if self.concurrency.is_empty()
            && self.open_loop.request_rates.is_empty()
            && self.long_context.is_empty()
        {
            return Err(
                "--response-format pairs the sweep's, rate and long-context levels with constrained twins, and this run has none of them"
                    .into(),
            );
        }
        Ok(())
    }

    /// `--content` runs the sweep's, rate and long-context levels once per kind: a run must
    /// have one; the kinds are the prompts, so no dataset; a search's probes are not passes;
    /// and each prompt must hold its kind's instruction.
    fn validate_content(&self) -> Result<(), String> {
        use crate::workload::content::ContentKind;
        if self.content.is_empty() {
            return Ok(());
        }
        if self.dataset.is_some() {
            return Err("--content and --dataset both choose the prompts: use one of them".into());
        }
        if self.search.is_some() {
            return Err(
                "--content with --search: not supported yet (search apart, with the default prompts)"
                    .into(),
            );
        }
        if self.concurrency.is_empty()
            && self.open_loop.request_rates.is_empty()
            && self.long_context.is_empty()
        {
            return Err(
                "--content runs the sweep's, rate and long-context levels once per kind, and this run has none of them"
                    .into(),
            );
        }
        if self.content.iter().all(|&k| k == ContentKind::Random) {
            return Ok(());
        }
        let shortest_sweep = (!(self.concurrency.is_empty()
            && self.open_loop.request_rates.is_empty()))
        .then(|| self.shortest_sweep_input());
        let shortest = shortest_sweep
            .map(|n| n.saturating_sub(self.shared_prefix_len))
            .into_iter()
            .chain(self.long_context.iter().copied())
            .min()
            .unwrap_or(u64::MAX);
        if shortest < MIN_CONTENT_TOKENS {
            return Err(format!(
                "--content: prompts of {shortest} tokens (after any shared prefix) are too short for a kind's instruction; give at least {MIN_CONTENT_TOKENS}"
            ));
        }
        Ok(())
    }

    /// `--shapes` runs the sweep's and rate levels once per input/output pair: a run must have
    /// one, its lengths are the shapes' (not a dataset's), a search's probes are not passes, and
    /// a shared prefix must be shorter than every shape's input.
    fn validate_shapes(&self) -> Result<(), String> {
        let Some(shortest) = self.shapes.iter().map(|s| s.input_len).min() else {
            return Ok(());
        };
        if self.dataset.is_some() {
            return Err(
                "--shapes and --dataset both set the lengths: the dataset's prompts have their own"
                    .into(),
            );
        }
        if self.search.is_some() {
            return Err(
                "--shapes with --search: not supported yet (search one shape at a time with --input-len and --output-len)"
                    .into(),
            );
        }
        if self.concurrency.is_empty() && self.open_loop.request_rates.is_empty() {
            return Err(
                "--shapes runs the sweep's and rate levels once per shape, and this run has none of them"
                    .into(),
            );
        }
        if self.shared_prefix_len >= shortest {
            return Err(format!(
                "--shared-prefix-len {} must be less than every shape's input ({shortest} is the shortest)",
                self.shared_prefix_len
            ));
        }
        Ok(())
    }

    /// `--shape-mix` and `--length-dist`: lengths of servetop's own prompts, drawn per request.
    fn validate_length_draws(&self) -> Result<(), String> {
        let drawn = !self.shape_mix.is_empty() || self.lognormal_sigma.is_some();
        if drawn && self.dataset.is_some() {
            return Err(
                "--shape-mix and --length-dist draw servetop's own prompt lengths; --dataset's prompts have their own"
                    .into(),
            );
        }
        if !self.shape_mix.is_empty() && self.search.is_some() {
            return Err(
                "--shape-mix with --search: not supported yet (search one shape at a time)".into(),
            );
        }
        if let Some(shortest) = self.shape_mix.iter().map(|w| w.shape.input_len).min()
            && self.shared_prefix_len >= shortest
        {
            return Err(format!(
                "--shared-prefix-len {} must be less than every mixed shape's input ({shortest} is the shortest)",
                self.shared_prefix_len
            ));
        }
        Ok(())
    }

    /// `--categories` runs the sweep's and rate levels once per dataset category.
    fn validate_categories(&self) -> Result<(), String> {
        if self.categories.is_empty() {
            return Ok(());
        }
        if self.search.is_some() {
            return Err(
                "--categories with --search: not supported yet (search apart, over the whole dataset)"
                    .into(),
            );
        }
        if self.concurrency.is_empty() && self.open_loop.request_rates.is_empty() {
            return Err(
                "--categories runs the sweep's and rate levels once per category, and this run has none of them"
                    .into(),
            );
        }
        Ok(())
    }

    /// `--images` go in chat messages of the sweep's, rate and search requests.
    fn validate_images(&self) -> Result<(), String> {
        if self.images == 0 {
            return Ok(());
        }
        if self.dataset.is_some() || self.trace.is_some() {
            return Err(
                "--images are added to random prompts; a --dataset or --trace sets its own requests: leave one out"
                    .into(),
            );
        }
        if self.concurrency.is_empty()
            && self.open_loop.request_rates.is_empty()
            && self.search.is_none()
        {
            return Err(
                "--images are sent with the sweep's, rate and search requests, and this run has none of them"
                    .into(),
            );
        }
        Ok(())
    }

    /// The dimensions that run a level again another way, and the images requests carry.
    fn validate_passes(&self) -> Result<(), String> {
        self.validate_response_format()?;
        self.validate_content()?;
        self.validate_categories()?;
        self.validate_shapes()?;
        self.validate_length_draws()?;
        self.validate_images()
    }

    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        // A file the run will read is checked before any server is asked anything.
        if let Some(p) = self.dataset.as_ref().filter(|p| !p.is_file()) {
            return Err(format!("--dataset {}: no such file", p.display()));
        }
        let rates = &self.open_loop.request_rates;
        for (flag, v) in [
            ("--gpu-hour-cost", self.gpu_hour_cost),
            ("--cost-per-hour", self.cost_per_hour),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return Err(format!(
                    "{flag} must be a price of 0 or more (USD per hour)"
                ));
            }
        }
        self.validate_chat()?;
        self.validate_infinite_rate()?;
        if let Some(s) = &self.search {
            s.validate()?;
            if self.slo.is_none() {
                return Err(
                    "--search needs --slo: the objectives to search against (e.g. --slo ttft:2000,tpot:50)"
                        .into(),
                );
            }
        }
        if self.concurrency.is_empty()
            && self.long_context.is_empty()
            && rates.is_empty()
            && self.search.is_none()
            && self.multi_turn.is_none()
            && self.sessions.is_none()
            && self.trace.is_none()
        {
            return Err(
                "nothing to run: --concurrency and --long-context are none and there is no --request-rate, --multi-turn, --sessions or --trace"
                    .into(),
            );
        }
        self.validate_trace()?;
        self.validate_repeat()?;
        self.validate_clock()?;
        self.validate_multi_turn()?;
        self.validate_sessions()?;
        // With --shapes the sweep and rate levels have the shapes' inputs (checked there).
        let uses_input = (self.shapes.is_empty()
            && self.shape_mix.is_empty()
            && !(self.concurrency.is_empty() && rates.is_empty()))
            || self.multi_turn.is_some()
            || self.sessions.is_some()
            || self.search.is_some();
        if self.shared_prefix_len > 0 && uses_input && self.shared_prefix_len >= self.input_len {
            return Err(format!(
                "--shared-prefix-len {} must be less than --input-len {} (it is the shared part of each prompt)",
                self.shared_prefix_len, self.input_len
            ));
        }
        self.validate_range_ratio(uses_input)?;
        self.validate_passes()?;
        // `inf` (every request at once) is a rate too; NaN and 0 or less are not.
        if rates.iter().any(|r| r.is_nan() || *r <= 0.0) {
            return Err(
                "--request-rate values must be positive numbers of requests/s, or inf".into(),
            );
        }
        let ol = &self.open_loop;
        if !(ol.burstiness.is_finite() && ol.burstiness > 0.0 && ol.burstiness <= 1000.0) {
            return Err(
                "--burstiness must be above 0 (1 is Poisson, below 1 burstier) and at most 1000"
                    .into(),
            );
        }
        if !(ol.ramp_up_s.is_finite() && ol.ramp_up_s >= 0.0) {
            return Err("--ramp-up must be zero or more seconds".into());
        }
        if ol.max_concurrency == Some(0) {
            return Err("--max-concurrency must be at least 1 (leave it out for no cap)".into());
        }
        if self.input_len == 0 && uses_input {
            return Err("--input-len must be at least 1".into());
        }
        if self.output_len == 0 || self.long_context_output_len == 0 {
            return Err("output lengths must be at least 1 token".into());
        }
        for (v, n) in [
            (self.first_token_timeout_s, "--first-token-timeout"),
            (self.idle_timeout_s, "--idle-timeout"),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{n} must be a positive number of seconds"));
            }
        }
        if !(self.gpu_interval_s.is_finite() && self.gpu_interval_s >= 0.05) {
            return Err("--gpu-interval must be at least 0.05 seconds".into());
        }
        if !(self.server_wait_s.is_finite() && self.server_wait_s >= 0.0) {
            return Err("--server-wait must be zero or more seconds".into());
        }
        if !(self.grace_s.is_finite() && self.grace_s >= 0.0) {
            return Err("--grace must be zero or more seconds".into());
        }
        self.validate_urls()
    }

    /// The server's URL (unless `--serve` gives it later) and the telemetry endpoints.
    fn validate_urls(&self) -> Result<(), String> {
        for (u, n) in [
            (&self.metrics_url, "--metrics-url"),
            (&self.dcgm_url, "--dcgm-url"),
        ] {
            if let Some(u) = u {
                reqwest::Url::parse(u).map_err(|e| format!("{n} '{u}' is not a URL ({e})"))?;
            }
        }
        if let Some(serve) = &self.serve {
            serve.validate()?;
            // The URL is the started server's, known once it has a port.
            if self.base_url.is_empty() {
                return Ok(());
            }
        }
        let url = reqwest::Url::parse(&self.base_url)
            .map_err(|e| format!("--base-url '{}' is not a URL ({e})", self.base_url))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "--base-url '{}' must start with http:// or https://",
                self.base_url
            ));
        }
        Ok(())
    }
}
