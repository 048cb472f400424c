//! The server-wide blob store (`POST /blobstore`, `GET /blobstore/{id}`): blobs are kept in
//! memory under the SHA-256 of their bytes, with the compression they were uploaded with.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;

use pocket_ic::common::rest::{BinaryBlob, BlobCompression, BlobId};
use sha2::{Digest, Sha256};

use crate::error::ServerError;

/// Blobs by id. Lives as long as the server; instances share it.
#[derive(Debug, Default)]
pub struct BlobStore {
    blobs: Mutex<HashMap<Vec<u8>, BinaryBlob>>,
}

impl BlobStore {
    /// Stores `blob` and returns its id (the SHA-256 of the bytes as uploaded).
    pub fn store(&self, blob: BinaryBlob) -> BlobId {
        let id = Sha256::digest(&blob.data).to_vec();
        self.lock().insert(id.clone(), blob);
        BlobId(id)
    }

    /// The blob stored under `id`, as uploaded (compressed if it was).
    pub fn fetch(&self, id: &BlobId) -> Option<BinaryBlob> {
        self.lock().get(&id.0).cloned()
    }

    /// The uncompressed bytes of blob `id`. Errors: no such blob, invalid gzip data.
    pub fn fetch_bytes(&self, id: &BlobId) -> Result<Vec<u8>, ServerError> {
        let blob = self
            .fetch(id)
            .ok_or_else(|| ServerError::BlobNotFound(hex::encode(&id.0)))?;
        match blob.compression {
            BlobCompression::NoCompression => Ok(blob.data),
            BlobCompression::Gzip => gunzip(&blob.data),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, BinaryBlob>> {
        // A panic while holding the lock cannot leave the map inconsistent (single inserts).
        self.blobs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Decompresses gzip data.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>, ServerError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .map_err(ServerError::Gzip)?;
    Ok(out)
}

/// True if `data` starts with the gzip magic bytes.
pub fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&[0x1f, 0x8b])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn stores_by_sha256_and_decompresses_gzip() {
        let store = BlobStore::default();
        let id = store.store(BinaryBlob {
            data: b"abc".to_vec(),
            compression: BlobCompression::NoCompression,
        });
        assert_eq!(
            hex::encode(&id.0),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(store.fetch_bytes(&id).unwrap(), b"abc");

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"stable bytes").unwrap();
        let data = gz.finish().unwrap();
        assert!(is_gzip(&data));
        let id = store.store(BinaryBlob {
            data,
            compression: BlobCompression::Gzip,
        });
        assert_eq!(store.fetch_bytes(&id).unwrap(), b"stable bytes");
        assert!(matches!(
            store.fetch_bytes(&BlobId(vec![1, 2])),
            Err(ServerError::BlobNotFound(id)) if id == "0102"
        ));
    }
}
