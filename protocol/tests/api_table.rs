//! `docs/operations.md`'s table of Kafka APIs says what the code offers:
//! each API in `SUPPORTED` is a row with its exact version range, and every
//! row whose Ferrite column is `—` names an API the code does not offer.

use ferrite_protocol::api::SUPPORTED;

/// (first key, last key, Ferrite column) of each table row.
fn rows() -> Vec<(i16, i16, String)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operations.md")).expect("docs");
    let start = doc
        .find("## Kafka APIs")
        .expect("docs/operations.md has a Kafka APIs section");
    doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| key |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let (first, last) = match cells[1].split_once('–') {
                Some((a, b)) => (a.parse().expect("key"), b.parse().expect("key")),
                None => {
                    let k = cells[1].parse().expect("key");
                    (k, k)
                }
            };
            (first, last, cells[3].to_string())
        })
        .collect()
}

fn range(min: i16, max: i16) -> String {
    if min == max {
        min.to_string()
    } else {
        format!("{min}–{max}")
    }
}

#[test]
fn the_docs_table_of_apis_matches_the_code() {
    let rows = rows();
    assert!(rows.len() > 40, "{} rows read", rows.len());
    for s in SUPPORTED {
        let row = rows
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&s.code))
            .unwrap_or_else(|| panic!("API {} ({:?}) has no row", s.code, s.key));
        assert_eq!(row.2, range(s.min, s.max), "API {} ({:?})", s.code, s.key);
    }
    for (first, last, ferrite) in &rows {
        if ferrite == "—" {
            for key in *first..=*last {
                assert!(
                    SUPPORTED.iter().all(|s| s.code != key),
                    "API {key} is offered but the table says —"
                );
            }
        }
    }
}
