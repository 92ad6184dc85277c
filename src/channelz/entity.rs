//! Channelz servers, channels and subchannels: the entities that count
//! calls. Their children (sockets, subchannels) are kept by the registry.

use super::calls::{CallCounters, CallCounts};
use super::clock;
use super::proto;

/// The part every call-counting entity has.
#[derive(Debug)]
pub(crate) struct CallEntity {
    pub(crate) id: i64,
    /// The server's name, or the channel's or subchannel's target.
    pub(crate) name: String,
    /// Unix nanoseconds.
    pub(crate) created: i64,
    pub(crate) calls: CallCounters,
}

impl CallEntity {
    pub(crate) fn new(id: i64, name: String) -> Self {
        Self {
            id,
            name,
            created: clock::now(),
            calls: CallCounters::new(),
        }
    }

    /// The trace channelz shows: its creation time. No events are logged
    /// (tonic reports no connectivity or name-resolution changes).
    fn trace(&self) -> proto::ChannelTrace {
        proto::ChannelTrace {
            num_events_logged: 0,
            creation_timestamp: clock::timestamp(self.created),
            events: Vec::new(),
        }
    }

    /// The server's data now. No trace: grpc-go's servers have none.
    pub(crate) fn server_data(&self) -> proto::ServerData {
        let CallCounts {
            started,
            succeeded,
            failed,
            last_started,
        } = self.calls.read();
        proto::ServerData {
            trace: None,
            calls_started: started,
            calls_succeeded: succeeded,
            calls_failed: failed,
            last_call_started_timestamp: clock::timestamp(last_started),
        }
    }

    /// The channel's or subchannel's data now. The connectivity state is
    /// left unset: tonic does not expose it.
    pub(crate) fn channel_data(&self) -> proto::ChannelData {
        let CallCounts {
            started,
            succeeded,
            failed,
            last_started,
        } = self.calls.read();
        proto::ChannelData {
            state: None,
            target: self.name.clone(),
            trace: Some(self.trace()),
            calls_started: started,
            calls_succeeded: succeeded,
            calls_failed: failed,
            last_call_started_timestamp: clock::timestamp(last_started),
            max_connections_per_subchannel: 0,
        }
    }
}
