//! The text the backend and the gateway put in the echo message field: one
//! `tag<TAB>field...` line per fact, so every hop's view travels back to the
//! client and can be checked there.

use std::fmt::{self, Write as _};

/// An arena's figures, as the backend saw them after assembling a reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArenaFigures {
    /// Bytes handed out for this reply.
    pub len: usize,
    /// Sum of the arena's buffer sizes.
    pub cap: usize,
    /// High-water mark over the arena's life.
    pub peak: usize,
    /// Number of buffers.
    pub buffers: usize,
}

/// What one backend call answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardReply {
    /// The shard the backend was asked for (its `x-shard`).
    pub shard: String,
    /// The org id the backend's `RequireOrgIdLayer` validated.
    pub org_id: String,
    /// The `x-` metadata exactly as the backend received it, in order.
    pub metadata: Vec<(String, String)>,
    /// The records the backend assembled.
    pub records: Vec<String>,
    /// The backend arena's figures for this reply.
    pub arena: ArenaFigures,
}

/// What the gateway answered: its own view plus each shard's reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatewayReply {
    /// The org id the gateway's handler extracted.
    pub org_id: String,
    /// The request id the gateway propagated.
    pub request_id: String,
    /// The shard replies, in shard order.
    pub shards: Vec<ShardReply>,
}

/// Writes the head of a shard reply (everything but the records and the
/// arena line, which the backend writes as it assembles them).
pub fn write_shard_head(
    out: &mut impl fmt::Write,
    shard: &str,
    org_id: &str,
    metadata: &[(String, String)],
) -> fmt::Result {
    writeln!(out, "shard\t{shard}")?;
    writeln!(out, "org\t{org_id}")?;
    for (key, value) in metadata {
        writeln!(out, "md\t{key}\t{value}")?;
    }
    Ok(())
}

/// Writes one record line.
pub fn write_record(out: &mut impl fmt::Write, record: fmt::Arguments<'_>) -> fmt::Result {
    writeln!(out, "rec\t{record}")
}

/// Writes the arena line.
pub fn write_arena(out: &mut impl fmt::Write, a: ArenaFigures) -> fmt::Result {
    writeln!(
        out,
        "arena\t{}\t{}\t{}\t{}",
        a.len, a.cap, a.peak, a.buffers
    )
}

/// Builds the gateway's merged reply from the shard replies' texts.
pub fn gateway_reply(org_id: &str, request_id: &str, shard_texts: &[String]) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = writeln!(out, "gateway-org\t{org_id}");
    let _ = writeln!(out, "request-id\t{request_id}");
    for text in shard_texts {
        out.push_str(text);
    }
    out
}

fn number(field: &str, line: &str) -> Result<usize, String> {
    field
        .parse()
        .map_err(|_| format!("bad number '{field}' in line '{line}'"))
}

/// Parses the gateway's reply.
pub fn parse_gateway_reply(text: &str) -> Result<GatewayReply, String> {
    let mut reply = GatewayReply::default();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let shard = reply.shards.last_mut();
        match (fields.as_slice(), shard) {
            (["gateway-org", org], _) => reply.org_id = (*org).to_owned(),
            (["request-id", id], _) => reply.request_id = (*id).to_owned(),
            (["shard", shard], _) => reply.shards.push(ShardReply {
                shard: (*shard).to_owned(),
                ..ShardReply::default()
            }),
            (["org", org], Some(shard)) => shard.org_id = (*org).to_owned(),
            (["md", key, value], Some(shard)) => {
                shard
                    .metadata
                    .push(((*key).to_owned(), (*value).to_owned()));
            }
            (["rec", record], Some(shard)) => shard.records.push((*record).to_owned()),
            (["arena", len, cap, peak, buffers], Some(shard)) => {
                shard.arena = ArenaFigures {
                    len: number(len, line)?,
                    cap: number(cap, line)?,
                    peak: number(peak, line)?,
                    buffers: number(buffers, line)?,
                };
            }
            _ => return Err(format!("unexpected line in gateway reply: '{line}'")),
        }
    }
    Ok(reply)
}
