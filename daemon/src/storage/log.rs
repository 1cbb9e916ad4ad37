//! The shard log: each shard's own append-only record of its committed
//! passes, so that a pass is durable with one `write` and one `fdatasync`
//! of its own file, and RocksDB is written later, in sorted runs
//! (`storage.commit = "log"`; see `shard::pending`).
//!
//! Why: RocksDB inserts every write into a skiplist memtable at once, and a
//! random key's insert is a chain of cache misses — about 3 µs of CPU per
//! write with the flush that sorts it again, more than half of a whole SET
//! (bench/results/NOTES.md). The same keys, sorted first and inserted as a
//! run, cost about a third of that. The log makes the pass durable now; the
//! run can wait.
//!
//! Layout: `DIR/rush-log/shard-{i}/{first seq:020}.log`, segments of
//! records. A record is one pass:
//!
//! ```text
//! u32 LE  length of what follows the checksum (seq + entries)
//! u32 LE  CRC-32C of those bytes
//! u64 LE  seq (1, 2, 3…: one per pass, in commit order)
//! entry*  u8 op (1 put, 2 delete, 3 merge) | u32 LE key length | key
//!         | (put, merge) u32 LE value length | value
//! ```
//!
//! A segment is only appended to. A new one starts when the pending writes
//! are written back to RocksDB ([`ShardLog::rotate`]); segments whose
//! records are all in RocksDB (synced) are deleted ([`ShardLog::trim`]).
//! RocksDB's meta column family records, in the same batch as each write
//! back, the last seq it holds (`keys::meta::shard_log`): at open, records
//! after it are replayed ([`replay`]). A record cut short by a crash can
//! only be the last one written (nothing is acknowledged before its record
//! is whole and synced), so a bad record with no record after it — at the
//! end of the last segment, or of a segment left after a failed append, the
//! next segment going on with the next seq — is a torn tail and is dropped.
//! A bad record followed by the next record, or a gap in the seqs, is
//! corruption: acknowledged writes would be lost, and the node refuses to
//! open.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The log of every shard lives under this directory of the data directory.
pub const LOG_DIR: &str = "rush-log";

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;
/// An operand for RocksDB's merge operator (`storage::merge`).
const OP_MERGE: u8 = 3;
/// Length and checksum.
const FRAME: usize = 8;
/// A record's seq.
const SEQ: usize = 8;
/// A record larger than this is corrupt (a pass is bounded far below it).
const MAX_RECORD: usize = 1 << 30;

const CRC: crc::Crc<u32, crc::Table<16>> = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// The log directory of shard `i`.
pub fn shard_dir(data: &Path, i: usize) -> PathBuf {
    data.join(LOG_DIR).join(format!("shard-{i}"))
}

/// One write of a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
    /// An operand to merge into the key (`storage::merge`).
    Merge(&'a [u8], &'a [u8]),
}

/// What went wrong reading a log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{path}, byte {offset}: {why}; records RocksDB lacks would be lost past it, so the data \
         directory is not opened"
    )]
    Corrupt {
        path: PathBuf,
        offset: u64,
        why: &'static str,
    },
}

/// The writing end of one shard's log.
pub struct ShardLog {
    dir: PathBuf,
    file: File,
    /// Closed segments (first seq, path), oldest first.
    closed: Vec<(u64, PathBuf)>,
    /// The current segment's first seq and path.
    first: u64,
    path: PathBuf,
    /// Bytes in the current segment (what a failed append truncates back to).
    len: u64,
    next_seq: u64,
    /// The record being built (reused from pass to pass).
    buf: Vec<u8>,
    /// The last append failed: start a new segment before the next one.
    broken: bool,
}

impl ShardLog {
    /// Start a log in `dir` (created if missing) whose first record will be
    /// `next_seq`. Segments already there are left to [`ShardLog::trim`]:
    /// the caller has replayed them.
    pub fn create(dir: &Path, next_seq: u64) -> io::Result<ShardLog> {
        fs::create_dir_all(dir)?;
        let mut closed: Vec<(u64, PathBuf)> = segments(dir)?;
        closed.retain(|(first, _)| *first < next_seq);
        let (file, path) = new_segment(dir, next_seq)?;
        Ok(ShardLog {
            dir: dir.to_path_buf(),
            file,
            closed,
            first: next_seq,
            path,
            len: 0,
            next_seq,
            buf: Vec::with_capacity(64 << 10),
            broken: false,
        })
    }

