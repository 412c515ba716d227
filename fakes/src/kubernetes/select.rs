//! Label selectors as the API server reads `?labelSelector=` (Kubernetes
//! docs, "Labels and Selectors"; apimachinery pkg/labels/selector.go):
//! requirements joined by commas, all of which must hold. Equality-based
//! `k=v`, `k==v`, `k!=v`; set-based `k in (a,b)`, `k notin (a,b)`; `k`
//! (exists) and `!k` (does not exist). `!=` and `notin` also match an
//! object that lacks the key (selector.go, `Requirement.Matches`).

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed selector: every requirement must hold (none: everything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

impl Selector {
    /// Parse `?labelSelector=`; the words of a 400 when it cannot be read.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut out = Vec::new();
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            out.push(requirement(p)?);
        }
        Ok(Selector(out))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }
}

/// Commas outside parentheses split requirements.
fn split_top(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn key(k: &str) -> Result<String, String> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.len() <= 317
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?}"))
    }
}

fn set(rest: &str) -> Result<Vec<String>, String> {
    let r = rest.trim();
    let inner = r
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("a set must be in parentheses: {r:?}"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

fn requirement(p: &str) -> Result<Requirement, String> {
    if let Some(k) = p.strip_prefix('!') {
        return Ok(Requirement::Absent(key(k)?));
    }
    if let Some((k, v)) = p.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, v.trim().to_string()));
    }
    if let Some((k, v)) = p.split_once("==") {
        return Ok(Requirement::Equals(key(k)?, v.trim().to_string()));
    }
    if let Some((k, v)) = p.split_once('=') {
        return Ok(Requirement::Equals(key(k)?, v.trim().to_string()));
    }
    if let Some((k, rest)) = p.split_once(" notin ") {
        return Ok(Requirement::NotIn(key(k)?, set(rest)?));
    }
    if let Some((k, rest)) = p.split_once(" in ") {
        return Ok(Requirement::In(key(k)?, set(rest)?));
    }
    Ok(Requirement::Exists(key(p)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_form_of_requirement_is_read_and_matched() {
        let s = Selector::parse("a=1,b==2,c!=3,d in (x, y),e notin (z),f,!g").unwrap();
        assert_eq!(s.0.len(), 7);
        let good = labels(&[("a", "1"), ("b", "2"), ("d", "y"), ("f", "")]);
        assert!(s.matches(&good));
        let mut bad = good.clone();
        bad.insert("g".into(), "1".into());
        assert!(!s.matches(&bad));
        let mut bad = good.clone();
        bad.insert("e".into(), "z".into());
        assert!(!s.matches(&bad));
        assert!(Selector::parse("").unwrap().matches(&labels(&[])));
    }

    #[test]
    fn a_selector_that_cannot_be_read_says_why() {
        assert_eq!(
            Selector::parse("a in x").unwrap_err(),
            "a set must be in parentheses: \"x\""
        );
        assert_eq!(
            Selector::parse("a b").unwrap_err(),
            "invalid label key \"a b\""
        );
        assert!(Selector::parse("k notin x").is_err());
    }
}
