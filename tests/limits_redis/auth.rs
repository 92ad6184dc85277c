//! Credentials: a `redis-server` with `requirepass` and an ACL user.
//! Right credentials connect (from the URL or from code); wrong ones are
//! a clear start-up error; no password shows in an error or `Debug`.

use tonic_hotpath::limits::{RedisBackend, RedisBackendErrorKind};

use crate::redis_server::{BACKEND_COMMANDS, RedisServer};

const PASSWORD: &str = "default-s3cret";
const USER_PASSWORD: &str = "limiter-s3cret";

async fn secured() -> Option<RedisServer> {
    let redis = RedisServer::start(&["--requirepass", PASSWORD]).await?;
    let user_password = format!(">{USER_PASSWORD}");
    let created = redis.cli(
        &[
            "--no-auth-warning",
            "-a",
            PASSWORD,
            "ACL",
            "SETUSER",
            "limiter",
            "on",
            user_password.as_str(),
            "~limits:*",
        ]
        .into_iter()
        .chain(BACKEND_COMMANDS.iter().copied())
        .collect::<Vec<_>>(),
    );
    assert!(created.contains("OK"), "ACL SETUSER: {created}");
    Some(redis)
}

#[tokio::test]
async fn right_credentials_connect_from_the_url_or_from_code() {
    let Some(redis) = secured().await else {
        return;
    };
    let port = redis.port();
    let backend = RedisBackend::builder(format!("redis://:{PASSWORD}@127.0.0.1:{port}/"))
        .key_prefix("limits:a")
        .connect()
        .await
        .expect("the default user's password in the URL");
    assert!(backend.status().up);
    assert!(!format!("{backend:?}").contains(PASSWORD), "{backend:?}");
    let backend = RedisBackend::builder(format!("redis://127.0.0.1:{port}/"))
        .credentials(Some("limiter"), USER_PASSWORD)
        .key_prefix("limits:b")
        .connect()
        .await
        .expect("the ACL user's password from code");
    assert!(backend.status().up);
    let backend =
        RedisBackend::builder(format!("redis://limiter:{USER_PASSWORD}@127.0.0.1:{port}/"))
            .key_prefix("limits:c")
            .connect()
            .await
            .expect("the ACL user in the URL");
    assert_eq!(backend.status().replicas, 1);
}

#[tokio::test]
async fn wrong_credentials_are_a_clear_start_up_error_without_the_password() {
    let Some(redis) = secured().await else {
        return;
    };
    let port = redis.port();
    for (url, password) in [
        (format!("redis://:wrong-pw@127.0.0.1:{port}/"), "wrong-pw"),
        (
            format!("redis://limiter:not-it@127.0.0.1:{port}/"),
            "not-it",
        ),
        (format!("redis://127.0.0.1:{port}/"), PASSWORD),
    ] {
        let error = RedisBackend::builder(&url)
            .key_prefix("limits:x")
            .connect()
            .await
            .expect_err("refused credentials");
        assert_eq!(error.kind(), RedisBackendErrorKind::Auth, "{url}: {error}");
        assert!(!error.to_string().contains(password), "{error}");
        assert!(!format!("{error:?}").contains(password), "{error:?}");
    }
    // An ACL user whose keys do not match the prefix: refused at start-up.
    let error = RedisBackend::builder(format!("redis://limiter:{USER_PASSWORD}@127.0.0.1:{port}/"))
        .key_prefix("elsewhere")
        .connect()
        .await
        .expect_err("keys outside the user's pattern");
    assert_eq!(error.kind(), RedisBackendErrorKind::Auth, "{error}");
}

#[tokio::test]
async fn a_refused_connection_is_a_clear_start_up_error() {
    let Some(mut redis) = RedisServer::start(&[]).await else {
        return;
    };
    let url = redis.url();
    redis.kill();
    let error = RedisBackend::connect(&url)
        .await
        .expect_err("nothing listens");
    assert_eq!(error.kind(), RedisBackendErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains("127.0.0.1"), "{error}");
}