    /// The seq the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Bytes written to the current segment.
    pub fn segment_bytes(&self) -> u64 {
        self.len
    }

    /// Start a record.
    pub fn begin(&mut self) {
        self.buf.clear();
        self.buf.extend_from_slice(&[0; FRAME]);
        self.buf.extend_from_slice(&self.next_seq.to_le_bytes());
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.with_value(OP_PUT, key, value);
    }

    /// An operand to merge into `key` (`storage::merge`).
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) {
        self.with_value(OP_MERGE, key, operand);
    }

    fn with_value(&mut self, op: u8, key: &[u8], value: &[u8]) {
        self.buf.reserve(9 + key.len() + value.len());
        self.buf.push(op);
        self.buf
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(key);
        self.buf
            .extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(value);
    }

    pub fn delete(&mut self, key: &[u8]) {
        self.buf.push(OP_DELETE);
        self.buf
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(key);
    }

    /// Append the record begun with [`ShardLog::begin`], and fdatasync
    /// when `sync`: on `Ok` it is durable (with `sync`) and its seq is
    /// returned. On an error nothing of it counts: the segment is cut back
    /// to where it was, and the next record goes to a new segment.
    pub fn commit(&mut self, sync: bool) -> io::Result<u64> {
        if self.broken {
            self.start_segment()?;
            self.broken = false;
        }
        let body = (self.buf.len() - FRAME) as u32;
        let crc = CRC.checksum(&self.buf[FRAME..]);
        self.buf[..4].copy_from_slice(&body.to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        let written = self.file.write_all(&self.buf).and_then(|()| {
            if sync {
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            // Whatever reached the file must not be read back as a record.
            let _ = self.file.set_len(self.len);
            self.broken = true;
            return Err(e);
        }
        self.len += self.buf.len() as u64;
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(seq)
    }

    /// Make what was appended without `sync` durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Start a new segment, so that every earlier record is in closed
    /// segments (which [`ShardLog::trim`] may then delete). Nothing to do
    /// when the current one is empty.
    pub fn rotate(&mut self) -> io::Result<()> {
        if self.len == 0 && !self.broken {
            return Ok(());
        }
        self.start_segment()
    }

    fn start_segment(&mut self) -> io::Result<()> {
        if self.len == 0 {
            // No whole record in it (a failed first append): start it over
            // rather than leave an empty segment of the same name behind.
            self.file.set_len(0)?;
            return Ok(());
        }
        // A closed segment is synced whole before it is left behind, so
        // that no later record (in the next segment) outlives an earlier
        // one that was appended without a sync. (Not after a failed
        // append: its segment is left as it was cut back to.)
        if !self.broken {
            self.file.sync_data()?;
        }
        let (file, path) = new_segment(&self.dir, self.next_seq)?;
        let old = std::mem::replace(&mut self.path, path);
        self.closed.push((self.first, old));
        self.file = file;
        self.first = self.next_seq;
        self.len = 0;
        Ok(())
    }

    /// Delete closed segments whose records are all at or before `through`
    /// (RocksDB holds them, synced).
    pub fn trim(&mut self, through: u64) {
        while !self.closed.is_empty() {
            // A closed segment ends where the next one starts.
            let end = self.closed.get(1).map_or(self.first, |(first, _)| *first);
            if end > through + 1 {
                break;
            }
            let (_, path) = self.closed.remove(0);
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "can't delete a written-back log segment");
            }
        }
    }
}

/// Create segment `first` in `dir`, and make its name durable.
fn new_segment(dir: &Path, first: u64) -> io::Result<(File, PathBuf)> {
    let path = dir.join(format!("{first:020}.log"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)?;
    File::open(dir)?.sync_all()?;
    Ok((file, path))
}

/// The segments in `dir`, oldest first.
fn segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let first = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(first) = first {
            out.push((first, path));
        }
    }
    out.sort();
    Ok(out)
}

