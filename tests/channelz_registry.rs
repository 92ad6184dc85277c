//! channelz ids, pagination and removal under churn, over real servers and
//! clients on 127.0.0.1. One test in its own process, so that it owns the
//! process's registry and can assert whole listings.

use support::channelz::*;
use tonic::Code;
use tonic::transport::{Channel, Server};
use tonic_hotpath::channelz::proto::channelz_client::ChannelzClient;
use tonic_hotpath::channelz::{ChannelEntry, ServerEntry, proto};

use support::EchoRequest;

/// Every page of `GetServers` from `start`, `max` at a time: (ids of each
/// page, end of each page).
async fn server_pages(
    channelz: &mut ChannelzClient<Channel>,
    start: i64,
    max: i64,
) -> Vec<(Vec<i64>, bool)> {
    let mut pages = Vec::new();
    let mut start = start;
    loop {
        let reply = channelz
            .get_servers(proto::GetServersRequest {
                start_server_id: start,
                max_results: max,
            })
            .await
            .expect("GetServers")
            .into_inner();
        let ids: Vec<i64> = reply
            .server
            .iter()
            .map(|server| server.r#ref.as_ref().unwrap().server_id)
            .collect();
        start = ids.last().map_or(start, |last| last + 1);
        let end = reply.end;
        pages.push((ids, end));
        if end {
            return pages;
        }
    }
}

async fn top_channel_ids(channelz: &mut ChannelzClient<Channel>) -> Vec<i64> {
    let reply = channelz
        .get_top_channels(proto::GetTopChannelsRequest {
            start_channel_id: 0,
            max_results: 0,
        })
        .await
        .expect("GetTopChannels")
        .into_inner();
    assert!(reply.end);
    reply
        .channel
        .iter()
        .map(|channel| channel.r#ref.as_ref().unwrap().channel_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_pages_and_churn() {
    let admin = spawn_admin().await;
    let mut channelz = channelz_client(admin).await;

    // Ids: increasing in creation order, across kinds.
    let servers: Vec<ServerEntry> = (0..5)
        .map(|n| ServerEntry::named(format!("s{n}")))
        .collect();
    let ids: Vec<i64> = servers.iter().map(ServerEntry::id).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");

    // Pages of 2: [s0 s1] [s2 s3] [s4], only the last one the end.
    let pages = server_pages(&mut channelz, 0, 2).await;
    assert_eq!(
        pages,
        vec![
            (ids[0..2].to_vec(), false),
            (ids[2..4].to_vec(), false),
            (ids[4..5].to_vec(), true)
        ]
    );
    // A page exactly full with nothing after it is the end (grpc-go).
    assert_eq!(
        server_pages(&mut channelz, ids[3], 2).await,
        vec![(ids[3..5].to_vec(), true)]
    );
    // From an id between two servers: the next one on.
    assert_eq!(
        server_pages(&mut channelz, ids[1] + 1, 0).await,
        vec![(ids[2..5].to_vec(), true)]
    );
    // max_results 0: grpc-go's page of 50.
    let many: Vec<ServerEntry> = (0..60).map(|_| ServerEntry::new()).collect();
    let pages = server_pages(&mut channelz, 0, 0).await;
    assert_eq!(
        pages.iter().map(|(ids, _)| ids.len()).collect::<Vec<_>>(),
        vec![50, 15]
    );
    drop(many);

    // A dropped server without connections leaves at once; its id is not
    // reused.
    let dropped = ids[2];
    drop(servers);
    let status = channelz
        .get_server(proto::GetServerRequest { server_id: dropped })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    let newer = ServerEntry::new();
    assert!(newer.id() > ids[4] + 60);
    assert_eq!(
        server_pages(&mut channelz, 0, 0).await,
        vec![(vec![newer.id()], true)]
    );
    drop(newer);

    // Channels: a top channel per handler, leaving when it is dropped.
    let channels: Vec<ChannelEntry> = (0..3)
        .map(|n| ChannelEntry::new(format!("dns:///c{n}")))
        .collect();
    let channel_ids: Vec<i64> = channels.iter().map(ChannelEntry::id).collect();
    assert_eq!(top_channel_ids(&mut channelz).await, channel_ids);
    drop(channels);
    assert!(top_channel_ids(&mut channelz).await.is_empty());

    // Churn: 2 000 connections, each with its own channel handler, opened,
    // used once and closed, 50 at a time. Afterwards nothing of them is
    // left: no socket under the server, no top channel.
    let server = spawn_server(Server::builder(), ServerEntry::new()).await;
    let mut first_subchannel = None;
    for _batch in 0..40 {
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let addr = server.addr;
            calls.spawn(async move {
                let (mut echo, _, sub) = channel_client(support::endpoint(addr)).await;
                echo.unary_echo(EchoRequest {
                    message: "churn".to_owned(),
                })
                .await
                .expect("call");
                sub
            });
        }
        let subs = calls.join_all().await;
        if first_subchannel.is_none() {
            first_subchannel = Some(subs[0]);
        }
    }
    let want = (2_000, 2_000, 0);
    let got = eventually(&want, || {
        let mut channelz = channelz.clone();
        async move { server_calls(&fetch_server(&mut channelz, server.id).await) }
    })
    .await;
    assert_eq!(got, want);
    let left = eventually(&0, || {
        let mut channelz = channelz.clone();
        async move { server_sockets(&mut channelz, server.id, 0).await.len() }
    })
    .await;
    assert_eq!(left, 0, "every closed connection's socket left");
    assert!(
        top_channel_ids(&mut channelz).await.is_empty(),
        "every dropped channel left"
    );
    let status = channelz
        .get_subchannel(proto::GetSubchannelRequest {
            subchannel_id: first_subchannel.unwrap(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        tonic_hotpath::channelz::ChannelzService::untracked_sockets(),
        0
    );
}
