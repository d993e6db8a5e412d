//! The Kubernetes examples (examples/kubernetes/) parse, and name only fields the Kubernetes API
//! has for each object (the fields below, from the API reference of `batch/v1` `Job` and
//! `core/v1` `PersistentVolumeClaim`, `PodSpec`, `Container`, `Volume`); every servetop flag
//! they pass exists;
//! the Grafana dashboard (examples/grafana/) asks only for metrics `--metrics-listen` serves.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

use serde_yaml::Value;

/// An object type of the API: its fields, each with the type of its value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum T {
    Job,
    Pvc,
    Meta,
    JobSpec,
    PodTemplate,
    PodSpec,
    Spread,
    Selector,
    Container,
    EnvVar,
    EnvSource,
    FieldRef,
    Port,
    Resources,
    Mount,
    Volume,
    ClaimSource,
    EmptyDir,
    PvcSpec,
    /// A map of strings to anything (labels, annotations, nodeSelector, quantities).
    Map,
    /// A scalar or a list of scalars.
    Leaf,
}

fn fields(t: T) -> &'static [(&'static str, T)] {
    use T::*;
    match t {
        Job => &[
            ("apiVersion", Leaf),
            ("kind", Leaf),
            ("metadata", Meta),
            ("spec", JobSpec),
        ],
        Pvc => &[
            ("apiVersion", Leaf),
            ("kind", Leaf),
            ("metadata", Meta),
            ("spec", PvcSpec),
        ],
        Meta => &[
            ("name", Leaf),
            ("namespace", Leaf),
            ("labels", Map),
            ("annotations", Map),
        ],
        JobSpec => &[
            ("activeDeadlineSeconds", Leaf),
            ("backoffLimit", Leaf),
            ("backoffLimitPerIndex", Leaf),
            ("completionMode", Leaf),
            ("completions", Leaf),
            ("manualSelector", Leaf),
            ("maxFailedIndexes", Leaf),
            ("parallelism", Leaf),
            ("podReplacementPolicy", Leaf),
            ("selector", Selector),
            ("suspend", Leaf),
            ("template", PodTemplate),
            ("ttlSecondsAfterFinished", Leaf),
        ],
        PodTemplate => &[("metadata", Meta), ("spec", PodSpec)],
        PodSpec => &[
            ("containers", Container),
            ("initContainers", Container),
            ("nodeSelector", Map),
            ("restartPolicy", Leaf),
            ("serviceAccountName", Leaf),
            ("terminationGracePeriodSeconds", Leaf),
            ("topologySpreadConstraints", Spread),
            ("volumes", Volume),
        ],
        Spread => &[
            ("labelSelector", Selector),
            ("matchLabelKeys", Leaf),
            ("maxSkew", Leaf),
            ("minDomains", Leaf),
            ("topologyKey", Leaf),
            ("whenUnsatisfiable", Leaf),
        ],
        Selector => &[("matchLabels", Map)],
        Container => &[
            ("args", Leaf),
            ("command", Leaf),
            ("env", EnvVar),
            ("image", Leaf),
            ("imagePullPolicy", Leaf),
            ("name", Leaf),
            ("ports", Port),
            ("resources", Resources),
            ("volumeMounts", Mount),
            ("workingDir", Leaf),
        ],
        EnvVar => &[("name", Leaf), ("value", Leaf), ("valueFrom", EnvSource)],
        EnvSource => &[("fieldRef", FieldRef)],
        FieldRef => &[("apiVersion", Leaf), ("fieldPath", Leaf)],
        Port => &[
            ("containerPort", Leaf),
            ("hostPort", Leaf),
            ("name", Leaf),
            ("protocol", Leaf),
        ],
        Resources => &[("limits", Map), ("requests", Map)],
        Mount => &[
            ("mountPath", Leaf),
            ("name", Leaf),
            ("readOnly", Leaf),
            ("subPath", Leaf),
        ],
        Volume => &[
            ("emptyDir", EmptyDir),
            ("name", Leaf),
            ("persistentVolumeClaim", ClaimSource),
        ],
        ClaimSource => &[("claimName", Leaf), ("readOnly", Leaf)],
        EmptyDir => &[("medium", Leaf), ("sizeLimit", Leaf)],
        PvcSpec => &[
            ("accessModes", Leaf),
            ("resources", Resources),
            ("storageClassName", Leaf),
            ("volumeMode", Leaf),
        ],
        Map | Leaf => &[],
    }
}