/// Read the log in `dir` and call `apply` with every record after `after`,
/// in order. A torn tail (see the module's doc) is dropped, and cut off the
/// last segment. Returns the last seq read (`after` when there was nothing
/// newer).
pub fn replay(
    dir: &Path,
    after: u64,
    mut apply: impl FnMut(u64, Entries<'_>) -> Result<(), LogError>,
) -> Result<u64, LogError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LogError::Io { path, source }
    };
    let list = match segments(dir) {
        Ok(list) => list,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(after),
        Err(e) => return Err(io(dir)(e)),
    };
    let mut last = after;
    // The seq the next record must have (none known before the first).
    let mut next: Option<u64> = None;
    for (i, (first, path)) in list.iter().enumerate() {
        let corrupt = |offset: usize, why| LogError::Corrupt {
            path: path.clone(),
            offset: offset as u64,
            why,
        };
        // A segment is named after its first record: a later one than the
        // seq expected means records are missing that RocksDB may not hold.
        let n = next.unwrap_or(after + 1);
        if *first > n && *first > after + 1 {
            return Err(corrupt(0, "records missing before this segment"));
        }
        let mut data = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut data))
            .map_err(io(path))?;
        let mut expected = *first;
        let mut at = 0usize;
        while at < data.len() {
            match record(&data[at..]) {
                Ok((seq, body, used)) => {
                    if seq != expected {
                        return Err(corrupt(at, "out of sequence"));
                    }
                    if seq > last {
                        apply(seq, Entries { rest: body })?;
                        last = seq;
                    }
                    expected = seq + 1;
                    at += used;
                }
                Err(why) => {
                    // Torn only if nothing RocksDB lacks comes after it: no
                    // record of the next seq behind it (and, for a segment
                    // left after a failed append, the next segment going on
                    // with that seq: checked as that segment starts).
                    if record_follows(&data[at..], expected, after) {
                        return Err(corrupt(at, why));
                    }
                    tracing::warn!(
                        path = %path.display(),
                        offset = at,
                        dropped = data.len() - at,
                        why,
                        "the shard log ends in a torn record (a crash or a failed append while it was written): dropped"
                    );
                    if i + 1 == list.len() {
                        OpenOptions::new()
                            .write(true)
                            .open(path)
                            .and_then(|f| f.set_len(at as u64).and_then(|()| f.sync_all()))
                            .map_err(io(path))?;
                    }
                    break;
                }
            }
        }
        next = Some(expected);
    }
    Ok(last)
}

/// Whether a whole record that RocksDB doesn't hold (after `after`)
/// starts somewhere after the bad one at the start of `rest`, which should
/// have had seq `seq`: then the bad one is a hole before it, not a torn
/// tail. (Only the error path searches; the seq a follower must carry makes
/// false candidates rare.)
fn record_follows(rest: &[u8], seq: u64, after: u64) -> bool {
    // The bad record had `seq` (or was a failed append's leftover, which
    // had none): what follows it carries `seq` or `seq + 1`.
    (1..rest.len().saturating_sub(FRAME + SEQ - 1)).any(|start| {
        let at = u64::from_le_bytes(
            rest[start + FRAME..start + FRAME + SEQ]
                .try_into()
                .expect("8 bytes"),
        );
        (at == seq || at == seq + 1)
            && at > after
            && record(&rest[start..]).is_ok_and(|(s, _, _)| s == at)
    })
}

