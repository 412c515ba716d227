//! Property-based fuzzing of the option parsers a user's words go through
//! (`--lifetime` and the other durations, `--network`, `--http`,
//! `--screen`): no input panics, every refusal names what was given, and
//! what is accepted reads back as given. A bounded run in `cargo test`; a
//! long one is `PROPTEST_CASES=100000 cargo test -p computer-mcp --bin
//! computer-mcp fuzz`.

use proptest::prelude::*;

use super::{NetworkArg, listen_address, parse_duration};

/// Text near what a user types: digits, units, separators, and any char.
fn wordish() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec![
                "0", "1", "9", "ms", "s", "m", "min", "h", "d", " ", ":", ",", ".", "*", "/",
                "allow:", "none", "open", "public", "[", "]", "-", "x", "\u{0}", "é",
            ])
            .prop_map(String::from),
            any::<char>().prop_map(String::from),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A duration parses to more than zero, or is refused naming the
    /// field and the text.
    #[test]
    fn a_duration_is_positive_or_refused_naming_the_field(s in wordish()) {
        match parse_duration("--lifetime", &s) {
            Ok(d) => prop_assert!(d.as_millis() > 0),
            Err(e) => prop_assert!(e.starts_with("--lifetime "), "{e}"),
        }
    }

    /// Every number with every unit reads back as that many milliseconds,
    /// or is refused when it would overflow.
    #[test]
    fn a_number_and_unit_read_back_exactly(n in 1u64..u64::MAX, unit in 0usize..6) {
        let (suffix, scale) = [("ms", 1u64), ("s", 1000), ("m", 60_000), ("min", 60_000), ("h", 3_600_000), ("d", 86_400_000)][unit];
        match (parse_duration("--lifetime", &format!("{n}{suffix}")), n.checked_mul(scale)) {
            (Ok(d), Some(ms)) => prop_assert_eq!(d.as_millis(), u128::from(ms)),
            (Err(e), None) => prop_assert!(e.contains("is not a duration"), "{e}"),
            (got, want) => prop_assert!(false, "{n}{suffix}: {got:?} where {want:?} was expected"),
        }
    }

    /// A network choice is one of the four, reads back as what it was
    /// read from, or is refused in words naming --network or the entry.
    #[test]
    fn a_network_reads_back_or_is_refused_in_words(s in wordish()) {
        match s.parse::<NetworkArg>() {
            Ok(n) => {
                let again: NetworkArg = n.to_string().parse().unwrap();
                prop_assert_eq!(again.to_string(), n.to_string());
            }
            Err(e) => prop_assert!(
                e.contains("--network") || e.contains("network allow entry") || e.contains("allow"),
                "{e}"
            ),
        }
    }

    /// An allowlist of names reads back with the same entries.
    #[test]
    fn an_allowlist_of_names_reads_back(labels in prop::collection::vec("[a-z][a-z0-9]{0,10}", 1..5), tld in prop::sample::select(vec!["org", "io", "dev"])) {
        let name = format!("{}.{tld}", labels.join("."));
        if let Ok(n) = format!("allow:{name}").parse::<NetworkArg>() {
            prop_assert_eq!(n.to_string(), format!("allow:{name}"));
        }
    }

    /// --http takes an address or refuses it in words naming --http.
    #[test]
    fn an_http_address_is_an_address_or_refused_naming_the_flag(s in wordish()) {
        if let Err(e) = listen_address(&s) {
            prop_assert!(e.starts_with("--http "), "{e}");
        }
    }

    /// A screen is WxH within its bounds, reading back as given, or is
    /// refused in words.
    #[test]
    fn a_screen_reads_back_or_is_refused(s in wordish(), w in 0u32..20_000, h in 0u32..20_000) {
        use computerd::launch::Screen;
        for text in [s.clone(), format!("{w}x{h}")] {
            match text.parse::<Screen>() {
                Ok(sc) => prop_assert_eq!(sc.to_string().parse::<Screen>().unwrap(), sc),
                Err(e) => prop_assert!(!e.is_empty()),
            }
        }
    }
}
