//! A `servetop sim` child process (the fast preset, a free port), for the suites that drive the
//! binary against a simulator of its own; returns the child and the URL it printed.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, dead_code)]

use std::process::{Child, Command, Stdio};

/// `servetop sim --preset fast --port 0` with `args` added and `env` set.
pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_servetop"));
    cmd.args(["sim", "--preset", "fast", "--port", "0"])
        .args(args)
        .envs(env.iter().copied());
    start(cmd)
}

/// Starts `cmd`, a `servetop sim` (perhaps behind `taskset`), and reads the URL it prints first.
pub fn start(mut cmd: Command) -> (Child, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().to_string())
}

/// A child process killed (and reaped) when dropped, so a failing test leaves none behind.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The body of `GET path` from the server at `url` (`http://host:port`), over a plain socket.
pub fn get(url: &str, path: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let at = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    buf.split_off(at + 4)
}
