//! What a vendor's computer is estimated to cost: its wall time at the
//! vendor's published price per unit, for the computer's size.
//!
//! The prices below were read from each vendor's own page on 2026-12-07
//! (the URL is beside each); they change, so the file's `[prices.<id>]`
//! tables override any of them (`per_second`, `per_vcpu_second`,
//! `per_gib_second`, `source`). The estimate is the size held for the
//! whole wall time: what E2B, Daytona, Browserbase and Kernel bill; for
//! Modal, which bills the larger of request and use, an upper bound at the
//! size's limit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One provider's price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// US dollars per second of a computer, whatever its size.
    #[serde(default)]
    pub per_second: f64,
    /// US dollars per vCPU (as `--cpus` counts them) per second.
    #[serde(default)]
    pub per_vcpu_second: f64,
    /// US dollars per GiB of memory per second.
    #[serde(default)]
    pub per_gib_second: f64,
    /// Where the price was read (a URL and a date).
    #[serde(default)]
    pub source: String,
}

/// The published prices, by provider id.
fn published() -> BTreeMap<String, Price> {
    let p = |per_second, per_vcpu_second, per_gib_second, source: &str| Price {
        per_second,
        per_vcpu_second,
        per_gib_second,
        source: source.to_string(),
    };
    BTreeMap::from([
        // $0.000014 per vCPU-second, $0.0000045 per GiB-second.
        (
            "e2b".into(),
            p(
                0.0,
                0.000014,
                0.0000045,
                "https://e2b.dev/docs/faq/calculate-sandbox-price (2026-12-07)",
            ),
        ),
        // The same rates as E2B's: $0.0504 per vCPU-hour, $0.0162 per
        // GiB-hour (storage past 5 GiB left out).
        (
            "daytona".into(),
            p(
                0.0,
                0.000014,
                0.0000045,
                "https://www.daytona.io/pricing (2026-12-07)",
            ),
        ),
        // Sandboxes: $0.00003942 per physical core-second (2 vCPUs, and
        // --cpus counts vCPUs), $0.00000672 per GiB-second. Neither rate
        // was found on Modal's own pages when written: the CPU rate is a
        // third-party summary's (3x the Functions' $0.0000131 a core-second),
        // the memory rate unconfirmed.
        (
            "modal".into(),
            p(
                0.0,
                0.00001971,
                0.00000672,
                "https://modal.com/pricing (not confirmed there on 2026-12-07: set [prices.modal])",
            ),
        ),
        // The Developer plan's overage: $0.12 per browser-hour (a
        // third-party listing's; not found on Browserbase's own pages).
        (
            "browserbase".into(),
            p(
                0.12 / 3600.0,
                0.0,
                0.0,
                "https://docs.browserbase.com/guides/plans-and-pricing (not confirmed there on 2026-12-07: set [prices.browserbase])",
            ),
        ),
        // A headless browser: $0.0000166667 per second.
        (
            "kernel".into(),
            p(
                0.0000166667,
                0.0,
                0.0,
                "https://www.kernel.sh/docs/info/pricing (2026-12-07)",
            ),
        ),
    ])
}

/// The prices a server estimates with: the published ones, with the
/// file's `[prices]` over them.
#[derive(Clone, Debug, PartialEq)]
pub struct Prices(BTreeMap<String, Price>);

impl Default for Prices {
    fn default() -> Self {
        Prices(published())
    }
}

/// An estimate and what it rests on.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub usd: f64,
    /// The price in words, with its source.
    pub basis: String,
}

impl Prices {
    /// The published prices with `table` (the file's `[prices]`: a table
    /// per provider id) over them, refused in words naming the key.
    pub fn with(table: &Map<String, Value>) -> Result<Prices, String> {
        let mut all = published();
        for (id, v) in table {
            let given: Map<String, Value> = match v {
                Value::Object(m) => m.clone(),
                _ => return Err(format!("[prices.{id}] must be a table")),
            };
            // A given key replaces the published one; the others stay.
            let mut merged = match all.get(id) {
                Some(p) => match serde_json::to_value(p) {
                    Ok(Value::Object(m)) => m,
                    _ => Map::new(),
                },
                None => Map::new(),
            };
            if !given.contains_key("source") {
                merged.insert("source".into(), Value::String("the config file".into()));
            }
            merged.extend(given);
            let price: Price = serde_json::from_value(Value::Object(merged)).map_err(|e| {
                format!(
                    "[prices.{id}]: {e} (keys: per_second, per_vcpu_second, per_gib_second, source)"
                )
            })?;
            for (key, n) in [
                ("per_second", price.per_second),
                ("per_vcpu_second", price.per_vcpu_second),
                ("per_gib_second", price.per_gib_second),
            ] {
                if !(n.is_finite() && (0.0..=1.0).contains(&n)) {
                    return Err(format!(
                        "[prices.{id}] {key} = {n} is not a price in US dollars per second (0 to 1)"
                    ));
                }
            }
            all.insert(id.clone(), price);
        }
        Ok(Prices(all))
    }

