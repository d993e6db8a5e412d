//! Headless Chromium driven over the Chrome `DevTools` Protocol, for the tests that look at pages
//! in a real browser: open a file, evaluate script in it, click, take screenshots, and read what
//! the page logged and loaded.
//!
//! The protocol runs over `--remote-debugging-pipe` (commands on fd 3, answers and events on
//! fd 4, each a JSON text ended by a NUL byte), so no WebSocket client is needed. A shell moves
//! the child's stdin and stdout pipes onto those descriptors before it becomes Chromium, which
//! keeps this free of unsafe code.

// Each test uses its own share of these.
#![allow(dead_code)]

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// How long a command, or a page's load, may take before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Chromium's flags besides the profile and the window: headless, and quiet (no first-run
/// pages, no background fetches, no extensions) so a page's requests are its own.
const FLAGS: &[&str] = &[
    "--headless --no-sandbox --disable-gpu --disable-background-networking",
    "--disable-component-update --disable-default-apps --disable-extensions --disable-sync",
    "--metrics-recording-only --no-first-run --no-default-browser-check --mute-audio",
    "--hide-scrollbars --remote-debugging-pipe",
];

/// No host name but localhost resolves: a page reaching out fails at once instead of waiting
/// on DNS, and its request is still seen.
const RESOLVER_RULES: &str = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost";

/// Scrolls the first element matching a selector to the middle of the viewport and says where
/// its centre is, its size, and what covers that centre when something else does; null when
/// nothing matches.
const LOCATE: &str = "(selector) => {
    const e = document.querySelector(selector);
    if (!e) return null;
    e.scrollIntoView({ block: 'center', behavior: 'instant' });
    const r = e.getBoundingClientRect(), x = r.left + r.width / 2, y = r.top + r.height / 2;
    const hit = document.elementFromPoint(x, y);
    const covered = hit && !e.contains(hit) ? hit.outerHTML.slice(0, 80) : null;
    return { x, y, width: r.width, height: r.height, covered };
}";

/// The Chromium binary to drive: `$SERVETOP_CHROMIUM`, else the first of chromium,
/// chromium-browser, google-chrome on `PATH`. None when there is none.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SERVETOP_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let dirs = std::env::var_os("PATH")?;
    let names = ["chromium", "chromium-browser", "google-chrome"];
    let paths = names.map(|name| std::env::split_paths(&dirs).map(move |d| d.join(name)));
    paths.into_iter().flatten().find(|p| p.is_file())
}

/// A command's result, or what went wrong.
type Answer = Result<Value, String>;

/// One event as it arrived: when, its method, the session it belongs to, and its parameters.
struct Event {
    at: Instant,
    method: String,
    session: Option<String>,
    params: Value,
}

/// A headless Chromium and the page it has open.
pub struct Browser {
    child: Child,
    commands: Option<ChildStdin>,
    /// Every message Chromium sends, in order; the answers to commands are looked for here.
    messages: Receiver<Value>,
    /// Every event, recorded by the reader thread as it arrives.
    events: Arc<Mutex<Vec<Event>>>,
    next_id: u64,
    /// The open page's target and its flattened session.
    target: Option<String>,
    session: Option<String>,
    /// The viewport every page gets, in CSS pixels.
    viewport: (u32, u32),
    /// The temporary profile, removed on drop; Chromium's stderr goes to a log in it.
    profile: PathBuf,
}

