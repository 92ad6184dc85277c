//! [`LogReader`]: the entries of a binary log file, one by one, with
//! bounded memory whatever the file holds; [`read_log`]: all of a file's.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use prost::Message as _;

use super::proto::GrpcLogEntry;
use super::sink::Framing;

/// Moved to [`LogReader::DEFAULT_MAX_ENTRY_LEN`].
#[deprecated(note = "use `LogReader::DEFAULT_MAX_ENTRY_LEN`")]
pub const DEFAULT_MAX_ENTRY_LEN: usize = LogReader::DEFAULT_MAX_ENTRY_LEN;

/// The entry buffer grows by at most this much before the bytes to fill it
/// have been read (then doubles with what was read).
const MIN_GROWTH: usize = 8 * 1024;

/// The buffer keeps at most this much capacity between entries.
const MAX_RETAINED_BUFFER: usize = 1 << 20;

/// Reads the entries of a binary log, framed with a [`Framing`], one at a
/// time: an [`Iterator`] of `io::Result<GrpcLogEntry>`.
///
/// The end of the input at an entry boundary ends the iteration. Anything
/// else that is not a sequence of whole entries is an
/// [`InvalidData`](io::ErrorKind::InvalidData) error naming the entry's
/// byte offset: an input that ends inside a length prefix or an entry, a
/// varint longer than 10 bytes, a declared length above the maximum
/// ([`with_max_entry_len`](Self::with_max_entry_len)), an entry that does
/// not decode. An error ends the iteration: the entries after it cannot be
/// found.
///
/// Memory stays bounded by what the input holds: a declared length is
/// checked against the maximum before anything is read, and the buffer
/// grows with the bytes actually read, so a file that declares a 60 MiB
/// entry and holds 10 bytes costs kilobytes, not 60 MiB.
///
/// Reads are small (a length prefix, then an entry): give it a
/// [`BufReader`] over a file, as [`read_log`] does (and as the type's
/// default `R` says).
///
/// ```
/// use std::io::Cursor;
///
/// use tonic_hotpath::binlog::proto::GrpcLogEntry;
/// use tonic_hotpath::binlog::{Framing, LogReader};
///
/// let mut log = Vec::new();
/// for call_id in 1..=2 {
///     Framing::Grpc.write_entry(&GrpcLogEntry { call_id, ..GrpcLogEntry::default() }, &mut log)?;
/// }
///
/// let mut reader = LogReader::new(Cursor::new(&log), Framing::Grpc);
/// assert_eq!(reader.next().transpose()?.map(|entry| entry.call_id), Some(1));
/// assert_eq!(reader.next().transpose()?.map(|entry| entry.call_id), Some(2));
/// assert!(reader.next().is_none());
///
/// // Cut short inside the second entry: the first reads, then an error.
/// let cut = &log[..log.len() - 1];
/// let entries: Vec<_> = LogReader::new(Cursor::new(cut), Framing::Grpc).collect();
/// assert_eq!(entries.len(), 2);
/// assert!(entries[0].is_ok());
/// assert_eq!(entries[1].as_ref().unwrap_err().kind(), std::io::ErrorKind::InvalidData);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct LogReader<R = BufReader<File>> {
    reader: R,
    framing: Framing,
    max_entry_len: usize,
    /// The entry being read; reused.
    buffer: Vec<u8>,
    /// Bytes of whole entries read so far.
    offset: u64,
    /// The input ended or an error was returned.
    finished: bool,
}

impl LogReader {
    /// The longest entry a reader accepts unless told otherwise
    /// ([`with_max_entry_len`](Self::with_max_entry_len)): 64 MiB.
    ///
    /// ```
    /// assert_eq!(tonic_hotpath::binlog::LogReader::DEFAULT_MAX_ENTRY_LEN, 64 << 20);
    /// ```
    pub const DEFAULT_MAX_ENTRY_LEN: usize = 64 << 20;
}

impl<R: Read> LogReader<R> {
    /// Reads entries framed with `framing` from `reader`, accepting
    /// entries up to [`LogReader::DEFAULT_MAX_ENTRY_LEN`].
    pub fn new(reader: R, framing: Framing) -> Self {
        Self {
            reader,
            framing,
            max_entry_len: LogReader::DEFAULT_MAX_ENTRY_LEN,
            buffer: Vec::new(),
            offset: 0,
            finished: false,
        }
    }

    /// Accepts entries up to `max_entry_len` bytes (encoded, prefix not
    /// counted); a longer declared length is an error.
    #[must_use]
    pub fn with_max_entry_len(mut self, max_entry_len: usize) -> Self {
        self.max_entry_len = max_entry_len;
        self
    }

    /// The number of bytes of whole entries read so far: where the next
    /// entry starts.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The reader, positioned after the last byte read.
    pub fn into_inner(self) -> R {
        self.reader
    }