    /// `provider`'s computer of `vcpus` and `memory_mb` for `wall_seconds`;
    /// none for a provider without a price (local, Docker: this machine's).
    pub fn estimate(
        &self,
        provider: &str,
        wall_seconds: u64,
        vcpus: Option<f64>,
        memory_mb: Option<u64>,
    ) -> Option<Estimate> {
        let p = self.0.get(provider)?;
        let gib = memory_mb.map(|m| m as f64 / 1024.0);
        let mut parts = Vec::new();
        let mut per_s = p.per_second;
        if p.per_second > 0.0 {
            parts.push(format!("${} a second", p.per_second));
        }
        if p.per_vcpu_second > 0.0 {
            let v = vcpus?;
            per_s += v * p.per_vcpu_second;
            parts.push(format!("{v} vCPU at ${} a vCPU-second", p.per_vcpu_second));
        }
        if p.per_gib_second > 0.0 {
            let g = gib?;
            per_s += g * p.per_gib_second;
            parts.push(format!("{g} GiB at ${} a GiB-second", p.per_gib_second));
        }
        Some(Estimate {
            usd: per_s * wall_seconds as f64,
            basis: format!(
                "{} for {wall_seconds} s, {}'s price from {}",
                parts.join(" + "),
                provider,
                p.source
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_e2b_default_sandbox_costs_its_published_figure_for_an_hour() {
        // E2B's own worked example: 2 vCPU and 0.5 GiB for an hour, about $0.109.
        let e = Prices::default()
            .estimate("e2b", 3600, Some(2.0), Some(512))
            .unwrap();
        assert!((e.usd - 0.1089).abs() < 1e-9, "{e:?}");
        assert!(e.basis.contains("https://e2b.dev/"), "{}", e.basis);
    }

    #[test]
    fn a_browser_is_priced_by_the_second_whatever_its_size() {
        let p = Prices::default();
        let bb = p.estimate("browserbase", 1800, None, None).unwrap();
        assert!((bb.usd - 0.06).abs() < 1e-12, "{bb:?}");
        let k = p.estimate("kernel", 60, None, None).unwrap();
        assert!((k.usd - 0.001000002).abs() < 1e-12, "{k:?}");
    }

    #[test]
    fn this_machines_providers_have_no_price_and_an_unknown_size_gives_none() {
        let p = Prices::default();
        assert_eq!(p.estimate("local", 60, Some(1.0), Some(1024)), None);
        assert_eq!(p.estimate("docker", 60, Some(1.0), Some(1024)), None);
        assert_eq!(p.estimate("modal", 60, None, Some(1024)), None);
        let m = p.estimate("modal", 100, Some(2.0), Some(2048)).unwrap();
        assert!((m.usd - 100.0 * (2.0 * 0.00001971 + 2.0 * 0.00000672)).abs() < 1e-12);
    }

    #[test]
    fn the_config_overrides_a_price_in_part_and_bad_values_are_named() {
        let t: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "e2b": {"per_vcpu_second": 0.00002},
            "docker": {"per_second": 0.001, "source": "our own rate card"}
        }))
        .unwrap();
        let p = Prices::with(&t).unwrap();
        let e = p.estimate("e2b", 10, Some(1.0), Some(1024)).unwrap();
        assert!(
            (e.usd - 10.0 * (0.00002 + 0.0000045)).abs() < 1e-12,
            "{e:?}"
        );
        assert!(e.basis.contains("the config file"), "{}", e.basis);
        let d = p.estimate("docker", 10, None, None).unwrap();
        assert!((d.usd - 0.01).abs() < 1e-12 && d.basis.contains("our own rate card"));

        let bad = |v: Value| {
            Prices::with(&serde_json::from_value(v).unwrap())
                .err()
                .unwrap()
        };
        let e = bad(serde_json::json!({"e2b": {"per_vcpu_second": -1.0}}));
        assert!(e.contains("[prices.e2b] per_vcpu_second"), "{e}");
        let e = bad(serde_json::json!({"e2b": {"per_cpu": 1.0}}));
        assert!(e.contains("[prices.e2b]") && e.contains("per_cpu"), "{e}");
        let e = bad(serde_json::json!({"e2b": 3}));
        assert!(e.contains("must be a table"), "{e}");
    }
}
