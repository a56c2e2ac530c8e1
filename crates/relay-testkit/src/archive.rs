//! The archive conformance suite: the same writes, listings and reads against any store, so
//! that a folder, S3 and Cloud Storage keep the same promises ([`conformance`]). Every call
//! works in hour folders of its own, far in the future, so runs sharing a store never meet.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::future::join_all;
use relay_core::archive::{
    Archive, ArchiveError, ArchiveKey, Record, Written, destination, hour_prefix, object_key,
};
use relay_core::ledger::attempt_id;

/// How many writers race for one key in [`conformance`].
pub const RACING_WRITERS: usize = 8;

/// How many keys [`lists_past_one_page`] writes at once.
const WRITES_IN_FLIGHT: usize = 32;

/// A random hour between the years 2100 and 3200: its folder (`YYYY/MM/DD/HH/`) and the next
/// hour's.
pub fn fresh_hours() -> (String, String) {
    let at = fresh_hour();
    (hour_prefix(at), hour_prefix(at + Duration::from_secs(3600)))
}

/// The start of a random hour between the years 2100 and 3200.
fn fresh_hour() -> SystemTime {
    const YEAR_2100: u64 = 4_102_444_800;
    let hours = u64::from_str_radix(&attempt_id()[..8], 16).expect("hex") % 9_000_000;
    SystemTime::UNIX_EPOCH + Duration::from_secs(YEAR_2100 + hours * 3600)
}

