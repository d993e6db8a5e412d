//! Credentials kept out of what servetop writes for others to read: a server command's API
//! keys and tokens (`--api-key X`, `--hf-token=X`, `HF_TOKEN=X`) written `***` in events.jsonl
//! and report.html. Header values are masked where they are kept ([`crate::config::header`]).

use crate::summary::RunSummary;

/// `summary` with the server commands' secrets masked.
pub fn redact_summary(s: &mut RunSummary) {
    if let Some(serve) = s.config.serve.as_mut() {
        serve.command = redact_command(&serve.command);
    }
    for l in &mut s.servers {
        l.command = redact_command(&l.command);
    }
}

/// Words of a flag or variable name that say it holds a credential.
const SECRET_WORDS: [&str; 6] = ["key", "token", "secret", "password", "passwd", "auth"];

fn names_a_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| n.contains(w))
}

/// `command` with the values of credential flags (`--api-key X`, `--hf-token=X`) and
/// variables (`HF_TOKEN=X`) replaced by `***`; everything else as it was.
pub fn redact_command(command: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut mask_next = false;
    for word in command.split(' ') {
        if mask_next && !word.is_empty() {
            out.push("***".into());
            mask_next = false;
            continue;
        }
        if let Some(flag) = word.strip_prefix('-') {
            match flag.split_once('=') {
                Some((name, _)) if names_a_secret(name) => out.push(format!("-{name}=***")),
                Some(_) => out.push(word.into()),
                None => {
                    mask_next = names_a_secret(flag);
                    out.push(word.into());
                }
            }
            continue;
        }
        match word.split_once('=') {
            Some((name, _))
                if !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && names_a_secret(name) =>
            {
                out.push(format!("{name}=***"));
            }
            _ => out.push(word.into()),
        }
    }
    out.join(" ")
}

/// `summary` as it may be sent: a copy with its server commands' secrets masked.
pub fn redacted(summary: &RunSummary) -> RunSummary {
    let mut s = summary.clone();
    redact_summary(&mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_server_command_are_masked_and_nothing_else() {
        let cmd = "HF_TOKEN=hf_abc CUDA_VISIBLE_DEVICES=0,1 vllm serve M --port 8000 --api-key sk-1 --max-model-len 32768 --hf-token=hf_x --auth-header 'y'";
        assert_eq!(
            redact_command(cmd),
            "HF_TOKEN=*** CUDA_VISIBLE_DEVICES=0,1 vllm serve M --port 8000 --api-key *** --max-model-len 32768 --hf-token=*** --auth-header ***"
        );
        let plain = "python -m sglang.launch_server --model-path M --tp 2 --reasoning-parser qwen3";
        assert_eq!(redact_command(plain), plain);
    }
}
