//! [`FileSink`]: entries framed into a file, rotated by size
//! ([`Rotation`]) so a busy server cannot fill its disk.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Seek, SeekFrom, Write};
use std::mem;
use std::path::{Path, PathBuf};

use super::proto::GrpcLogEntry;
use super::sink::{Framing, Sink};

/// Entries are gathered in memory and written to the file in chunks of
/// about this size (and on every flush).
const WRITE_CHUNK: usize = 64 * 1024;

/// The buffer keeps at most this much capacity between writes, so one huge
/// entry does not pin its size.
const MAX_RETAINED_BUFFER: usize = 1 << 20;

/// Size-based rotation of a [`FileSink`]'s file.
///
/// The file at the sink's path is always the one being written. When the
/// next entry would take it past `max_file_bytes`, it is closed and renamed,
/// and a new, empty file takes its place, as logrotate and Python's
/// `RotatingFileHandler` name them. With `log.bin` and `max_files: 4`:
///
/// | File | Holds |
/// |---|---|
/// | `log.bin` | the newest entries, being written |
/// | `log.bin.1` | the entries before those |
/// | `log.bin.2` | older |
/// | `log.bin.3` | the oldest kept: deleted at the next rotation |
///
/// At a rotation `log.bin.3` is deleted, `log.bin.2` becomes `log.bin.3`,
/// `log.bin.1` becomes `log.bin.2` and `log.bin` becomes `log.bin.1`: never
/// more than `max_files` files, of at most `max_file_bytes` each (an entry
/// larger than that is written alone in a file of its own). A rotation
/// renames `max_files - 1` files. With `max_files` 1 (or 0), a rotation
/// empties the file. Files numbered `max_files` and above (left by a run
/// with a larger `max_files`) are not touched.
/// [`files_oldest_first`](Self::files_oldest_first) lists a log's files in
/// the order their entries were written.
///
/// ```
/// use std::path::Path;
///
/// use tonic_hotpath::binlog::Rotation;
///
/// assert_eq!(Rotation::rotated_path("/var/log/grpc.bin", 2), Path::new("/var/log/grpc.bin.2"));
///
/// let rotation = Rotation { max_file_bytes: 64 << 20, max_files: 4 };
/// // None of them exists yet.
/// assert!(rotation.files_oldest_first("/nonexistent/grpc.bin").is_empty());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rotation {
    /// The size a file may reach; the entry that would take it past this
    /// size starts a new file.
    pub max_file_bytes: u64,
    /// How many files are kept, the one being written included.
    pub max_files: usize,
}

impl Rotation {
    /// The path of the `n`th rotated file of the log at `path`: `path`
    /// with `.n` appended (`log.bin.1` is the newest rotated file).
    #[must_use]
    pub fn rotated_path(path: impl AsRef<Path>, n: usize) -> PathBuf {
        let mut name = OsString::from(path.as_ref().as_os_str());
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// The files of the log at `path` that exist, oldest first: the order
    /// in which their entries were written, ending with `path` itself.
    #[must_use]
    pub fn files_oldest_first(&self, path: impl AsRef<Path>) -> Vec<PathBuf> {
        let path = path.as_ref();
        (1..self.max_files)
            .rev()
            .map(|n| Self::rotated_path(path, n))
            .chain(std::iter::once(path.to_path_buf()))
            .filter(|file| file.is_file())
            .collect()
    }
}

/// A [`Sink`] that writes entries to a file, framed with a [`Framing`],
/// optionally rotated by size ([`Rotation`]).
///
/// Entries are gathered in memory and written to the file in chunks of
/// about 64 KiB, and on every [`flush`](Sink::flush) (the binary log's
/// writer flushes every second when something was written, and on
/// shutdown): after a flush the file holds whole entries only. Dropping
/// the sink writes what it holds. A write that fails is undone: the file is cut
/// back to the last whole entry before the next write, so an I/O error
/// (a full disk) loses entries but never leaves the file unreadable.
/// Flushing hands the bytes to the operating system; it does not `fsync`.
///
/// ```
/// use tonic_hotpath::binlog::proto::GrpcLogEntry;
/// use tonic_hotpath::binlog::{FileSink, Framing, Sink, read_log};
///
/// let dir = std::env::temp_dir().join(format!("binlog-doc-file-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("log.bin");
///
/// let mut sink = FileSink::create(&path, Framing::Grpc)?;
/// for call_id in 1..=3 {
///     sink.write(&GrpcLogEntry { call_id, ..GrpcLogEntry::default() })?;
/// }
/// sink.flush()?;
///
/// let entries = read_log(&path, Framing::Grpc)?;
/// let call_ids: Vec<u64> = entries.iter().map(|entry| entry.call_id).collect();
/// assert_eq!(call_ids, [1, 2, 3]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// Rotated, at most 3 files of at most 1 KiB each:
///
/// ```
/// use tonic_hotpath::binlog::proto::GrpcLogEntry;
/// use tonic_hotpath::binlog::{FileSink, Framing, Rotation, Sink, read_log};
///
/// let dir = std::env::temp_dir().join(format!("binlog-doc-rotation-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("log.bin");
///
/// let rotation = Rotation { max_file_bytes: 1024, max_files: 3 };
/// let mut sink = FileSink::create(&path, Framing::Varint)?.with_rotation(rotation);
/// for call_id in 1..=1000 {
///     sink.write(&GrpcLogEntry { call_id, ..GrpcLogEntry::default() })?;
/// }
/// drop(sink);
///
/// let files = rotation.files_oldest_first(&path);
/// assert_eq!(files.len(), 3);
/// let mut call_ids = Vec::new();
/// for file in &files {
///     assert!(std::fs::metadata(file)?.len() <= 1024);
///     call_ids.extend(read_log(file, Framing::Varint)?.iter().map(|entry| entry.call_id));
/// }
/// // The newest entries are kept, in the order they were written.
/// assert_eq!(call_ids.last(), Some(&1000));
/// assert!(call_ids.windows(2).all(|pair| pair[1] == pair[0] + 1));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct FileSink {
    path: PathBuf,
    framing: Framing,
    rotation: Option<Rotation>,
    /// `None` only after a rotation failed: the next write tries again.
    file: Option<File>,
    /// Bytes of whole entries in `file`.
    committed: u64,
    /// A failed write may have left part of an entry after `committed`.
    torn: bool,
    /// Framed entries not yet written to `file`.
    buffer: Vec<u8>,
}

