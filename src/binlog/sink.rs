//! [`Sink`]: where log entries go, and [`Framing`]: how entries are laid
//! out one after another in a byte stream.

use std::cell::Cell;
use std::io::{self, Write};

use prost::Message as _;

use super::proto::GrpcLogEntry;
use super::reader::LogReader;

/// Where binary log entries go: a file ([`FileSink`](super::FileSink)), or
/// the application's own destination (a channel, a socket, a log service).
///
/// A sink runs on the binary log's writer thread, never on an RPC's path:
/// RPCs encode their entries on their own threads, and the writer hands
/// them to the sink. The sink may block (on a disk, a socket) without
/// slowing any RPC; while it blocks, new entries wait in bounded buffers,
/// and entries that find them full are dropped and counted. An error from
/// the sink is counted and reported; the writer keeps calling the sink
/// with the entries that follow.
///
/// A sink takes entries in one of two ways:
///
/// - One by one, decoded ([`write`](Self::write)): the default, for a
///   sink that looks into entries (a channel to the application, a log
///   service). The writer decodes each entry for it.
/// - Whole buffers of framed entries ([`write_framed`](Self::write_framed)),
///   when [`framing`](Self::framing) names a framing: the entries are
///   encoded in that framing on the RPCs' threads, and the writer hands
///   the sink each buffer as it is, decoding nothing. A file or a socket
///   wants this ([`FileSink`](super::FileSink) does): it is what lets one
///   writer thread keep up with many RPC threads.
///
/// [`flush`](Self::flush) is called every flush interval when something was
/// written since the last flush, and on shutdown; a sink that buffers
/// hands its buffered entries on there. The default does nothing.
///
/// A sink that sends each entry into a channel, for a consumer of the
/// application's own:
///
/// ```
/// use std::io;
/// use std::sync::mpsc;
///
/// use tonic_hotpath::binlog::Sink;
/// use tonic_hotpath::binlog::proto::GrpcLogEntry;
///
/// /// Sends every entry to the receiving end of a channel.
/// struct ChannelSink(mpsc::Sender<GrpcLogEntry>);
///
/// impl Sink for ChannelSink {
///     fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
///         self.0
///             .send(entry.clone())
///             .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "receiver gone"))
///     }
/// }
///
/// let (sender, receiver) = mpsc::channel();
/// let mut sink: Box<dyn Sink> = Box::new(ChannelSink(sender));
/// let entry = GrpcLogEntry { call_id: 7, ..GrpcLogEntry::default() };
/// sink.write(&entry)?;
/// sink.flush()?;
/// assert_eq!(receiver.recv().unwrap().call_id, 7);
///
/// drop(receiver);
/// assert_eq!(sink.write(&entry).unwrap_err().kind(), io::ErrorKind::BrokenPipe);
/// # Ok::<(), io::Error>(())
/// ```
pub trait Sink: Send + 'static {
    /// Writes one entry. An error fails this entry only: the next entry is
    /// written with another call.
    fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()>;

    /// Hands on whatever the sink buffers. The default does nothing.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// The framing in which the sink takes whole buffers of entries
    /// through [`write_framed`](Self::write_framed), or `None` (the
    /// default) for entries one by one through [`write`](Self::write).
    /// Asked once, when the log is built.
    fn framing(&self) -> Option<Framing> {
        None
    }

    /// Writes `entries`: one or more whole entries, each framed with
    /// [`framing`](Self::framing)'s framing, in the order they were
    /// logged. Called instead of `write` when `framing` is `Some`. An
    /// error fails every entry of the buffer (each is counted in
    /// [`LogCounts::failed`](super::LogCounts::failed)).
    ///
    /// The default reads the entries back and writes each with
    /// [`write`](Self::write), stopping at the first error.
    fn write_framed(&mut self, entries: &[u8]) -> io::Result<()> {
        let framing = self.framing().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "write_framed called on a sink that names no framing",
            )
        })?;
        let reader =
            LogReader::new(io::Cursor::new(entries), framing).with_max_entry_len(usize::MAX);
        for entry in reader {
            self.write(&entry?)?;
        }
        Ok(())
    }
}

impl Sink for Box<dyn Sink> {
    fn write(&mut self, entry: &GrpcLogEntry) -> io::Result<()> {
        (**self).write(entry)
    }

    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }

    fn framing(&self) -> Option<Framing> {
        (**self).framing()
    }

    fn write_framed(&mut self, entries: &[u8]) -> io::Result<()> {
        (**self).write_framed(entries)
    }
}

