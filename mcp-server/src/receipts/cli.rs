//! The receipts from a terminal: `computer-mcp receipts` (every computer
//! the journal or the provider knows, and the totals) and the receipt
//! columns of `computers list`.

use std::sync::Arc;

use computer_providers::{ComputerRef, Provider, label};
use computer_tools::Receipt;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::Book;
use super::journal::Kept;

/// How long the provider's figures of one running computer are waited for.
const USED_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// One computer's receipt as the terminal shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub provider: String,
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub handle: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released_at: Option<String>,
    /// Listed by the provider as running now.
    pub running: bool,
    #[serde(flatten)]
    pub receipt: Receipt,
}

/// The totals of [`Row`]s.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    pub computers: usize,
    pub wall_seconds: u64,
    pub cpu_seconds: f64,
    pub tool_calls: u64,
    pub bytes_pushed: u64,
    pub bytes_pulled: u64,
    pub estimated_cost_usd: f64,
}

pub fn totals(rows: &[Row]) -> Totals {
    let mut t = Totals {
        computers: rows.len(),
        ..Totals::default()
    };
    for r in rows {
        let x = &r.receipt;
        t.wall_seconds += x.wall_seconds;
        t.cpu_seconds += x.cpu_seconds.unwrap_or(0.0);
        t.tool_calls += x.tool_calls;
        t.bytes_pushed += x.bytes_pushed;
        t.bytes_pulled += x.bytes_pulled;
        t.estimated_cost_usd += x.estimated_cost_usd.unwrap_or(0.0);
    }
    t
}

fn seconds_between(from: &str, to: Option<&str>) -> u64 {
    use time::format_description::well_known::Rfc3339;
    let Ok(a) = time::OffsetDateTime::parse(from, &Rfc3339) else {
        return 0;
    };
    let b = to
        .and_then(|t| time::OffsetDateTime::parse(t, &Rfc3339).ok())
        .unwrap_or_else(time::OffsetDateTime::now_utc);
    (b - a).whole_seconds().max(0) as u64
}

/// A receipt from what the journal keeps and, for a running computer, the
/// provider's figures now.
fn row(
    book: &Book,
    kept: Option<&Kept>,
    live: Option<(&ComputerRef, computer_providers::Used)>,
) -> Row {
    let last = kept.and_then(|k| k.last.clone()).unwrap_or_default();
    let (pushed, pulled) = kept.map_or((0, 0), Kept::bytes);
    let (mut row, size) = match live {
        Some((r, used)) => {
            let l = |k: &str| r.labels.get(k).cloned();
            let row = Row {
                provider: r.provider.clone(),
                id: r.id.clone(),
                handle: l(label::HANDLE).unwrap_or_default(),
                name: l(label::NAME),
                kind: l(label::KIND).unwrap_or_default(),
                image: r.image.clone(),
                created_at: r.created_at.clone(),
                released_at: None,
                running: r.running,
                receipt: Receipt {
                    wall_seconds: seconds_between(&r.created_at, None),
                    cpu_seconds: used.cpu_seconds.or(last.cpu_seconds),
                    peak_memory_bytes: used.peak_memory_bytes.or(last.peak_memory_bytes),
                    ..Receipt::default()
                },
            };
            (row, book.size_of(r))
        }
        None => {
            // Gone, or of another provider: what the journal last said.
            let end = last.released_at.clone().unwrap_or_else(|| last.at.clone());
            let row = Row {
                provider: last.provider.clone(),
                id: last.id.clone(),
                handle: last.handle.clone(),
                name: last.name.clone(),
                kind: last.kind.clone(),
                image: last.image.clone(),
                created_at: last.created_at.clone(),
                released_at: last.released_at.clone(),
                running: false,
                receipt: Receipt {
                    wall_seconds: seconds_between(&last.created_at, Some(&end)),
                    cpu_seconds: last.cpu_seconds,
                    peak_memory_bytes: last.peak_memory_bytes,
                    ..Receipt::default()
                },
            };
            (row, (last.vcpus, last.memory_mb))
        }
    };
    row.receipt.tool_calls = last.tool_calls;
    row.receipt.bytes_pushed = pushed;
    row.receipt.bytes_pulled = pulled;
    let provider = row.provider.clone();
    row.receipt = book.priced(row.receipt, &provider, size);
    row
}

