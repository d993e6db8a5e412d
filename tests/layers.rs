//! `scripts/layers.py`, the check `.ci/run` runs on the crate's floors and room sizes: the tree
//! as it is passes, and each fault planted in a small tree of its own is named.

use std::path::Path;
use std::process::Command;

/// The check run on the repository at `root`: its exit code and what it printed.
fn layers(root: Option<&Path>) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/layers.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script);
    if let Some(r) = root {
        cmd.arg("--root").arg(r);
    }
    let out = cmd.output().expect("python3 runs scripts/layers.py");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// A repository with `files` (path under src/, contents) and nothing else.
fn tree(files: &[(&str, String)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("servetop-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join("src").join(path);
        std::fs::create_dir_all(p.parent().expect("a file has a folder"))
            .expect("the folder is made");
        std::fs::write(p, text).expect("the file is written");
    }
    dir
}

#[test]
fn the_tree_as_it_is_keeps_its_floors() {
    let (code, text) = layers(None);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("no import up"), "{text}");
}

#[test]
fn an_import_up_a_sibling_and_a_long_file_are_named_and_nothing_else() {
    let long = "fn f() {}\n".repeat(700);
    let dir = tree(&[
        (
            "workload/mod.rs",
            concat!(
                "//! Mentions crate::cli in a comment only.\n",
                "use crate::cli::Args;\n",
                "const S: &str = \"crate::tui in a string\";\n",
                "#[cfg(test)]\nmod tests {\n    use crate::config::RunConfig;\n}\n",
            )
            .to_string(),
        ),
        (
            "cli/mod.rs",
            "use crate::tui::App;\nuse crate::config::X;\n".into(),
        ),
        ("metrics/mod.rs", long.clone()),
        (
            "fmt.rs",
            "fn g() {}\n".repeat(600)
                + "#[cfg(test)]\nmod tests {\n    use crate::cmd::run;\n"
                + &"    fn t() {}\n".repeat(100)
                + "}\n",
        ),
        ("sim/mod.rs", "use crate::{workload, cli};\n".into()),
        (
            "tui/mod.rs",
            "#[cfg(any(test, feature = \"fixtures\"))]\npub mod fixtures;\n".into(),
        ),
        (
            "tui/fixtures/mod.rs",
            "use crate::cmd::x;\nmod build;\n".to_string() + &"fn h() {}\n".repeat(700),
        ),
        ("tui/fixtures/build.rs", "use crate::selfbench::y;\n".into()),
    ]);
    let (code, text) = layers(Some(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 1, "{text}");
    for named in [
        "src/workload/mod.rs: imports crate::cli, a floor above",
        "src/cli/mod.rs: imports crate::tui, a sibling on its floor",
        "src/metrics/mod.rs: 700 lines before its tests",
        "src/sim/mod.rs: imports crate::cli, a floor above",
        "layers: 4 problem(s)",
    ] {
        assert!(text.contains(named), "not named: {named}\n{text}");
    }
    // Comments, strings and test modules are not imports; a file's tests are not its length.
    // Nor are the fixtures the tests share with the benches (`cfg(any(test, ...))`), all of them.
    for quiet in [
        "crate::config, a floor",
        "crate::tui, a floor",
        "fmt.rs",
        "crate::cmd",
        "fixtures",
        "crate::selfbench",
    ] {
        assert!(!text.contains(quiet), "named: {quiet}\n{text}");
    }
}
