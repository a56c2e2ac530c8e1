//! Replays the fuzz inputs on the stable toolchain, inside `make test`: the named seeds under
//! `fuzz/seeds/<target>/` (at least one per target) and the inputs that once found a fault,
//! under `fuzz/regressions/<target>/`. A corpus grown by `make fuzz` stays outside git, in
//! `fuzz/corpus/<target>/`; when one exists locally it is replayed too, and none is required.
//! A fault `make fuzz` finds is fixed and its input kept in `fuzz/regressions/<target>/`.

use std::path::Path;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 14] = [
    ("signature_header", relay_testkit::fuzz::signature_header),
    ("verification", relay_testkit::fuzz::verification),
    ("intake", relay_testkit::fuzz::intake),
    ("notification", relay_testkit::fuzz::notification),
    ("pattern", relay_testkit::fuzz::pattern),
    ("config_file", relay_testkit::fuzz::config_file),
    (
        "stripe_signature",
        relay_testkit::fuzz_schemes::stripe_signature,
    ),
    (
        "standard_webhooks",
        relay_testkit::fuzz_schemes::standard_webhooks,
    ),
    ("rfc9421", relay_testkit::fuzz_schemes::rfc9421),
    ("slack", relay_testkit::fuzz_schemes::slack),
    ("body_hmac", relay_testkit::fuzz_schemes::body_hmac),
    ("hmac_template", relay_testkit::fuzz_schemes::hmac_template),
    ("archive_record", relay_testkit::fuzz::archive_record),
    ("transform", relay_testkit::fuzz::transform),
];

/// Runs `target` over every file in `dir`, a missing folder being empty; returns how many it ran.
fn replay(dir: &Path, target: Target) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut count = 0;
    for entry in entries {
        let path = entry.expect("a readable folder").path();
        let data = std::fs::read(&path).expect("a readable input");
        let outcome = std::panic::catch_unwind(|| target(&data));
        assert!(outcome.is_ok(), "{} fails", path.display());
        count += 1;
    }
    count
}

fn fuzz_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

#[test]
fn every_seed_and_regression_passes() {
    let fuzz = fuzz_dir();
    for (name, target) in TARGETS {
        let seeds = replay(&fuzz.join("seeds").join(name), target);
        assert!(seeds > 0, "no seeds for {name} in fuzz/seeds/{name}");
        replay(&fuzz.join("regressions").join(name), target);
    }
}

#[test]
fn a_local_grown_corpus_passes_when_there_is_one() {
    let fuzz = fuzz_dir();
    for (name, target) in TARGETS {
        replay(&fuzz.join("corpus").join(name), target);
    }
}
