//! Structured output in the simulator: which requests carry a constraint (vLLM's, SGLang's and
//! llama-server's fields), and the compliant answer a constrained request gets: the smallest
//! instance of its schema (`{}` for a plain JSON object), padded with trailing spaces to the
//! tokens asked for (four characters a token), or cut there when it does not fit (so an
//! answer cut by its output limit does not parse, as on a real engine). A regex constraint is
//! honoured for timing only: its answer is plain words.

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

/// The answer text of a constrained request of `tokens` tokens (four characters a token);
/// `None` for a regex constraint (plain words).
pub fn answer(c: &SimConstraint, tokens: u64) -> Option<Vec<char>> {
    let SimConstraint::Json(schema) = c else {
        return None;
    };
    let doc = schema.as_ref().map_or_else(|| json!({}), instance);
    let mut chars: Vec<char> = doc.to_string().chars().collect();
    let want = usize::try_from(tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    if chars.len() > want {
        chars.truncate(want);
    } else {
        chars.resize(want, ' ');
    }
    Some(chars)
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
        let c = SimConstraint::Json(None);
        let a: String = answer(&c, 3).unwrap().into_iter().collect();
        assert_eq!(a, "{}          ");
        let schema = json!({"type": "object", "properties": {"long_name": {"type": "string"}}});
        let c = SimConstraint::Json(Some(schema));
        let cut: String = answer(&c, 2).unwrap().into_iter().collect();
        assert_eq!(cut, r#"{"long_n"#);
        assert!(serde_json::from_str::<Value>(&cut).is_err());
        assert_eq!(answer(&SimConstraint::Regex, 5), None);
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