/// How entries follow one another in a log file: each entry is its length,
/// then the entry's protobuf encoding.
///
/// Both gRPC implementations that write binary logs to files are covered:
///
/// | Framing | Length prefix | Written by |
/// |---|---|---|
/// | [`Grpc`](Self::Grpc) | 4 bytes, big-endian `u32` | grpc-go (`binarylog.NewTempFileSink`, `NewBufferedSink`) |
/// | [`Varint`](Self::Varint) | protobuf varint, 1 to 10 bytes | grpc-java (`GrpcLogEntry.writeDelimitedTo`), protobuf's `parseDelimitedFrom` |
///
/// ```
/// use prost::Message as _;
/// use tonic_hotpath::binlog::Framing;
/// use tonic_hotpath::binlog::proto::GrpcLogEntry;
///
/// let entry = GrpcLogEntry { call_id: 1, sequence_id_within_call: 2, ..GrpcLogEntry::default() };
/// let encoded = entry.encode_to_vec();
///
/// let mut grpc = Vec::new();
/// Framing::Grpc.write_entry(&entry, &mut grpc)?;
/// assert_eq!(grpc[..4], (encoded.len() as u32).to_be_bytes());
/// assert_eq!(grpc[4..], encoded[..]);
///
/// let mut varint = Vec::new();
/// Framing::Varint.write_entry(&entry, &mut varint)?;
/// assert_eq!(varint, entry.encode_length_delimited_to_vec());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// grpc-go's framing: a 4-byte big-endian length, then the entry. An
    /// entry of 4 GiB or more cannot be framed.
    Grpc,
    /// grpc-java's framing (protobuf's `writeDelimitedTo`): the length as a
    /// protobuf varint, then the entry.
    Varint,
}

/// The scratch buffer of [`Framing::write_entry`] keeps at most this much
/// capacity between entries, so one huge entry does not pin its size.
const MAX_RETAINED_SCRATCH: usize = 1 << 20;

thread_local! {
    /// [`Framing::write_entry`]'s encoding buffer, reused by each thread.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Framing {
    /// The length of the prefix this framing puts before an entry whose
    /// encoding is `entry_len` bytes.
    #[must_use]
    pub fn prefix_len(self, entry_len: usize) -> usize {
        match self {
            Self::Grpc => 4,
            Self::Varint => prost::length_delimiter_len(entry_len),
        }
    }

    /// The length, prefix included, of the framed entry that `bytes`
    /// starts with; `None` unless `bytes` holds a whole one.
    pub(crate) fn first_entry_len(self, bytes: &[u8]) -> Option<usize> {
        let (prefix_len, entry_len) = match self {
            Self::Grpc => {
                let prefix: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
                (4, usize::try_from(u32::from_be_bytes(prefix)).ok()?)
            }
            Self::Varint => {
                let mut rest = bytes;
                let entry_len = prost::encoding::decode_varint(&mut rest).ok()?;
                (bytes.len() - rest.len(), usize::try_from(entry_len).ok()?)
            }
        };
        let framed_len = prefix_len.checked_add(entry_len)?;
        (framed_len <= bytes.len()).then_some(framed_len)
    }

    /// Appends the prefix of an entry whose encoding is `entry_len` bytes
    /// to `buf`. With [`Grpc`](Self::Grpc) framing an entry of 4 GiB or
    /// more is an [`InvalidInput`](io::ErrorKind::InvalidInput) error, and
    /// nothing is appended.
    pub(crate) fn write_prefix(self, entry_len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Self::Grpc => {
                let prefix = u32::try_from(entry_len).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "binary log entry of {entry_len} bytes is too long for the gRPC \
                             framing's 4-byte length"
                        ),
                    )
                })?;
                buf.extend_from_slice(&prefix.to_be_bytes());
            }
            Self::Varint => prost::encoding::encode_varint(entry_len as u64, buf),
        }
        Ok(())
    }

    /// The number of bytes `entry` takes framed: prefix and encoding.
    #[must_use]
    pub fn framed_len(self, entry: &GrpcLogEntry) -> usize {
        let entry_len = entry.encoded_len();
        self.prefix_len(entry_len) + entry_len
    }

    /// Appends `entry`, framed, to `buf` and returns the number of bytes
    /// appended. With [`Grpc`](Self::Grpc) framing an entry of 4 GiB or
    /// more is an [`InvalidInput`](io::ErrorKind::InvalidInput) error, and
    /// nothing is appended.
    ///
    /// The entry is encoded straight into `buf`: a caller that reuses `buf`
    /// encodes without allocating.
    pub fn encode_into(self, entry: &GrpcLogEntry, buf: &mut Vec<u8>) -> io::Result<usize> {
        let entry_len = entry.encoded_len();
        let framed_len = self.prefix_len(entry_len) + entry_len;
        let start = buf.len();
        buf.reserve(framed_len);
        self.write_prefix(entry_len, buf)?;
        // A Vec takes any length: this fails only if `entry` changed its
        // length between the two calls, which a `&GrpcLogEntry` cannot.
        if let Err(error) = entry.encode(buf) {
            buf.truncate(start);
            return Err(io::Error::other(error));
        }
        Ok(framed_len)
    }

    /// Writes `entry`, framed, to `out` and returns the number of bytes
    /// written (see [`encode_into`](Self::encode_into) for the errors).
    ///
    /// The entry is encoded into a buffer this thread reuses, then written
    /// with one `write_all`: no allocation per entry once the buffer has
    /// grown to the entries' size. `out` should be buffered when entries
    /// are small (a [`FileSink`](super::FileSink) is).
    pub fn write_entry(self, entry: &GrpcLogEntry, out: &mut impl Write) -> io::Result<usize> {
        // Taken out of the thread-local for the call: a writer that logs
        // from inside `write_all` gets an empty buffer of its own.
        let mut scratch = SCRATCH.take();
        scratch.clear();
        let written = self
            .encode_into(entry, &mut scratch)
            .and_then(|len| out.write_all(&scratch).map(|()| len));
        if scratch.capacity() <= MAX_RETAINED_SCRATCH {
            SCRATCH.set(scratch);
        }
        written
    }
}
