//! Replays every committed fuzz input on the stable toolchain: the corpora under `fuzz/corpus/`
//! and the inputs that once found a fault, under `fuzz/regressions/`. `make fuzz` grows the
//! corpora; a fault it finds is fixed and its input kept in `fuzz/regressions/<target>/`.

use std::path::Path;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 6] = [
    ("signature_header", relay_testkit::fuzz::signature_header),
    ("verification", relay_testkit::fuzz::verification),
    ("intake", relay_testkit::fuzz::intake),
    ("notification", relay_testkit::fuzz::notification),
    ("pattern", relay_testkit::fuzz::pattern),
    ("config_file", relay_testkit::fuzz::config_file),
];

/// Runs `target` over every file in `dir`; returns how many it ran.
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

#[test]
fn every_committed_fuzz_input_passes() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (name, target) in TARGETS {
        let corpus = replay(&fuzz.join("corpus").join(name), target);
        assert!(corpus > 0, "no corpus for {name}");
        replay(&fuzz.join("regressions").join(name), target);
    }
}
