//! The part of [crc-fast]'s interface that `aws-smithy-checksums` uses: three CRCs, each
//! computed by a crate that does that one (README.md says why).
//!
//! [crc-fast]: https://crates.io/crates/crc-fast

use std::fmt;

/// The CRCs the AWS SDK's checksums ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CrcAlgorithm {
    /// CRC-32/ISO-HDLC: S3's `crc32`.
    Crc32IsoHdlc,
    /// CRC-32/ISCSI (Castagnoli): S3's `crc32c`.
    Crc32Iscsi,
    /// CRC-64/NVME: S3's `crc64nvme`.
    Crc64Nvme,
}

/// CRC-64/NVME, slice-by-16.
static CRC_64_NVME: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_NVME);

#[derive(Clone)]
enum State {
    Crc32(crc32fast::Hasher),
    Crc32c(u32),
    Crc64(crc::Digest<'static, u64, crc::Table<16>>),
}

/// A CRC computed over data given in parts.
#[derive(Clone)]
pub struct Digest {
    algorithm: CrcAlgorithm,
    state: State,
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Digest")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl Digest {
    /// A digest of no data yet.
    pub fn new(algorithm: CrcAlgorithm) -> Self {
        let state = match algorithm {
            CrcAlgorithm::Crc32IsoHdlc => State::Crc32(crc32fast::Hasher::new()),
            CrcAlgorithm::Crc32Iscsi => State::Crc32c(0),
            CrcAlgorithm::Crc64Nvme => State::Crc64(CRC_64_NVME.digest()),
        };
        Self { algorithm, state }
    }

    /// Adds `data` to what the digest covers.
    pub fn update(&mut self, data: &[u8]) {
        match &mut self.state {
            State::Crc32(hasher) => hasher.update(data),
            State::Crc32c(crc) => *crc = crc32c::crc32c_append(*crc, data),
            State::Crc64(digest) => digest.update(data),
        }
    }

    /// The CRC of everything given so far (a 32-bit CRC in the low bits); the digest goes on.
    pub fn finalize(&self) -> u64 {
        match &self.state {
            State::Crc32(hasher) => u64::from(hasher.clone().finalize()),
            State::Crc32c(crc) => u64::from(*crc),
            State::Crc64(digest) => digest.clone().finalize(),
        }
    }

    /// Starts over, as [`Digest::new`] with the same CRC.
    pub fn reset(&mut self) {
        *self = Self::new(self.algorithm);
    }
}

/// The CRC of `buf`.
pub fn checksum(algorithm: CrcAlgorithm, buf: &[u8]) -> u64 {
    let mut digest = Digest::new(algorithm);
    digest.update(buf);
    digest.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [CrcAlgorithm; 3] = [
        CrcAlgorithm::Crc32IsoHdlc,
        CrcAlgorithm::Crc32Iscsi,
        CrcAlgorithm::Crc64Nvme,
    ];

    #[test]
    fn each_crc_gives_its_catalogued_check_value() {
        // The CRC of "123456789", as the CRC catalogue lists each.
        let check = [0xCBF4_3926, 0xE306_9283, 0xAE8B_1486_0A79_9888];
        for (algorithm, expected) in ALL.into_iter().zip(check) {
            assert_eq!(checksum(algorithm, b"123456789"), expected, "{algorithm:?}");
        }
    }

    #[test]
    fn parts_give_the_crc_of_the_whole_and_finalize_leaves_the_digest_going() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for algorithm in ALL {
            let whole = checksum(algorithm, &data);
            let mut digest = Digest::new(algorithm);
            for part in data.chunks(333) {
                digest.update(part);
            }
            assert_eq!(digest.finalize(), whole, "{algorithm:?}");
            assert_eq!(digest.finalize(), whole, "{algorithm:?}: finalize twice");
            digest.reset();
            assert_eq!(digest.finalize(), checksum(algorithm, b""), "{algorithm:?}");
            assert_ne!(whole, checksum(algorithm, &data[1..]), "{algorithm:?}");
        }
    }

    #[test]
    fn the_sdk_checksums_come_out_as_the_sdk_expects() {
        // aws-smithy-checksums' own vectors for "test data", through its code (which calls this
        // crate once patched in), as the header values S3 receives.
        use aws_smithy_checksums::ChecksumAlgorithm;
        for (algorithm, expected) in [
            (ChecksumAlgorithm::Crc32, &[0xD3, 0x08, 0xAE, 0xB2][..]),
            (ChecksumAlgorithm::Crc32c, &[0x33, 0x79, 0xB4, 0xCA][..]),
            (
                ChecksumAlgorithm::Crc64Nvme,
                &[0xAE, 0xCA, 0xF3, 0xAF, 0x9C, 0x98, 0xA8, 0x55][..],
            ),
        ] {
            let mut checksum = algorithm.into_impl();
            checksum.update(b"test data");
            assert_eq!(&checksum.finalize()[..], expected, "{algorithm:?}");
        }
    }
}