/// Every key under `v` (an object of type `t`, or a list of them) is one of its type's fields.
fn check(v: &Value, t: T, path: &str, errors: &mut Vec<String>) {
    match (v, t) {
        (Value::Sequence(items), _) => {
            for (i, item) in items.iter().enumerate() {
                check(item, t, &format!("{path}[{i}]"), errors);
            }
        }
        (Value::Mapping(m), T::Map) => {
            for (k, v) in m {
                if !matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
                    errors.push(format!("{path}.{k:?}: a map of strings, got {v:?}"));
                }
            }
        }
        (Value::Mapping(m), T::Leaf) => errors.push(format!("{path}: a value, got {m:?}")),
        (Value::Mapping(m), t) => {
            for (k, v) in m {
                let k = k.as_str().unwrap_or("?");
                match fields(t).iter().find(|(f, _)| *f == k) {
                    Some((_, child)) => check(v, *child, &format!("{path}.{k}"), errors),
                    None => errors.push(format!("{path}.{k}: {t:?} has no such field")),
                }
            }
        }
        (_, T::Leaf | T::Map) => {}
        (other, t) => errors.push(format!("{path}: a {t:?} object, got {other:?}")),
    }
}

/// The documents of a YAML file.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

/// The servetop arguments of every container that runs servetop directly.
fn servetop_args(doc: &Value) -> Vec<Vec<String>> {
    let containers = &doc["spec"]["template"]["spec"]["containers"];
    containers
        .as_sequence()
        .into_iter()
        .flatten()
        .filter(|c| c.get("command").is_none())
        .filter_map(|c| c["args"].as_sequence())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .collect()
}

#[test]
fn manifests_name_only_fields_the_api_has() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kubernetes");
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    let mut errors = Vec::new();
    let mut kinds = BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for f in &files {
        for doc in documents(f) {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let t = match (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
                (Some("batch/v1"), Some("Job")) => T::Job,
                (Some("v1"), Some("PersistentVolumeClaim")) => T::Pvc,
                other => panic!("{name}: an object this test does not know: {other:?}"),
            };
            kinds.insert(format!("{t:?}"));
            check(&doc, t, &name, &mut errors);
            for args in servetop_args(&doc) {
                assert_eq!(args.first().map(String::as_str), Some("run"), "{name}");
                for a in args.iter().filter(|a| a.starts_with("--")) {
                    let flag = a.split('=').next().unwrap();
                    if !help.contains(&format!("{flag} ")) && !help.contains(&format!("{flag}\n")) {
                        errors.push(format!("{name}: servetop run has no {flag}"));
                    }
                }
            }
            if t == T::Job && doc["spec"]["completionMode"].as_str() == Some("Indexed") {
                assert_eq!(
                    doc["spec"]["parallelism"], doc["spec"]["completions"],
                    "{name}: every shard runs at once"
                );
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    // The checker itself rejects a misspelt field.
    let bad: Value = serde_yaml::from_str(
        "apiVersion: batch/v1\nkind: Job\nspec:\n  paralellism: 4\n  template:\n    spec:\n      containers: [{name: x, imagee: y}]\n",
    )
    .unwrap();
    let mut found = Vec::new();
    check(&bad, T::Job, "bad", &mut found);
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn the_dashboard_asks_for_what_servetop_serves() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/grafana/servetop-dashboard.json");
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let fold = servetop::export::prometheus::PromFold::default();
    let page = servetop::export::prometheus::render(&servetop::export::prometheus::PageState {
        fold: &fold,
        level: None,
        in_flight: 0,
        shard: String::new(),
        simulated: false,
        finished: false,
    });
    let served: BTreeSet<&str> = page
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let mut asked = 0;
    for panel in d["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("servetop_") {
                    asked += 1;
                    assert!(served.contains(word), "{expr}: /metrics has no {word}");
                }
            }
        }
    }
    assert!(asked >= 8, "{asked}");
}