    /// The next entry, `None` at the end of the input.
    fn read_entry(&mut self) -> io::Result<Option<GrpcLogEntry>> {
        let Some((prefix_len, entry_len)) = self.read_prefix()? else {
            return Ok(None);
        };
        let entry_len = usize::try_from(entry_len)
            .ok()
            .filter(|&len| len <= self.max_entry_len)
            .ok_or_else(|| {
                self.corrupt(format_args!(
                    "declares {entry_len} bytes, more than the maximum of {}",
                    self.max_entry_len
                ))
            })?;
        self.read_body(entry_len)?;
        let entry = GrpcLogEntry::decode(self.buffer.as_slice())
            .map_err(|error| self.corrupt(format_args!("does not decode: {error}")))?;
        if self.buffer.capacity() > MAX_RETAINED_BUFFER {
            self.buffer = Vec::new();
        }
        self.offset += (prefix_len + entry_len) as u64;
        Ok(Some(entry))
    }

    /// The length prefix: its own length and the entry length it declares;
    /// `None` at the end of the input.
    fn read_prefix(&mut self) -> io::Result<Option<(usize, u64)>> {
        match self.framing {
            Framing::Grpc => {
                let mut prefix = [0; 4];
                match read_up_to(&mut self.reader, &mut prefix)? {
                    0 => Ok(None),
                    4 => Ok(Some((4, u32::from_be_bytes(prefix).into()))),
                    read => {
                        Err(self
                            .corrupt(format_args!("ends after {read} bytes of its 4-byte length")))
                    }
                }
            }
            Framing::Varint => {
                let mut value = 0_u64;
                for index in 0..10 {
                    let mut byte = [0];
                    if read_up_to(&mut self.reader, &mut byte)? == 0 {
                        return if index == 0 {
                            Ok(None)
                        } else {
                            Err(self.corrupt(format_args!("ends inside its varint length")))
                        };
                    }
                    let [byte] = byte;
                    // The 10th byte holds bit 63 only.
                    if index == 9 && byte > 1 {
                        break;
                    }
                    value |= u64::from(byte & 0x7f) << (7 * index);
                    if byte & 0x80 == 0 {
                        return Ok(Some((index + 1, value)));
                    }
                }
                Err(self.corrupt(format_args!("has an invalid varint length")))
            }
        }
    }

    /// Reads `len` bytes into the buffer, growing it only with the bytes
    /// actually read.
    fn read_body(&mut self, len: usize) -> io::Result<()> {
        self.buffer.clear();
        while self.buffer.len() < len {
            let start = self.buffer.len();
            let want = (len - start).min(start.max(MIN_GROWTH));
            self.buffer.resize(start + want, 0);
            let read = read_up_to(&mut self.reader, &mut self.buffer[start..])?;
            if read < want {
                let read = start + read;
                return Err(
                    self.corrupt(format_args!("declares {len} bytes and ends after {read}"))
                );
            }
        }
        Ok(())
    }

    /// An `InvalidData` error about the entry at the current offset.
    fn corrupt(&self, what: fmt::Arguments<'_>) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "binary log entry at byte {} ({:?} framing) {what}",
                self.offset, self.framing
            ),
        )
    }
}

impl<R: Read> Iterator for LogReader<R> {
    type Item = io::Result<GrpcLogEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let next = self.read_entry().transpose();
        if !matches!(next, Some(Ok(_))) {
            self.finished = true;
        }
        next
    }
}

impl<R> fmt::Debug for LogReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogReader")
            .field("framing", &self.framing)
            .field("max_entry_len", &self.max_entry_len)
            .field("offset", &self.offset)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

/// Reads every entry of the log file at `path`, framed with `framing`
/// (see [`LogReader`] for the errors). For a rotated log, read each of
/// [`Rotation::files_oldest_first`](super::Rotation::files_oldest_first).
///
/// ```
/// use tonic_hotpath::binlog::proto::{GrpcLogEntry, Message, grpc_log_entry::Payload};
/// use tonic_hotpath::binlog::{FileSink, Framing, Sink, read_log};
///
/// let path = std::env::temp_dir().join(format!("binlog-doc-read-{}.bin", std::process::id()));
/// let entry = GrpcLogEntry {
///     call_id: 1,
///     payload: Some(Payload::Message(Message { length: 5, data: "hello".into() })),
///     ..GrpcLogEntry::default()
/// };
/// let mut sink = FileSink::create(&path, Framing::Grpc)?;
/// sink.write(&entry)?;
/// drop(sink);
///
/// assert_eq!(read_log(&path, Framing::Grpc)?, [entry]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_log(path: impl AsRef<Path>, framing: Framing) -> io::Result<Vec<GrpcLogEntry>> {
    let file = File::open(path)?;
    LogReader::new(BufReader::new(file), framing).collect()
}

/// Reads into `buf` until it is full or the input ends; returns the number
/// of bytes read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}
