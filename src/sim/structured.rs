//! Structured output in the simulator: which requests carry a constraint (vLLM's, SGLang's and
//! llama-server's fields), and the compliant answer a constrained request gets: the smallest
//! instance of its schema (`{}` for a plain JSON object), padded with trailing spaces to the
//! tokens asked for (four characters a token), or cut there when it does not fit (so an
//! answer cut by its output limit does not parse, as on a real engine). A regex constraint is
//! honoured for timing only: its answer is plain words.
//!
//! With `structured_invalid_every` K, every K-th constrained request the simulator reads is
//! answered with one that fails its constraint on purpose ([`broken_json`], or a `!` before a
//! regex's words), and its record says so, so a test knows exactly which answers comply.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};

/// What a request constrains its answer to.
#[derive(Clone, Debug, PartialEq)]
pub enum SimConstraint {
    /// A JSON document: any object (`None`), or valid against the schema.
    Json(Option<Value>),
    Regex,
}

/// The constraint `body` carries, in any of the engines' fields.
pub fn of(body: &Value, native: bool) -> Option<SimConstraint> {
    if native {
        let sp = body.get("sampling_params")?;
        if let Some(s) = sp.get("json_schema").and_then(Value::as_str) {
            return Some(SimConstraint::Json(serde_json::from_str(s).ok()));
        }
        return sp.get("regex").map(|_| SimConstraint::Regex);
    }
    if let Some(rf) = body.get("response_format") {
        match rf.get("type").and_then(Value::as_str) {
            Some("json_object") => return Some(SimConstraint::Json(None)),
            Some("json_schema") => {
                return Some(SimConstraint::Json(
                    rf.pointer("/json_schema/schema").cloned(),
                ));
            }
            _ => {}
        }
    }
    if let Some(so) = body.get("structured_outputs") {
        if let Some(j) = so.get("json") {
            return Some(SimConstraint::Json(Some(match j {
                Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                v => v.clone(),
            })));
        }
        if so.get("regex").is_some() {
            return Some(SimConstraint::Regex);
        }
    }
    body.get("regex").map(|_| SimConstraint::Regex)
}

/// What a constrained request is answered with.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// The answer's text, four characters a token; `None` for plain words (a regex
    /// constraint's compliant answer).
    pub text: Option<Vec<char>>,
    /// The answer fails its constraint: broken on purpose, or a JSON document cut by its
    /// output limit.
    pub invalid: bool,
}

/// The answer of a constrained request of `tokens` tokens (four characters a token): the
/// compliant one, or with `broken` one that fails the constraint ([`broken_json`]).
pub fn answer(c: &SimConstraint, tokens: u64, broken: bool) -> Planned {
    let want = usize::try_from(tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    let SimConstraint::Json(schema) = c else {
        if !broken {
            return Planned {
                text: None,
                invalid: false,
            };
        }
        // No plain word holds a `!`: a pattern that takes the plain words refuses it.
        let mut text: Vec<char> = "!".chars().collect();
        while text.len() < want {
            text.extend(" the".chars());
        }
        text.truncate(want.max(1));
        return Planned {
            text: Some(text),
            invalid: true,
        };
    };
    let doc = if broken {
        broken_json(schema.as_ref())
    } else {
        schema
            .as_ref()
            .map_or_else(|| json!({}), instance)
            .to_string()
    };
    let mut chars: Vec<char> = doc.chars().collect();
    let cut = chars.len() > want;
    if cut {
        chars.truncate(want);
    } else {
        chars.resize(want, ' ');
    }
    Planned {
        text: Some(chars),
        invalid: broken || cut,
    }
}

/// Whether the next constrained request is to be answered invalidly: every `every`-th one
/// counted by `seen` (the first, second, … constrained request read); never with 0.
pub fn breaks_next(every: u32, seen: &AtomicU64) -> bool {
    let n = seen.fetch_add(1, Ordering::Relaxed) + 1;
    every > 0 && n.is_multiple_of(u64::from(every))
}

/// A JSON answer that fails its constraint: for a plain JSON object `[]` (a document, but not
/// an object); for a schema whose object requires a property, its instance without the first
/// of them (a document the schema refuses); for any other schema, its instance after a `[`
/// (no document at all).
pub fn broken_json(schema: Option<&Value>) -> String {
    let Some(schema) = schema else {
        return "[]".into();
    };
    let mut doc = instance(schema);
    let first_required = schema
        .get("required")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str);
    if let (Some(obj), Some(name)) = (doc.as_object_mut(), first_required)
        && obj.remove(name).is_some()
    {
        return doc.to_string();
    }
    format!("[{doc}")
}

