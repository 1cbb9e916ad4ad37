//! Counts stored one per key — the layout before books — folded into their
//! users' books: for all of a shard's data when it opens, and for slots
//! imported from a node that still wrote them. Each fold of a slot is one
//! synced WriteBatch (the books written, the old keys deleted), so a crash
//! part-way leaves every count in exactly one of the two places, and the
//! next open finishes the job.

use super::book::Book;
use super::counter::Counter;
use crate::storage::keys::{self, ks};
use crate::storage::{value, Storage, StorageError, WriteBatch};

/// Fold the old-layout counts of `slots` in `shard` into books; the number
/// of counts moved. A count whose book already has an entry for its rule
/// and item is dropped (the book was written later); a value that does not
/// decode is kept where it is and logged.
pub fn fold(
    storage: &Storage,
    shard: usize,
    slots: impl IntoIterator<Item = u16>,
) -> Result<usize, StorageError> {
    let mut moved = 0;
    for slot in slots {
        let (from, to) = keys::keyspace_range(slot, ks::LIMIT_COUNTER);
        let mut old: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        storage.scan(shard, &from, &to, |k, v| {
            old.push((k.to_vec(), v.to_vec()));
            true
        })?;
        if old.is_empty() {
            continue;
        }
        let cf = storage.cf(shard);
        let mut batch = WriteBatch::default();
        // Keys are in (user, policy, rule, item) order: one book per run.
        let mut current: Option<(Vec<u8>, Option<Book>)> = None;
        for (key, raw) in &old {
            let Some(keys::OldCount {
                user,
                policy,
                rule,
                item,
            }) = keys::parse_limit_counter(key)
            else {
                tracing::warn!(key = ?key, "a limit count key of the old layout does not parse; left as it is");
                continue;
            };
            let counter = match Counter::decode(raw, 0) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(key = ?key, error = %e, "a limit count of the old layout does not decode; left as it is");
                    continue;
                }
            };
            let book_key = keys::limit_book(slot, user, policy);
            if current.as_ref().is_none_or(|(k, _)| *k != book_key) {
                if let Some((k, Some(book))) = current.take() {
                    put_book(&mut batch, cf, k, &book);
                }
                let book = match storage.get(shard, &book_key)? {
                    None => Some(Book::default()),
                    Some(raw) => match Book::decode_stored(&raw, 0).map(Book::into_owned) {
                        Ok(book) => Some(book),
                        Err(e) => {
                            tracing::warn!(key = ?book_key, error = %e, "a limit book does not decode; the old-layout counts of its user are left as they are");
                            None
                        }
                    },
                };
                current = Some((book_key, book));
            }
            let Some((_, Some(book))) = current.as_mut() else {
                continue;
            };
            let (rule, item) = (String::from_utf8_lossy(rule), String::from_utf8_lossy(item));
            if book.expiry(&rule, &item).is_none() {
                let expires_at = value::expiry_of(raw).unwrap_or(1);
                book.set(rule.into_owned(), item.into_owned(), counter, expires_at);
            }
            batch.delete_cf(cf, key);
            moved += 1;
        }
        if let Some((k, Some(book))) = current.take() {
            put_book(&mut batch, cf, k, &book);
        }
        storage.write(batch, true)?;
    }
    Ok(moved)
}

fn put_book(batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, key: Vec<u8>, book: &Book) {
    match book.encode() {
        Some(raw) => batch.put_cf(cf, key, raw),
        None => batch.delete_cf(cf, key),
    }
}