impl FileSink {
    /// Creates the file at `path` (truncating it if it exists, as
    /// [`File::create`]) for entries framed with `framing`. Rotated files
    /// of an earlier run (`path.1`, …) are left as they are; with
    /// [`with_rotation`](Self::with_rotation) they shift along at the
    /// first rotation.
    pub fn create(path: impl AsRef<Path>, framing: Framing) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path)?;
        Ok(Self {
            path,
            framing,
            rotation: None,
            file: Some(file),
            committed: 0,
            torn: false,
            buffer: Vec::with_capacity(WRITE_CHUNK),
        })
    }

    /// Rotates the file by size, as [`Rotation`] describes.
    #[must_use]
    pub fn with_rotation(mut self, rotation: Rotation) -> Self {
        self.rotation = Some(rotation);
        self
    }

    /// The path of the file being written.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The framing of the entries.
    #[must_use]
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// The rotation, if the file is rotated.
    #[must_use]
    pub fn rotation(&self) -> Option<Rotation> {
        self.rotation
    }

    /// Writes `self.buffer[..len]` to the file and removes it from the
    /// buffer, written or not.
    fn write_out(&mut self, len: usize) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let buffer = mem::take(&mut self.buffer);
        let written = self.write_to_file(&buffer[..len]);
        self.buffer = buffer;
        self.buffer.drain(..len);
        if self.buffer.capacity() > MAX_RETAINED_BUFFER {
            self.buffer.shrink_to(WRITE_CHUNK);
        }
        written
    }

    fn write_to_file(&mut self, bytes: &[u8]) -> io::Result<()> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(open_next(&self.path, self.rotation)?),
        };
        if self.torn {
            cut_back(file, self.committed)?;
            self.torn = false;
        }
        match file.write_all(bytes) {
            Ok(()) => {
                self.committed += bytes.len() as u64;
                Ok(())
            }
            Err(error) => {
                self.torn = true;
                Err(error)
            }
        }
    }

    /// Takes the entry appended to the buffer at `start`: rotates the file
    /// first if the entry would take it past its size, and writes the
    /// buffer out once it holds a chunk.
    fn commit_entry(&mut self, start: usize) -> io::Result<()> {
        let framed_len = (self.buffer.len() - start) as u64;
        let file_len = self.committed + start as u64;
        if let Some(rotation) = self.rotation
            && file_len > 0
            && file_len + framed_len > rotation.max_file_bytes
            && let Err(error) = self.rotate(start)
        {
            // Reported as failed: not written later either.
            self.buffer.clear();
            return Err(error);
        }
        if self.buffer.len() >= WRITE_CHUNK {
            self.write_out(self.buffer.len())?;
        }
        Ok(())
    }

    /// Writes `self.buffer[..len]` to the current file, closes it, shifts
    /// the rotated files and opens a new one.
    fn rotate(&mut self, len: usize) -> io::Result<()> {
        let written = self.write_out(len);
        let mut cut = Ok(());
        if let Some(file) = &mut self.file
            && self.torn
        {
            cut = cut_back(file, self.committed);
        }
        self.file = None;
        self.committed = 0;
        self.torn = false;
        self.file = Some(open_next(&self.path, self.rotation)?);
        written.and(cut)
    }
}

