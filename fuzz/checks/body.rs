//! An in-memory HTTP body made of given chunks, and polling a future that
//! never waits on I/O.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::HeaderMap;
use http_body::Frame;

/// A body that yields `chunks`, then `trailers` if any.
#[derive(Debug, Default)]
pub struct Chunks {
    chunks: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Chunks {
    pub fn new<'c>(chunks: impl IntoIterator<Item = &'c [u8]>) -> Self {
        Self {
            chunks: chunks.into_iter().map(Bytes::copy_from_slice).collect(),
            trailers: None,
        }
    }

    pub fn with_trailers(mut self, trailers: HeaderMap) -> Self {
        self.trailers = Some(trailers);
        self
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let frame = match self.chunks.pop_front() {
            Some(chunk) => Frame::data(chunk),
            None => match self.trailers.take() {
                Some(trailers) => Frame::trailers(trailers),
                None => return Poll::Ready(None),
            },
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && self.trailers.is_none()
    }
}

/// Polls `future` to completion; it must not wait on anything but itself
/// (in-memory bodies), so a few polls with a no-op waker finish it.
pub fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    for _ in 0..1_000 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
    panic!("an in-memory future did not finish in 1000 polls");
}
