use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;

use super::*;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-live-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn append(dir: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(crate::live::journal::FILE))
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn the_socket_is_its_owners_alone() {
    let dir = scratch("perm");
    let feed = Feed::start(&dir, None).unwrap();
    let meta = std::fs::metadata(dir.join(SOCKET)).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The private directory it was bound in is gone.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec![SOCKET.to_string()]);
    // A second run cannot serve the same directory while the first answers.
    let again = Feed::start(&dir, None).err().unwrap();
    assert!(again.contains("still going on"), "{again}");
    drop(feed);
    assert!(!dir.join(SOCKET).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_viewer_gets_the_lines_before_and_after_it_came_then_the_end() {
    let dir = scratch("lines");
    append(&dir, "one\ntwo\n");
    let feed = Feed::start(&dir, Some("127.0.0.1:0")).unwrap();
    let unix = UnixStream::connect(dir.join(SOCKET)).unwrap();
    let tcp = std::net::TcpStream::connect(feed.tcp_addr().unwrap()).unwrap();
    let mut unix = BufReader::new(unix);
    let mut tcp = BufReader::new(tcp);
    let mut line = String::new();
    for want in ["one\n", "two\n"] {
        line.clear();
        unix.read_line(&mut line).unwrap();
        assert_eq!(line, want);
    }
    // Half a line is not sent until its end is written.
    append(&dir, "thr");
    std::thread::sleep(POLL * 4);
    append(&dir, "ee\n");
    line.clear();
    unix.read_line(&mut line).unwrap();
    assert_eq!(line, "three\n");
    append(&dir, "four\n");
    drop(feed);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut unix, &mut rest).unwrap();
    assert_eq!(rest, "four\n");
    let mut all = String::new();
    std::io::Read::read_to_string(&mut tcp, &mut all).unwrap();
    assert_eq!(all, "one\ntwo\nthree\nfour\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_command_sent_before_the_run_obeys_waits_for_it() {
    let dir = scratch("early");
    let feed = Feed::start(&dir, None).unwrap();
    // A viewer that stops the run as soon as the socket appears, while the run is still
    // getting ready (nothing obeys yet).
    let mut s = UnixStream::connect(dir.join(SOCKET)).unwrap();
    s.write_all(b"pause\nstop\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (control, rx) = watch::channel(Control::default());
    let cancel = CancellationToken::new();
    feed.obey(Remote {
        control: Arc::new(control),
        cancel: cancel.clone(),
    });
    let until = Instant::now() + Duration::from_secs(10);
    while !cancel.is_cancelled() && Instant::now() < until {
        std::thread::sleep(POLL);
    }
    assert!(cancel.is_cancelled(), "the early stop was lost");
    assert!(rx.borrow().paused, "the early pause was lost");
    drop(feed);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn commands_reach_the_run_from_the_socket() {
    let dir = scratch("commands");
    let feed = Feed::start(&dir, None).unwrap();
    let (control, rx) = watch::channel(Control::default());
    let cancel = CancellationToken::new();
    feed.obey(Remote {
        control: Arc::new(control),
        cancel: cancel.clone(),
    });
    let mut s = UnixStream::connect(dir.join(SOCKET)).unwrap();
    s.write_all(b"pause\nskip\nnonsense\nskip\n").unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while *rx.borrow()
        != (Control {
            paused: true,
            skip: 2,
        })
        && Instant::now() < until
    {
        std::thread::sleep(POLL);
    }
    assert_eq!(
        *rx.borrow(),
        Control {
            paused: true,
            skip: 2
        }
    );
    assert!(!cancel.is_cancelled());
    s.write_all(b"resume\nstop\n").unwrap();
    while !cancel.is_cancelled() && Instant::now() < until {
        std::thread::sleep(POLL);
    }
    assert!(cancel.is_cancelled());
    assert!(!rx.borrow().paused);
    drop(feed);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_registered_run_is_listed_until_it_ends() {
    let dir = scratch("registry");
    let r = registry::register(&dir).unwrap();
    let listed = registry::list().unwrap();
    assert!(
        listed
            .iter()
            .any(|l| l.pid == std::process::id() && l.dir == dir),
        "{listed:?}"
    );
    drop(r);
    let listed = registry::list().unwrap();
    assert!(!listed.iter().any(|l| l.dir == dir), "{listed:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
