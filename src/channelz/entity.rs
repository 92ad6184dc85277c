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
    /// The trace's events: set at creation (see [`CallEntity::channel`]).
    events: Vec<proto::ChannelTraceEvent>,
}

/// A trace event at `unix_nanos`, severity info, as grpc-go logs them.
fn info_event(
    description: String,
    unix_nanos: i64,
    child: Option<proto::channel_trace_event::ChildRef>,
) -> proto::ChannelTraceEvent {
    proto::ChannelTraceEvent {
        description,
        severity: proto::channel_trace_event::Severity::CtInfo as i32,
        timestamp: clock::timestamp(unix_nanos),
        child_ref: child,
    }
}

impl CallEntity {
    /// A server (no trace events: grpc-go's servers have no trace).
    pub(crate) fn new(id: i64, name: String) -> Self {
        Self {
            id,
            name,
            created: clock::now(),
            calls: CallCounters::new(),
            events: Vec::new(),
        }
    }

    /// A top channel for `target` and its one subchannel, with the
    /// creation events grpc-go logs in their traces ("Channel created for
    /// target ...", "Subchannel(id:N) created" with the child's reference;
    /// "Subchannel created").
    pub(crate) fn channel(channel_id: i64, subchannel_id: i64, target: &str) -> (Self, Self) {
        let created = clock::now();
        let child = proto::channel_trace_event::ChildRef::SubchannelRef(proto::SubchannelRef {
            subchannel_id,
            name: String::new(),
        });
        let channel = Self {
            id: channel_id,
            name: target.to_owned(),
            created,
            calls: CallCounters::new(),
            events: vec![
                info_event(
                    format!("Channel created for target {target:?}"),
                    created,
                    None,
                ),
                info_event(
                    format!("Subchannel(id:{subchannel_id}) created"),
                    created,
                    Some(child),
                ),
            ],
        };
        let subchannel = Self {
            id: subchannel_id,
            name: target.to_owned(),
            created,
            calls: CallCounters::new(),
            events: vec![info_event("Subchannel created".to_owned(), created, None)],
        };
        (channel, subchannel)
    }

    /// The trace channelz shows: the creation time and events. Nothing is
    /// logged after creation (tonic reports no connectivity or
    /// name-resolution changes to a layer).
    fn trace(&self) -> proto::ChannelTrace {
        proto::ChannelTrace {
            num_events_logged: self.events.len() as i64,
            creation_timestamp: clock::timestamp(self.created),
            events: self.events.clone(),
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
