//! `--header NAME:VALUE`: a header sent with every request to the server (a gateway's tenant,
//! route or key), written to files with its value as `***` where its name says it is a secret.

use serde::{Deserialize, Serialize};

/// What a secret header's value is written as.
pub const REDACTED: &str = "***";

/// Headers servetop sets itself, or that HTTP owns.
const RESERVED: [&str; 7] = [
    "host",
    "user-agent",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "x-request-id",
];

/// One header sent with every request to the server.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct HttpHeader {
    pub name: String,
    pub value: String,
}

impl HttpHeader {
    /// `NAME:VALUE` (spaces around the value trimmed), its name a token of HTTP's and its value
    /// printable text on one line.
    pub fn parse(s: &str) -> Result<Self, String> {
        let Some((name, value)) = s.split_once(':') else {
            return Err(format!(
                "--header '{s}': write it NAME:VALUE (e.g. --header 'X-Tenant: team-a')"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            return Err(format!(
                "--header '{s}': '{name}' is not a header name (letters, digits and !#$%&'*+-.^_`|~)"
            ));
        }
        if RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "--header '{s}': servetop sets {name} itself; leave it out"
            ));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') || !value.is_ascii() {
            return Err(format!(
                "--header '{s}': the value holds a control or non-ASCII character"
            ));
        }
        Ok(Self {
            name: name.to_string(),
            value: value.to_string(),
        })
    }

    /// Whether its value is a secret, by its name: one that holds `key`, `token`, `auth`,
    /// `secret`, `password` or `cookie` (any case). Its value is written `***` in every file.
    pub fn is_secret(&self) -> bool {
        let n = self.name.to_ascii_lowercase();
        ["key", "token", "auth", "secret", "password", "cookie"]
            .iter()
            .any(|w| n.contains(w))
    }

    /// A secret header read back from a run's files: its value was not written.
    pub fn is_redacted(&self) -> bool {
        self.is_secret() && self.value == REDACTED
    }
}

impl Serialize for HttpHeader {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("HttpHeader", 2)?;
        st.serialize_field("name", &self.name)?;
        let value = if self.is_secret() {
            REDACTED
        } else {
            &self.value
        };
        st.serialize_field("value", value)?;
        st.end()
    }
}

/// A resumed run's headers: the saved ones, each secret one's value given again in `given`
/// (`--header` with `--resume`), which may also add or change any.
pub fn resumed(saved: &[HttpHeader], given: &[HttpHeader]) -> Result<Vec<HttpHeader>, String> {
    let mut out: Vec<HttpHeader> = saved.to_vec();
    for g in given {
        match out
            .iter_mut()
            .find(|h| h.name.eq_ignore_ascii_case(&g.name))
        {
            Some(h) => h.value.clone_from(&g.value),
            None => out.push(g.clone()),
        }
    }
    let missing: Vec<&str> = out
        .iter()
        .filter(|h| h.is_redacted())
        .map(|h| h.name.as_str())
        .collect();
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "the run sent {} whose value{} not saved: resume with --header '{}: VALUE'",
            missing.join(", "),
            if missing.len() == 1 { " was" } else { "s were" },
            missing[0]
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_header_and_refuses_what_is_not_one() {
        assert_eq!(
            HttpHeader::parse("X-Tenant:  team-a ").unwrap(),
            HttpHeader {
                name: "X-Tenant".into(),
                value: "team-a".into()
            }
        );
        // A value may hold colons (a URL, a time).
        assert_eq!(
            HttpHeader::parse("X-Route: http://a:1").unwrap().value,
            "http://a:1"
        );
        for (bad, says) in [
            ("X-Tenant", "write it NAME:VALUE"),
            (": v", "is not a header name"),
            ("X Tenant: v", "is not a header name"),
            (
                "Content-Type: text/plain",
                "servetop sets Content-Type itself",
            ),
            ("x-request-id: 1", "servetop sets x-request-id itself"),
            ("X-A: a\u{7}b", "control or non-ASCII"),
            ("X-A: é", "control or non-ASCII"),
        ] {
            let e = HttpHeader::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--header '{bad}'")), "{e}");
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_secret_is_written_as_stars_and_must_be_given_again_to_resume() {
        let h = |s: &str| HttpHeader::parse(s).unwrap();
        let headers = [
            h("X-Api-Key: k1"),
            h("Authorization: Bearer t"),
            h("X-Session-Token: t2"),
            h("X-Tenant: team-a"),
        ];
        let json = serde_json::to_string(&headers).unwrap();
        assert_eq!(
            json,
            r#"[{"name":"X-Api-Key","value":"***"},{"name":"Authorization","value":"***"},{"name":"X-Session-Token","value":"***"},{"name":"X-Tenant","value":"team-a"}]"#
        );
        let saved: Vec<HttpHeader> = serde_json::from_str(&json).unwrap();
        let e = resumed(&saved, &[]).unwrap_err();
        assert_eq!(
            e,
            "the run sent X-Api-Key, Authorization, X-Session-Token whose values were not saved: resume with --header 'X-Api-Key: VALUE'"
        );
        let again = [
            h("x-api-key: k1"),
            h("Authorization: Bearer t"),
            h("X-Session-Token: t2"),
        ];
        assert_eq!(resumed(&saved, &again).unwrap(), headers);
    }
}