/// Delete every segment in `dir` (all replayed and written back).
pub fn clear(dir: &Path) -> io::Result<()> {
    match segments(dir) {
        Ok(list) => list.iter().try_for_each(|(_, p)| fs::remove_file(p)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// One record at the start of `data`: its seq, entries and size.
fn record(data: &[u8]) -> Result<(u64, &[u8], usize), &'static str> {
    if data.len() < FRAME + SEQ {
        return Err("short header");
    }
    let len = u32::from_le_bytes(data[..4].try_into().expect("4 bytes")) as usize;
    if !(SEQ..=MAX_RECORD).contains(&len) {
        return Err("bad length");
    }
    let Some(body) = data.get(FRAME..FRAME + len) else {
        return Err("cut short");
    };
    let crc = u32::from_le_bytes(data[4..8].try_into().expect("4 bytes"));
    if CRC.checksum(body) != crc {
        return Err("checksum mismatch");
    }
    let seq = u64::from_le_bytes(body[..SEQ].try_into().expect("8 bytes"));
    let entries = &body[SEQ..];
    Entries { rest: entries }
        .try_fold((), |(), e| e.map(|_| ()))
        .map_err(|()| "bad entry")?;
    Ok((seq, entries, FRAME + len))
}

/// The entries of one record (checked whole before it is handed out).
pub struct Entries<'a> {
    rest: &'a [u8],
}

impl<'a> Entries<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ()> {
        if self.rest.len() < n {
            return Err(());
        }
        let (a, b) = self.rest.split_at(n);
        self.rest = b;
        Ok(a)
    }

    fn len_prefixed(&mut self) -> Result<&'a [u8], ()> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize;
        self.take(n)
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&op, rest) = self.rest.split_first()?;
        self.rest = rest;
        let entry = match op {
            OP_PUT => self
                .len_prefixed()
                .and_then(|k| Ok(Entry::Put(k, self.len_prefixed()?))),
            OP_DELETE => self.len_prefixed().map(Entry::Delete),
            OP_MERGE => self
                .len_prefixed()
                .and_then(|k| Ok(Entry::Merge(k, self.len_prefixed()?))),
            _ => Err(()),
        };
        if entry.is_err() {
            self.rest = &[];
        }
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Record = (u64, Vec<(Vec<u8>, Option<Vec<u8>>)>);

    fn read_all(dir: &Path, after: u64) -> Result<Vec<Record>, LogError> {
        let mut out = Vec::new();
        replay(dir, after, |seq, entries| {
            let list = entries
                .map(|e| match e.expect("checked") {
                    Entry::Put(k, v) => (k.to_vec(), Some(v.to_vec())),
                    Entry::Delete(k) => (k.to_vec(), None),
                    Entry::Merge(k, v) => (k.to_vec(), Some([b"merge ", v].concat())),
                })
                .collect();
            out.push((seq, list));
            Ok(())
        })?;
        Ok(out)
    }

    fn pass(log: &mut ShardLog, n: u8) -> u64 {
        log.begin();
        log.put(&[n], &[n; 3]);
        log.delete(&[n, n]);
        log.merge(&[n, n, n], &[n]);
        log.commit(true).unwrap()
    }

    #[test]
    fn records_come_back_in_order_after_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = ShardLog::create(dir.path(), 1).unwrap();
        assert_eq!((pass(&mut log, 1), pass(&mut log, 2)), (1, 2));
        log.rotate().unwrap();
        assert_eq!(pass(&mut log, 3), 3);
        let all = read_all(dir.path(), 0).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(
            all[2],
            (
                3,
                vec![
                    (vec![3], Some(vec![3; 3])),
                    (vec![3, 3], None),
                    (vec![3; 3], Some(b"merge \x03".to_vec()))
                ]
            )
        );
        assert_eq!(
            read_all(dir.path(), 2).unwrap().len(),
            1,
            "after the mark only"
        );
        // Written back through 2: the first segment goes, the second stays.
        log.trim(2);
        assert_eq!(segments(dir.path()).unwrap().len(), 1);
        assert_eq!(read_all(dir.path(), 2).unwrap()[0].0, 3);
        assert!(
            matches!(read_all(dir.path(), 0), Err(LogError::Corrupt { .. })),
            "records 1 and 2 are gone: only a marker through them reads it"
        );
        // A new log after a replay numbers on.
        drop(log);
        let mut log = ShardLog::create(dir.path(), 4).unwrap();
        assert_eq!(pass(&mut log, 4), 4);
        log.trim(3);
        assert_eq!(read_all(dir.path(), 3).unwrap().len(), 1);
    }

    /// A closed log of records 1 and 2 in one segment: that segment.
    fn two_records(dir: &Path) -> PathBuf {
        let mut log = ShardLog::create(dir, 1).unwrap();
        pass(&mut log, 1);
        pass(&mut log, 2);
        log.path.clone()
    }

    /// Flip a byte inside the first record of the segment at `path`.
    fn damage_first_record(path: &Path) {
        let mut data = fs::read(path).unwrap();
        data[FRAME + SEQ + 2] ^= 0xff;
        fs::write(path, &data).unwrap();
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_corruption_before_records_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let path = two_records(dir.path());
        // A crash in the middle of the third record's write.
        let mut data = fs::read(&path).unwrap();
        let whole = data.len();
        data.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3]);
        fs::write(&path, &data).unwrap();
        assert_eq!(read_all(dir.path(), 0).unwrap().len(), 2);
        assert_eq!(
            fs::metadata(&path).unwrap().len() as usize,
            whole,
            "cut back"
        );
        // A flipped byte in the first record, with the second after it.
        damage_first_record(&path);
        let mut log = ShardLog::create(dir.path(), 3).unwrap();
        pass(&mut log, 3);
        assert!(matches!(
            read_all(dir.path(), 0),
            Err(LogError::Corrupt { offset: 0, .. })
        ));
    }

    #[test]
    fn a_bad_record_with_the_next_one_after_it_is_corruption_even_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = two_records(dir.path());
        // The last segment, its first record damaged: record 2 after it was
        // acknowledged, so this is no torn tail to cut off.
        let whole = fs::metadata(&path).unwrap().len() as usize;
        damage_first_record(&path);
        assert!(matches!(
            read_all(dir.path(), 0),
            Err(LogError::Corrupt { offset: 0, .. })
        ));
        assert_eq!(
            fs::metadata(&path).unwrap().len() as usize,
            whole,
            "left as it was"
        );
    }

    #[test]
    fn a_failed_appends_leftover_is_dropped_and_a_missing_segment_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = ShardLog::create(dir.path(), 1).unwrap();
        pass(&mut log, 1);
        let first = log.path.clone();
        // An append that failed and could not be cut back: garbage after
        // record 1, and the log goes on in a new segment with seq 2.
        log.file = File::open(&log.path).unwrap();
        log.begin();
        log.put(b"k", b"v");
        assert!(log.commit(true).is_err());
        let mut f = OpenOptions::new().append(true).open(&first).unwrap();
        f.write_all(&[60, 0, 0, 0, 9, 9, 9, 9, 2, 0, 0]).unwrap();
        assert_eq!(pass(&mut log, 2), 2);
        log.rotate().unwrap();
        assert_eq!(pass(&mut log, 3), 3);
        let all = read_all(dir.path(), 0).unwrap();
        assert_eq!(all.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!(
            fs::metadata(&first).unwrap().len() > 0,
            "only the last segment is cut"
        );
        // Record 2's segment gone: records 2 and on would be lost.
        let list = segments(dir.path()).unwrap();
        assert_eq!(list.len(), 3);
        fs::remove_file(&list[1].1).unwrap();
        assert!(matches!(
            read_all(dir.path(), 0),
            Err(LogError::Corrupt { .. })
        ));
        // Unless RocksDB holds them already.
        assert_eq!(read_all(dir.path(), 2).unwrap().len(), 1);
    }

    #[test]
    fn a_failed_first_append_starts_its_segment_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = ShardLog::create(dir.path(), 1).unwrap();
        let path = log.path.clone();
        log.file = File::open(&path).unwrap();
        log.begin();
        log.put(b"k", b"v");
        assert!(log.commit(true).is_err());
        log.file = OpenOptions::new().write(true).open(&path).unwrap();
        assert_eq!(pass(&mut log, 1), 1);
        assert_eq!(segments(dir.path()).unwrap().len(), 1);
        // Trimming through record 0 must not delete the segment in use.
        log.trim(0);
        assert_eq!(read_all(dir.path(), 0).unwrap().len(), 1);
    }

    #[test]
    fn a_failed_append_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = ShardLog::create(dir.path(), 1).unwrap();
        pass(&mut log, 1);
        // Make the next write fail: swap the file for a read-only handle.
        log.file = File::open(&log.path).unwrap();
        log.begin();
        log.put(b"k", b"v");
        assert!(log.commit(true).is_err());
        assert_eq!(log.next_seq(), 2, "the failed record took no seq");
        assert_eq!(pass(&mut log, 2), 2, "the next one starts a new segment");
        assert_eq!(segments(dir.path()).unwrap().len(), 2);
        let all = read_all(dir.path(), 0).unwrap();
        assert_eq!(all.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2]);
    }
}