/// The smallest instance of `schema` this simulator can make: every property of an object,
/// the fewest items of an array, the shortest string, the least number allowed, an enum's or
/// a union's first choice.
pub fn instance(schema: &Value) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(e) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    for k in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(k)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return instance(first);
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ => "object",
    };
    let at_least = |k: &str| schema.get(k).and_then(Value::as_u64).unwrap_or(0);
    match ty {
        "string" => Value::String("x".repeat(usize::try_from(at_least("minLength")).unwrap_or(0))),
        "integer" => json!(
            schema
                .get("minimum")
                .and_then(Value::as_f64)
                .map_or(0, |m| m.ceil() as i64)
        ),
        "number" => json!(schema.get("minimum").and_then(Value::as_f64).unwrap_or(0.0)),
        "boolean" => json!(true),
        "null" => Value::Null,
        "array" => {
            let item = schema.get("items").map_or(Value::Null, instance);
            Value::Array(vec![
                item;
                usize::try_from(at_least("minItems")).unwrap_or(0)
            ])
        }
        _ => {
            let mut m = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    m.insert(k.clone(), instance(v));
                }
            }
            Value::Object(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schemas_instance_is_valid_against_it() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2},
                "age": {"type": "integer", "minimum": 18.5},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2},
                "kind": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
                "nested": {"type": "object", "properties": {"x": {"type": ["null", "number"]}}, "required": ["x"]},
            },
            "required": ["name", "age", "tags", "kind", "nested"],
        });
        let v = instance(&schema);
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&v), "{v}");
        assert_eq!(v["age"], 19);
        assert_eq!(v["tags"], json!(["a", "a"]));
    }

    #[test]
    fn an_answer_is_padded_to_its_tokens_or_cut_at_them() {
        let text = |p: Planned| -> String { p.text.unwrap().into_iter().collect() };
        let c = SimConstraint::Json(None);
        let a = answer(&c, 3, false);
        assert!(!a.invalid);
        assert_eq!(text(a), "{}          ");
        let schema = json!({"type": "object", "properties": {"long_name": {"type": "string"}}});
        let c = SimConstraint::Json(Some(schema));
        let cut = answer(&c, 2, false);
        assert!(cut.invalid, "a document cut short fails");
        let cut = text(cut);
        assert_eq!(cut, r#"{"long_n"#);
        assert!(serde_json::from_str::<Value>(&cut).is_err());
        assert_eq!(
            answer(&SimConstraint::Regex, 5, false),
            Planned {
                text: None,
                invalid: false
            }
        );
    }

    #[test]
    fn broken_answers_fail_their_constraint() {
        let text = |p: Planned| -> String {
            assert!(p.invalid);
            p.text.unwrap().into_iter().collect()
        };
        // A plain JSON object: a document, not an object.
        let a = text(answer(&SimConstraint::Json(None), 3, true));
        assert_eq!(a, "[]          ");
        assert!(serde_json::from_str::<Value>(&a).unwrap().is_array());
        // A schema with a required property: its instance without it, which still parses.
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 3}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        });
        let validator = jsonschema::validator_for(&schema).unwrap();
        let a = text(answer(&SimConstraint::Json(Some(schema.clone())), 8, true));
        let doc: Value = serde_json::from_str(&a).unwrap();
        assert_eq!(doc, json!({"days": 0}));
        assert!(!validator.is_valid(&doc));
        // Nothing required: no document at all.
        let loose = json!({"type": "integer", "minimum": -15});
        let a = text(answer(&SimConstraint::Json(Some(loose)), 2, true));
        assert_eq!(a.trim_end(), "[-15");
        assert!(serde_json::from_str::<Value>(&a).is_err());
        // A regex's: plain words after a `!`, which no plain word holds.
        let a = text(answer(&SimConstraint::Regex, 3, true));
        assert_eq!(a, "! the the th");
    }

    #[test]
    fn every_kth_constrained_request_is_broken() {
        let seen = AtomicU64::new(0);
        let drawn: Vec<bool> = (0..7).map(|_| breaks_next(3, &seen)).collect();
        assert_eq!(drawn, [false, false, true, false, false, true, false]);
        let seen = AtomicU64::new(0);
        assert!((0..10).all(|_| !breaks_next(0, &seen)));
    }

    #[test]
    fn constraints_are_found_in_each_engines_field() {
        let schema = json!({"type": "object"});
        assert_eq!(
            of(&json!({"response_format": {"type": "json_object"}}), false),
            Some(SimConstraint::Json(None))
        );
        assert_eq!(
            of(
                &json!({"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}),
                false
            ),
            Some(SimConstraint::Json(Some(schema.clone())))
        );
        assert_eq!(
            of(&json!({"structured_outputs": {"regex": "a+"}}), false),
            Some(SimConstraint::Regex)
        );
        assert_eq!(
            of(&json!({"regex": "a+"}), false),
            Some(SimConstraint::Regex)
        );
        assert_eq!(
            of(
                &json!({"sampling_params": {"json_schema": schema.to_string()}}),
                true
            ),
            Some(SimConstraint::Json(Some(schema)))
        );
        assert_eq!(of(&json!({"model": "m"}), false), None);
    }
}