impl Browser {
    /// Starts Chromium with a window of width x height CSS pixels.
    pub fn launch(binary: &Path, width: u32, height: u32) -> Result<Browser, String> {
        static LAUNCHES: AtomicU32 = AtomicU32::new(0);
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let name = format!("servetop-chromium-{}-{n}", std::process::id());
        let profile = std::env::temp_dir().join(name);
        let _ = fs::remove_dir_all(&profile);
        let log = fs::create_dir_all(&profile)
            .and_then(|()| fs::File::create(profile.join("chromium.log")))
            .map_err(|e| format!("cannot create the profile {}: {e}", profile.display()))?;
        let mut user_data = OsString::from("--user-data-dir=");
        user_data.push(&profile);
        // The shell puts the pipes on fds 3 and 4, then becomes Chromium (Debian's wrapper
        // script in between execs it too, so the descriptors reach it).
        let spawned = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(binary)
            .args(FLAGS.iter().flat_map(|f| f.split_whitespace()))
            .arg(RESOLVER_RULES)
            .arg(user_data)
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            // Chromium keeps its crash database and caches under these whatever the profile
            // is; pointed into the profile, they go with it.
            .env("XDG_CONFIG_HOME", &profile)
            .env("XDG_CACHE_HOME", &profile)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = fs::remove_dir_all(&profile);
                return Err(format!("cannot start {}: {e}", binary.display()));
            }
        };
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, messages) = mpsc::channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&events);
        std::thread::spawn(move || read_messages(stdout, &tx, &recorded));
        let mut browser = Browser {
            commands: child.stdin.take(),
            child,
            messages,
            events,
            next_id: 1,
            target: None,
            session: None,
            viewport: (width, height),
            profile,
        };
        // On an error, dropping `browser` stops Chromium and removes the profile.
        browser.browser("Browser.getVersion", json!({}))?;
        Ok(browser)
    }

    /// Opens `file` (an absolute path) in a new page and waits for its load event; the page
    /// opened before is closed. Returns the milliseconds from the navigation to the load event.
    pub fn open(&mut self, file: &Path) -> Result<f64, String> {
        if !file.is_absolute() {
            return Err(format!("{} is not an absolute path", file.display()));
        }
        if let Some(old) = self.target.take() {
            self.session = None;
            self.browser("Target.closeTarget", json!({ "targetId": old }))?;
        }
        let created = self.browser("Target.createTarget", json!({ "url": "about:blank" }))?;
        let target = field(&created, "targetId", "Target.createTarget")?;
        self.target = Some(target.clone());
        let attach = json!({ "targetId": target, "flatten": true });
        let attached = self.browser("Target.attachToTarget", attach)?;
        self.session = Some(field(&attached, "sessionId", "Target.attachToTarget")?);
        // Headless Chromium's viewport is shorter than its window; the page gets exactly the
        // size asked for, at one device pixel per CSS pixel.
        let (width, height) = self.viewport;
        let metrics =
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false });
        self.page("Emulation.setDeviceMetricsOverride", metrics)?;
        for domain in ["Page", "Runtime", "Log", "Network"] {
            self.page(&format!("{domain}.enable"), json!({}))?;
        }
        // Lifecycle events name the document they belong to, so the load waited for below is
        // the navigation's own and not the blank page's.
        self.page("Page.setLifecycleEventsEnabled", json!({ "enabled": true }))?;
        let url = file_url(file);
        let start = Instant::now();
        let navigated = self.page("Page.navigate", json!({ "url": url }))?;
        if let Some(error) = navigated["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Err(format!("Page.navigate {url}: {error}"));
        }
        let loader = field(&navigated, "loaderId", "Page.navigate")?;
        let deadline = start + TIMEOUT;
        loop {
            let load = self.page_events(|e| {
                let p = &e.params;
                let ours = p["name"] == "load" && p["loaderId"] == *loader;
                (e.method == "Page.lifecycleEvent" && ours).then_some(e.at)
            });
            if let Some(at) = load.first() {
                return Ok(at.duration_since(start).as_secs_f64() * 1000.0);
            }
            // Any message wakes this up to look again.
            self.next_message(deadline, &format!("loading {url}"))?;
        }
    }

    /// Evaluates `expression` on the page, awaiting it when it is a promise, and returns its
    /// value (null for undefined); Err with the exception's text when it throws.
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let params =
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true });
        let mut result = self.page("Runtime.evaluate", params)?;
        if let Some(details) = result.get("exceptionDetails") {
            return Err(format!("{expression}: {}", exception_text(details)));
        }
        Ok(result["result"]["value"].take())
    }

    /// Waits until `expression` evaluates to true (polling every 50 ms) or `timeout` passes.
    pub fn wait_for(&mut self, expression: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while self.eval(expression)? != Value::Bool(true) {
            if Instant::now() >= deadline {
                return Err(format!("{expression} was not true within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// A real mouse click (moved, pressed, released) at the centre of the first element
    /// matching the CSS `selector`, scrolled into view first; Err when nothing matches, it has
    /// no size, or something else covers its centre (the click would land there instead).
    pub fn click(&mut self, selector: &str) -> Result<(), String> {
        let quoted = serde_json::to_string(selector).expect("a string serializes");
        let found = self.eval(&format!("({LOCATE})({quoted})"))?;
        if found.is_null() {
            return Err(format!("no element matches {selector}"));
        }
        let size = |key: &str| found[key].as_f64().unwrap_or(0.0);
        if size("width") <= 0.0 || size("height") <= 0.0 {
            return Err(format!("{selector} has no size"));
        }
        if let Some(other) = found["covered"].as_str() {
            return Err(format!("{selector} is covered by {other}"));
        }
        for (kind, buttons) in [("mouseMoved", 0), ("mousePressed", 1), ("mouseReleased", 0)] {
            let mut event = json!({ "type": kind, "x": found["x"], "y": found["y"] });
            if kind != "mouseMoved" {
                event["button"] = json!("left");
                event["buttons"] = json!(buttons);
                event["clickCount"] = json!(1);
            }
            self.page("Input.dispatchMouseEvent", event)?;
        }
        Ok(())
    }

    /// Saves a PNG screenshot of the viewport, or with `full_page` of the whole document at
    /// scale 1, into `path`.
    pub fn screenshot(&mut self, path: &Path, full_page: bool) -> Result<(), String> {
        let mut params = json!({ "format": "png", "captureBeyondViewport": full_page });
        if full_page {
            let metrics = self.page("Page.getLayoutMetrics", json!({}))?;
            let (width, height) = (
                &metrics["cssContentSize"]["width"],
                &metrics["cssContentSize"]["height"],
            );
            params["clip"] =
                json!({ "x": 0, "y": 0, "width": width, "height": height, "scale": 1 });
        }
        let shot = self.page("Page.captureScreenshot", params)?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(field(&shot, "data", "Page.captureScreenshot")?)
            .map_err(|e| format!("Page.captureScreenshot: {e}"))?;
        fs::write(path, png).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The page's console errors and warnings, its uncaught exceptions, and the errors the
    /// browser logged for it (failed loads among them), in order, one line each with its kind.
    pub fn console_errors(&self) -> Vec<String> {
        self.page_events(|e| match e.method.as_str() {
            "Runtime.consoleAPICalled" => {
                let kind = text(&e.params["type"]);
                let args = e.params["args"].as_array().into_iter().flatten();
                let args: Vec<String> = args.map(remote_text).collect();
                let line = format!("console.{kind}: {}", one_line(&args.join(" ")));
                let wanted = ["error", "assert", "warning"].contains(&kind);
                wanted.then_some(line)
            }
            "Runtime.exceptionThrown" => {
                let details = &e.params["exceptionDetails"];
                Some(format!("exception: {}", exception_text(details)))
            }
            "Log.entryAdded" if e.params["entry"]["level"] == "error" => {
                let entry = &e.params["entry"];
                let (source, message, url) = (&entry["source"], &entry["text"], &entry["url"]);
                let line = format!("log.{}: {} {}", text(source), text(message), text(url));
                Some(one_line(&line))
            }
            _ => None,
        })
    }

    /// The URL of every request the page made, its own file:// URL included, in order.
    pub fn requests(&self) -> Vec<String> {
        self.page_events(|e| {
            let url = e.params["request"]["url"].as_str().map(str::to_string);
            url.filter(|_| e.method == "Network.requestWillBeSent")
        })
    }

    /// What `pick` takes from each event of the open page so far.
    fn page_events<T>(&self, pick: impl FnMut(&Event) -> Option<T>) -> Vec<T> {
        let Some(session) = self.session.as_deref() else {
            return Vec::new();
        };
        let events = self.events.lock().expect("no panic holds it");
        let ours = |e: &&Event| e.session.as_deref() == Some(session);
        events.iter().filter(ours).filter_map(pick).collect()
    }

    /// Sends `method` to the open page and waits for its answer.
    fn page(&mut self, method: &str, params: Value) -> Answer {
        self.call(true, method, params, TIMEOUT)
    }

    /// Sends `method` to the browser itself and waits for its answer.
    fn browser(&mut self, method: &str, params: Value) -> Answer {
        self.call(false, method, params, TIMEOUT)
    }

    /// Sends `method` to the browser, or with `page` to the open page, and waits up to
    /// `wait` for its answer; Err with Chromium's message when it answers with an error.
    fn call(&mut self, page: bool, method: &str, params: Value, wait: Duration) -> Answer {
        let id = self.next_id;
        self.next_id += 1;
        let mut command = json!({ "id": id, "method": method });
        command["params"] = params;
        if page {
            command["sessionId"] = json!(self.session.as_deref().ok_or("no page is open")?);
        }
        let mut bytes = serde_json::to_vec(&command).expect("a JSON value serializes");
        bytes.push(0);
        let pipe = self.commands.as_mut().ok_or("Chromium's pipe is closed")?;
        // A failed write means Chromium is gone; its log says why.
        if pipe.write_all(&bytes).and_then(|()| pipe.flush()).is_err() {
            return Err(self.gone(method));
        }
        let deadline = Instant::now() + wait;
        loop {
            let mut message = self.next_message(deadline, method)?;
            if message["id"] == id {
                return match message["error"]["message"].as_str() {
                    Some(error) => Err(format!("{method}: {error}")),
                    None => Ok(message["result"].take()),
                };
            }
        }
    }

    /// The next message from Chromium; Err naming `what` was waited for when none comes
    /// before `deadline` or Chromium is gone.
    fn next_message(&self, deadline: Instant, what: &str) -> Result<Value, String> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.messages.recv_timeout(left).map_err(|e| match e {
            RecvTimeoutError::Timeout => format!("{what}: timed out"),
            RecvTimeoutError::Disconnected => self.gone(what),
        })
    }

    /// Says that Chromium went away during `what`, with the end of its log.
    fn gone(&self, what: &str) -> String {
        let log = fs::read(self.profile.join("chromium.log")).unwrap_or_default();
        let tail = String::from_utf8_lossy(&log[log.len().saturating_sub(2000)..]).into_owned();
        let tail = tail.trim_end();
        format!("Chromium closed its pipe during {what}; its log ends:\n{tail}")
    }
}

impl Drop for Browser {
    /// Closes Chromium (asking first, then killing it) and removes its profile.
    fn drop(&mut self) {
        let _ = self.call(false, "Browser.close", json!({}), Duration::from_secs(5));
        self.commands = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Chromium's helpers may still be writing as they exit; another try gets what they left.
        for _ in 0..5 {
            if fs::remove_dir_all(&self.profile).is_ok() || !self.profile.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Splits what Chromium writes into its NUL-ended messages, records the events, and passes
/// every message on, until Chromium closes the pipe or nobody listens.
fn read_messages(stdout: ChildStdout, tx: &Sender<Value>, events: &Mutex<Vec<Event>>) {
    let mut pipe = BufReader::new(stdout);
    let mut buf = Vec::new();
    while matches!(pipe.read_until(0, &mut buf), Ok(n) if n > 0) {
        let message = buf.strip_suffix(&[0]).unwrap_or(&buf);
        if let Ok(message) = serde_json::from_slice::<Value>(message) {
            if let Some(method) = message["method"].as_str() {
                let mut events = events.lock().expect("no panic holds it");
                events.push(Event {
                    at: Instant::now(),
                    method: method.to_string(),
                    session: message["sessionId"].as_str().map(str::to_string),
                    params: message["params"].clone(),
                });
            }
            if tx.send(message).is_err() {
                return;
            }
        }
        buf.clear();
    }
}

/// A string value, or "" when it is not one.
fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// `text` with its lines trimmed and joined by spaces (an error's stack among them).
fn one_line(text: &str) -> String {
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines.collect::<Vec<_>>().join(" ")
}

/// The string `key` of a command's result, or Err naming the `method` that lacks it.
fn field(result: &Value, key: &str, method: &str) -> Result<String, String> {
    let value = result[key].as_str().map(str::to_string);
    value.ok_or_else(|| format!("{method}: no {key}"))
}

/// The file:// URL of an absolute path, its bytes outside the unreserved set percent-encoded.
fn file_url(path: &Path) -> String {
    let encode = |&b: &u8| match b {
        b'/' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
        _ if b.is_ascii_alphanumeric() => char::from(b).to_string(),
        _ => format!("%{b:02X}"),
    };
    let path: String = path.as_os_str().as_bytes().iter().map(encode).collect();
    format!("file://{path}")
}

/// A console argument as text: a string as it is, another value as JSON, an object by its
/// description.
fn remote_text(arg: &Value) -> String {
    match arg.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(value) => value.to_string(),
        None => ["unserializableValue", "description", "type"]
            .iter()
            .find_map(|key| arg[key].as_str())
            .unwrap_or("undefined")
            .to_string(),
    }
}

/// An exception's text on one line: "Uncaught" and the like, the error's first line, and
/// where it was thrown.
fn exception_text(details: &Value) -> String {
    let mut line = text(&details["text"]).to_string();
    // An error has a description; a thrown string or number only its value.
    let thrown = &details["exception"];
    let thrown = match thrown["description"].as_str() {
        Some(description) => description.to_string(),
        None if thrown.get("value").is_some() => remote_text(thrown),
        None => String::new(),
    };
    // A rejected promise's text already ends with the error's first line.
    if let Some(first) = thrown.lines().next().filter(|f| !line.ends_with(f)) {
        line = format!("{line} {first}");
    }
    let url = text(&details["url"]);
    if !url.is_empty() {
        let at = |key: &str| details[key].as_u64().unwrap_or(0) + 1;
        let (row, column) = (at("lineNumber"), at("columnNumber"));
        line = format!("{line} at {url}:{row}:{column}");
    }
    line
}