/// Every computer `listed` (the provider's, read live) and every other one
/// the journal keeps, newest first.
pub async fn rows(provider: &Arc<dyn Provider>, book: &Book, listed: &[ComputerRef]) -> Vec<Row> {
    let mut kept = book.all();
    let used = futures::future::join_all(listed.iter().map(|r| async move {
        if !r.running {
            return computer_providers::Used::default();
        }
        tokio::time::timeout(USED_WAIT, provider.used(r, &CancellationToken::new()))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    }))
    .await;
    let mut out = Vec::new();
    for (r, u) in listed.iter().zip(used) {
        let k = kept.remove(&(r.provider.clone(), r.id.clone()));
        out.push(row(book, k.as_ref(), Some((r, u))));
    }
    let mut rest: Vec<Kept> = kept.into_values().filter(|k| k.last.is_some()).collect();
    rest.sort_by_key(|k| std::cmp::Reverse(k.order));
    out.extend(rest.iter().map(|k| row(book, Some(k), None)));
    out
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "-".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

fn cpu(s: Option<f64>) -> String {
    s.map_or_else(|| "-".into(), |c| format!("{c:.2}"))
}

/// The receipt columns `computers list` adds: wall, CPU s, peak MiB, calls.
pub fn list_columns(r: &Row) -> String {
    format!(
        "{:>7}  {:>7}  {:>8}  {:>5}",
        format!("{}s", r.receipt.wall_seconds),
        cpu(r.receipt.cpu_seconds),
        mib(r.receipt.peak_memory_bytes),
        r.receipt.tool_calls
    )
}

/// Their header.
pub const LIST_HEADER: &str = "   WALL    CPU S  PEAK MIB  CALLS";

/// `computer-mcp receipts`: a table (or `json`), and the totals.
pub fn render(rows: &[Row], json: bool) -> String {
    let t = totals(rows);
    if json {
        let v = serde_json::json!({"computers": rows, "totals": t});
        return format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    let mut out = format!(
        "{:<34}  {:<12}  {:<9}  {:<8}  {LIST_HEADER}  {:>12}  {:>12}  {:>10}  RELEASED\n",
        "HANDLE", "NAME", "PROVIDER", "STATE", "PUSHED B", "PULLED B", "COST USD"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<34}  {:<12}  {:<9}  {:<8}  {}  {:>12}  {:>12}  {:>10}  {}\n",
            if r.handle.is_empty() {
                &r.id
            } else {
                &r.handle
            },
            r.name.as_deref().unwrap_or("-"),
            r.provider,
            if r.running {
                "running"
            } else if r.released_at.is_some() {
                "released"
            } else {
                "gone"
            },
            list_columns(r),
            r.receipt.bytes_pushed,
            r.receipt.bytes_pulled,
            r.receipt
                .estimated_cost_usd
                .map_or_else(|| "-".into(), |c| format!("{c:.4}")),
            r.released_at.as_deref().unwrap_or("-"),
        ));
    }
    out.push_str(&format!(
        "total: {} computer(s), {} s wall, {:.2} CPU s, {} tool calls, {} B pushed, {} B pulled, about ${:.4} at vendors' prices\n",
        t.computers,
        t.wall_seconds,
        t.cpu_seconds,
        t.tool_calls,
        t.bytes_pushed,
        t.bytes_pulled,
        t.estimated_cost_usd
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipts::journal::Line;

    fn book() -> Book {
        Book {
            journal: None,
            prices: crate::receipts::price::Prices::default(),
            cpus: None,
            memory_mb: None,
        }
    }

    #[test]
    fn a_released_computers_row_is_its_last_line_with_cp_bytes_and_its_cost() {
        let k = Kept {
            last: Some(Line {
                provider: "e2b".into(),
                id: "sb1".into(),
                created_at: "2026-12-07T10:00:00Z".into(),
                at: "2026-12-07T10:59:00Z".into(),
                released_at: Some("2026-12-07T11:00:00Z".into()),
                vcpus: Some(2.0),
                memory_mb: Some(512),
                tool_calls: 9,
                bytes_pushed: 100,
                ..Line::default()
            }),
            added_pushed: 50,
            added_pulled: 7,
            order: 0,
        };
        let r = row(&book(), Some(&k), None);
        assert_eq!(r.receipt.wall_seconds, 3600);
        assert_eq!((r.receipt.bytes_pushed, r.receipt.bytes_pulled), (150, 7));
        assert_eq!(r.receipt.tool_calls, 9);
        assert!((r.receipt.estimated_cost_usd.unwrap() - 0.1089).abs() < 1e-9);
        let t = totals(&[r.clone(), r]);
        assert_eq!((t.computers, t.tool_calls, t.bytes_pushed), (2, 18, 300));
        assert!((t.estimated_cost_usd - 0.2178).abs() < 1e-9);
    }
}
