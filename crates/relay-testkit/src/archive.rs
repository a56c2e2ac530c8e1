//! The archive conformance suite: the same writes, listings and reads against any store, so
//! that a folder, S3 and Cloud Storage keep the same promises ([`conformance`]). Every call
//! works in hour folders of its own, far in the future, so runs sharing a store never meet.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::future::join_all;
use relay_core::archive::{Archive, Written, hour_prefix};
use relay_core::ledger::attempt_id;

/// How many writers race for one key in [`conformance`].
pub const RACING_WRITERS: usize = 8;

/// How many keys [`lists_past_one_page`] writes at once.
const WRITES_IN_FLIGHT: usize = 32;

/// A random hour between the years 2100 and 3200: its folder (`YYYY/MM/DD/HH/`) and the next
/// hour's.
pub fn fresh_hours() -> (String, String) {
    const YEAR_2100: u64 = 4_102_444_800;
    let hours = u64::from_str_radix(&attempt_id()[..8], 16).expect("hex") % 9_000_000;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(YEAR_2100 + hours * 3600);
    (hour_prefix(at), hour_prefix(at + Duration::from_secs(3600)))
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
/// - a body of a few hundred KB, not UTF-8, round-trips byte for byte;
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
        listed(archive, &hour).await,
        [format!("{hour}first"), format!("{hour}second")],
        "{url}: the hour's listing"
    );
    assert_eq!(
        listed(archive, &next_hour).await,
        [format!("{next_hour}next")],
        "{url}: the next hour's listing"
    );
    let (empty, _) = fresh_hours();
    assert_eq!(listed(archive, &empty).await, Vec::<String>::new(), "{url}");

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

    // Racing writers: exactly one creates, and its body is the one kept.
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