/// `len` bytes that are not UTF-8 and repeat no short pattern.
pub fn large_body(len: usize) -> Bytes {
    let mut state: u32 = 0x9e37_79b9;
    let mut bytes: Vec<u8> = (0..len)
        .map(|_| {
            // xorshift32
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect();
    if let Some(first) = bytes.first_mut() {
        *first = 0xff;
    }
    Bytes::from(bytes)
}

/// The listing of `folder`, sorted; panics when the store does not answer.
pub async fn listed(archive: &dyn Archive, folder: &str) -> Vec<String> {
    let mut keys = archive
        .list(folder)
        .await
        .unwrap_or_else(|e| panic!("{}: list {folder}: {e}", archive.url()));
    keys.sort();
    keys
}

/// What every store must do:
///
/// - a put creates ([`Written::Created`]); a second put of the same key leaves the first body
///   ([`Written::Existed`], and a get gives the first body back);
/// - a listing of an hour's folder gives exactly the keys under it, relative to the prefix,
///   not those of the next hour or of another day at the same hour;
/// - a get of a missing key is `Ok(None)`;
/// - a body of a few hundred KB, not UTF-8, round-trips byte for byte, and a read limited below
///   its size is refused ([`ArchiveError::TooLarge`]);
/// - of [`RACING_WRITERS`] concurrent puts of one key, exactly one creates it, and its body is
///   the one kept.
pub async fn conformance(archive: &dyn Archive) {
    let url = archive.url();
    let (hour, next_hour) = fresh_hours();
    let key = format!("{hour}first");

    // Created once; the second put leaves the first body.
    let first = archive.put(&key, Bytes::from_static(b"{\"n\": 1}")).await;
    assert_eq!(first.unwrap(), Written::Created, "{url}: the first put");
    let again = archive.put(&key, Bytes::from_static(b"{\"n\": 2}")).await;
    assert_eq!(again.unwrap(), Written::Existed, "{url}: the second put");
    let kept = archive.get(&key).await.unwrap();
    assert_eq!(
        kept.as_deref(),
        Some(&b"{\"n\": 1}"[..]),
        "{url}: the kept body"
    );

    // A missing key, in a folder that exists and in one that does not.
    assert_eq!(
        archive.get(&format!("{hour}missing")).await.unwrap(),
        None,
        "{url}"
    );
    assert_eq!(
        archive.get(&format!("{next_hour}missing")).await.unwrap(),
        None,
        "{url}"
    );

    lists_by_hour(archive, &hour, &next_hour).await;
    keeps_large_bodies_whole(archive, &hour).await;
    one_of_racing_writers_creates(archive, &hour).await;
}

/// Listings: exactly an hour's keys, relative to the prefix.
async fn lists_by_hour(archive: &dyn Archive, hour: &str, next_hour: &str) {
    let url = archive.url();
    // Listings: exactly this hour's keys, relative to the prefix.
    archive
        .put(&format!("{hour}second"), Bytes::from_static(b"{}"))
        .await
        .unwrap();
    archive
        .put(&format!("{next_hour}next"), Bytes::from_static(b"{}"))
        .await
        .unwrap();
    // The same hour of the next year: its folder ends like this one's.
    let other_year = format!("{:04}{}", hour[..4].parse::<u32>().unwrap() + 1, &hour[4..]);
    archive
        .put(&format!("{other_year}other"), Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert_eq!(
        listed(archive, hour).await,
        [format!("{hour}first"), format!("{hour}second")],
        "{url}: the hour's listing"
    );
    assert_eq!(
        listed(archive, next_hour).await,
        [format!("{next_hour}next")],
        "{url}: the next hour's listing"
    );
    let (empty, _) = fresh_hours();
    assert_eq!(listed(archive, &empty).await, Vec::<String>::new(), "{url}");
}

/// A large body, not UTF-8, byte for byte; a read with a limit.
async fn keeps_large_bodies_whole(archive: &dyn Archive, hour: &str) {
    let url = archive.url();
    // A large body, not UTF-8, byte for byte.
    let large = large_body(300 * 1024);
    let large_key = format!("{hour}large");
    assert_eq!(
        archive.put(&large_key, large.clone()).await.unwrap(),
        Written::Created,
        "{url}: the large put"
    );
    let back = archive
        .get(&large_key)
        .await
        .unwrap()
        .expect("the large body");
    assert!(
        back == large,
        "{url}: the large body came back as {} other bytes",
        back.len()
    );
    // A read with a limit takes the body at the limit, and refuses it one byte below.
    let at_limit = archive.read(&large_key, large.len()).await.unwrap();
    assert_eq!(at_limit.as_ref(), Some(&large), "{url}: read at the limit");
    let below = archive.read(&large_key, large.len() - 1).await;
    assert!(
        matches!(below, Err(ArchiveError::TooLarge { .. })),
        "{url}: a read below the object's size: {below:?}"
    );
}

/// Racing writers: exactly one creates, and its body is the one kept.
async fn one_of_racing_writers_creates(archive: &dyn Archive, hour: &str) {
    let url = archive.url();
    let raced = format!("{hour}raced");
    let bodies: Vec<Bytes> = (0..RACING_WRITERS)
        .map(|i| Bytes::from(format!("{{\"writer\": {i}}}")))
        .collect();
    let results = join_all(bodies.iter().map(|body| archive.put(&raced, body.clone()))).await;
    let created: Vec<usize> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r {
            Ok(Written::Created) => Some(i),
            Ok(Written::Existed) => None,
            Err(e) => panic!("{url}: racing put {i}: {e}"),
        })
        .collect();
    assert_eq!(created.len(), 1, "{url}: racing puts created {created:?}");
    let kept = archive.get(&raced).await.unwrap();
    assert_eq!(
        kept,
        Some(bodies[created[0]].clone()),
        "{url}: the raced body"
    );
}

/// `archive` and `other` are one store under two prefixes (say `notifications/` and the
/// bucket's root): neither lists, reads or blocks the other's keys.
pub async fn prefixes_are_apart(archive: &dyn Archive, other: &dyn Archive) {
    let (hour, _) = fresh_hours();
    let key = format!("{hour}shared-name");
    let mine = archive
        .put(&key, Bytes::from_static(b"{\"mine\": 1}"))
        .await;
    assert_eq!(mine.unwrap(), Written::Created, "{}", archive.url());
    assert_eq!(other.get(&key).await.unwrap(), None, "{}", other.url());
    assert_eq!(
        listed(other, &hour).await,
        Vec::<String>::new(),
        "{}",
        other.url()
    );
    let theirs = other
        .put(&key, Bytes::from_static(b"{\"theirs\": 1}"))
        .await;
    assert_eq!(theirs.unwrap(), Written::Created, "{}", other.url());
    other
        .put(&format!("{hour}theirs-only"), Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert_eq!(
        listed(archive, &hour).await,
        std::slice::from_ref(&key),
        "{}",
        archive.url()
    );
    let kept = archive.get(&key).await.unwrap();
    assert_eq!(
        kept.as_deref(),
        Some(&b"{\"mine\": 1}"[..]),
        "{}",
        archive.url()
    );
}

/// A listing of `n` keys in one hour gives every one of them (more than 1000: past a page of
/// S3's and Cloud Storage's listings).
pub async fn lists_past_one_page(archive: &dyn Archive, n: usize) {
    let url = archive.url();
    let (hour, _) = fresh_hours();
    let keys: BTreeSet<String> = (0..n)
        .map(|i| format!("{hour}{i:06}-{}", attempt_id()))
        .collect();
    let mut writes = futures_util::stream::iter(keys.iter())
        .map(|key| async move { (key, archive.put(key, Bytes::from_static(b"{}")).await) })
        .buffer_unordered(WRITES_IN_FLIGHT);
    while let Some((key, written)) = writes.next().await {
        let written = written.unwrap_or_else(|e| panic!("{url}: put {key}: {e}"));
        assert_eq!(written, Written::Created, "{url}: {key}");
    }
    let listed = archive.list(&hour).await.unwrap();
    assert_eq!(
        listed.len(),
        n,
        "{url}: {} keys listed, {n} written",
        listed.len()
    );
    let listed: BTreeSet<String> = listed.into_iter().collect();
    assert!(
        listed == keys,
        "{url}: the listing differs from the keys written"
    );
}

/// The archive's key in tests (`RELAY_ARCHIVE_KEY`).
pub const KEY: &str = "the archive key of the relay's tests";

/// [`KEY`] as the relay takes it.
pub fn key() -> ArchiveKey {
    ArchiveKey::new(KEY.as_bytes()).expect("long enough")
}

/// A record of a notification received in a fresh hour (its dedup key `name` made unique).
pub fn fresh_record(name: &str, payload: &'static str) -> Record {
    let at = fresh_hour() + Duration::from_secs(30 * 60);
    let dedup_key = format!("{name}-{}", &attempt_id()[..12]);
    Record {
        received_at: at,
        dedup_key: dedup_key.clone(),
        attributes: vec![("relay.dedup_key".into(), dedup_key)],
        request: serde_json::json!({"path": "/", "query": {}, "headers": {}}),
        dropped_headers: Vec::new(),
        payload: Bytes::from_static(payload.as_bytes()),
        refused: None,
    }
}

/// Writes `record` as the relay does, through the archive's destination: the key it landed
/// under, or the sink's error.
pub async fn write(archive: &Arc<dyn Archive>, record: &Record) -> Result<String, String> {
    let destination = destination(Arc::clone(archive), key(), None);
    match destination.sink.publish(&record.message()).await {
        Ok(receipt) => Ok(receipt.message_id.expect("the archive names its object")),
        Err(e) => Err(e.to_string()),
    }
}

/// What is found at a notification's key before its first write, in every store: another
/// notification's record, its own record unsealed, its own record sealed with another key, and
/// bytes that are no record. `record` is the notification.
pub fn planted(record: &Record) -> Vec<(&'static str, Bytes)> {
    let other = ArchiveKey::new(b"someone else's archive key").expect("long enough");
    let mut forged = record.clone();
    forged.payload = Bytes::from_static(b"{\"forged\": true}");
    vec![
        (
            "another record",
            Bytes::from(key().seal(&forged.to_bytes())),
        ),
        ("its record unsealed", Bytes::from(record.to_bytes())),
        (
            "its record sealed with another key",
            Bytes::from(other.seal(&record.to_bytes())),
        ),
        ("no record", Bytes::from_static(b"{}")),
    ]
}

/// An object planted at a notification's key never counts as its record: the relay writes its
/// own beside it, a retry finds that one, and the planted object is left as it was. `plant`
/// puts the planted object (or folder, or link) at the key, relative to the archive.
pub async fn a_planted_object_is_not_a_record<F, Fut>(
    archive: &Arc<dyn Archive>,
    case: &str,
    plant: F,
) where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let record = fresh_record("planted", "{\"bundle\": 1}");
    let at_key = object_key(record.received_at, &record.dedup_key);
    plant(at_key.clone()).await;
    let before = archive.get(&at_key).await.ok().flatten();
    let written = write(archive, &record)
        .await
        .unwrap_or_else(|e| panic!("{case}: the write failed: {e}"));
    assert_ne!(
        written, at_key,
        "{case}: counted as the notification's record"
    );
    assert!(
        written.starts_with(&format!("{at_key}.")),
        "{case}: {written}"
    );
    let found = archive.get(&written).await.unwrap().expect("written");
    let opened = Record::open(&key(), &found).expect("the relay's record opens");
    assert_eq!(opened, record, "{case}");
    let mut retry = record.clone();
    retry.received_at += Duration::from_secs(60);
    assert_eq!(
        write(archive, &retry).await.unwrap(),
        written,
        "{case}: a retry"
    );
    assert_eq!(
        archive.get(&at_key).await.ok().flatten(),
        before,
        "{case}: left alone"
    );
}

/// A notification's second attempt in the hour finds its first record at its key and counts it.
pub async fn a_retry_finds_its_record(archive: &Arc<dyn Archive>) {
    let record = fresh_record("retried", "{\"bundle\": 2}");
    let first = write(archive, &record).await.unwrap();
    assert_eq!(first, object_key(record.received_at, &record.dedup_key));
    let mut retry = record.clone();
    retry.received_at += Duration::from_secs(60);
    assert_eq!(write(archive, &retry).await.unwrap(), first);
    let found = archive.get(&first).await.unwrap().unwrap();
    assert_eq!(
        Record::open(&key(), &found).unwrap(),
        record,
        "the first is kept"
    );
}

/// [`a_planted_object_is_not_a_record`] for every object of [`planted`], put through the
/// store, and [`a_retry_finds_its_record`]: what any store must do.
pub async fn planted_objects_never_count(archive: &Arc<dyn Archive>) {
    a_retry_finds_its_record(archive).await;
    let record = fresh_record("planted", "{\"bundle\": 1}");
    for (case, bytes) in planted(&record) {
        a_planted_object_is_not_a_record(archive, case, |key| async move {
            let put = archive.put(&key, bytes).await.expect("planted");
            assert_eq!(put, Written::Created);
        })
        .await;
    }
}

/// `record` as the relay writes it: sealed with [`key`].
pub fn sealed(record: &Record) -> Bytes {
    Bytes::from(key().seal(&record.to_bytes()))
}
