//! The transform table (`BENCH_ONLY=transform`): relay-gcf at saturation with 4 KB signed
//! notifications to the loopback SQS endpoint, its one sink from a configuration file, the
//! payload byte for byte against the same sink with a small transform (the bundle, its version
//! and the event); CPU-µs per notification as a ratio to the first row, measured in the same
//! run.

use relay_testkit::fake_sqs::{FakeSqs, Fault};

use crate::load::{Driver, Measured};
use crate::process::Pinned;

/// The small transform of the issue.
const RESHAPE: &str =
    "{bundle: .match.bundle_uuid, version: .match.bundle_version, event: .event_type}";

/// Prints the table.
pub(crate) async fn table() {
    println!(
        "| sink | notifications/s | CPU-µs per notification | vs byte for byte | p50 (ms) | p99 (ms) | peak RSS (MiB) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let dir = crate::memory::folder();
    let mut first: Option<f64> = None;
    for (name, transform) in [
        ("SQS, the payload byte for byte", None),
        ("SQS, a small transform", Some(RESHAPE)),
    ] {
        let sqs = FakeSqs::start(Fault::None).await;
        let config = dir.join(format!("{}.toml", first.is_some()));
        let transform = transform.map_or(String::new(), |p| format!("transform = '{p}'\n"));
        let table = format!(
            "[sinks.sqs]\ntype = \"sqs\"\nqueue_url = \"{}\"\n{transform}\n\
             [[routes]]\nname = \"all\"\nmatch = {{}}\nto = [\"sqs\"]\n",
            sqs.queue_url()
        );
        std::fs::write(&config, table).expect("a configuration file");
        let path = config.to_str().expect("a UTF-8 path").to_owned();
        let relay = Pinned::relay_with(&sqs, &[("RELAY_CONFIG", path)]);
        relay.reset_peak_rss();
        let run = Driver::new(4096)
            .closed_loop(&relay, 32, crate::seconds())
            .await;
        let cpu = run.cpu_us_per_request();
        let base = *first.get_or_insert(cpu);
        print_row(name, &run, cpu / base, relay.peak_rss_kib());
    }
    crate::memory::remove(vec![dir]);
}

fn print_row(name: &str, run: &Measured, ratio: f64, peak_rss_kib: u64) {
    println!(
        "| {name} | {:.0} | {:.1} | {ratio:.2}× | {:.2} | {:.2} | {:.1} |",
        run.per_second(),
        run.cpu_us_per_request(),
        run.percentile(0.50).as_secs_f64() * 1e3,
        run.percentile(0.99).as_secs_f64() * 1e3,
        peak_rss_kib as f64 / 1024.0
    );
}