impl Sink for FileSink {
    fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
        let start = self.buffer.len();
        self.framing.encode_into(entry, &mut self.buffer)?;
        self.commit_entry(start)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out(self.buffer.len())
    }

    /// Entries come framed in the file's framing, encoded on the RPCs'
    /// threads.
    fn framing(&self) -> Option<Framing> {
        Some(self.framing)
    }

    /// Without rotation, a buffer of a chunk or more goes to the file
    /// with one `write_all` (after what the sink holds); with rotation,
    /// entry by entry, rotating between two entries as
    /// [`write`](Sink::write) does. Bytes that are not whole entries in
    /// the file's framing are an
    /// [`InvalidData`](io::ErrorKind::InvalidData) error, and nothing of
    /// them is written.
    fn write_framed(&mut self, entries: &[u8]) -> io::Result<()> {
        let mut lens = Vec::new();
        let mut rest = entries;
        while !rest.is_empty() {
            let len = self.framing.first_entry_len(rest).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("not whole entries in the {:?} framing", self.framing),
                )
            })?;
            if self.rotation.is_some() {
                lens.push(len);
            }
            rest = &rest[len..];
        }
        if self.rotation.is_none() {
            if self.buffer.len() + entries.len() < WRITE_CHUNK {
                self.buffer.extend_from_slice(entries);
                return Ok(());
            }
            self.write_out(self.buffer.len())?;
            return self.write_to_file(entries);
        }
        let mut result = Ok(());
        let mut rest = entries;
        for len in lens {
            let (entry, after) = rest.split_at(len);
            let start = self.buffer.len();
            self.buffer.extend_from_slice(entry);
            if let Err(error) = self.commit_entry(start) {
                result = result.and(Err(error));
            }
            rest = after;
        }
        result
    }
}

impl Drop for FileSink {
    fn drop(&mut self) {
        // Errors have nowhere to go: a caller that wants them flushes first.
        let _ = self.write_out(self.buffer.len());
        if let Some(file) = &mut self.file
            && self.torn
        {
            let _ = cut_back(file, self.committed);
        }
    }
}

impl fmt::Debug for FileSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSink")
            .field("path", &self.path)
            .field("framing", &self.framing)
            .field("rotation", &self.rotation)
            .field("file_len", &(self.committed + self.buffer.len() as u64))
            .finish_non_exhaustive()
    }
}

/// Cuts `file` back to `len` bytes (the last whole entry) and writes on
/// from there.
fn cut_back(file: &mut File, len: u64) -> io::Result<()> {
    file.set_len(len)?;
    file.seek(SeekFrom::Start(len))?;
    Ok(())
}

/// Opens the file at `path` for a new run of entries: with rotation, an
/// existing file there is shifted to `path.1` first (and the older ones
/// along); the file is created empty.
fn open_next(path: &Path, rotation: Option<Rotation>) -> io::Result<File> {
    if let Some(rotation) = rotation
        && path.try_exists()?
    {
        shift_rotated_files(path, rotation.max_files)?;
    }
    File::create(path)
}

/// Deletes the oldest kept file and renames the others one number up:
/// `path.{max_files-2}` to `path.{max_files-1}`, …, `path` to `path.1`.
fn shift_rotated_files(path: &Path, max_files: usize) -> io::Result<()> {
    if max_files <= 1 {
        // No rotated files: `File::create` empties the one file.
        return Ok(());
    }
    ignore_not_found(fs::remove_file(Rotation::rotated_path(path, max_files - 1)))?;
    for n in (1..max_files - 1).rev() {
        ignore_not_found(fs::rename(
            Rotation::rotated_path(path, n),
            Rotation::rotated_path(path, n + 1),
        ))?;
    }
    ignore_not_found(fs::rename(path, Rotation::rotated_path(path, 1)))
}

fn ignore_not_found(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}
