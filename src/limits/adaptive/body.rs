//! The response body of [`AdaptiveLimit`](super::AdaptiveLimit): the
//! inner body carrying the call's place, which it gives back when the
//! call ends, with the call's latency as a sample if the call was unary.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::admission::Place;
use crate::tenant::refusal::RefusalBody;
use crate::wire::status::GRPC_STATUS;

pin_project! {
    /// The response body of [`AdaptiveLimit`](super::AdaptiveLimit): the
    /// inner service's body when the call was admitted, or the body of a
    /// refusal (none for gRPC, whose status travels in the headers; the
    /// refusal's text for plain HTTP).
    ///
    /// An admitted call holds its place in the limit until this body ends
    /// (its last frame or an error was read) or is dropped: a streaming
    /// call holds it for its whole life. When the body ends with `OK`
    /// trailers after at most one gRPC message, the call's latency (from
    /// its arrival to its trailers) is a sample for the controller; a
    /// stream (a second message), an error status, a body error or a drop
    /// (a cancel, a deadline, a reset) gives the place back without a
    /// sample, as does a plain HTTP response. Frames, size hints and
    /// errors are forwarded unchanged.
    ///
    /// ```
    /// use http_body::Body as _;
    /// use tonic_hotpath::limits::adaptive::ResponseBody;
    ///
    /// let refused = ResponseBody::<String>::default();
    /// assert!(refused.is_end_stream());
    /// ```
    #[derive(Debug)]
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<B> {
        Inner { #[pin] body: B, place: Option<Place>, messages: Messages },
        Refused { text: Option<Bytes> },
    }
}

impl<B> Default for ResponseBody<B> {
    /// The body of a gRPC refusal: empty.
    fn default() -> Self {
        Self {
            kind: Kind::Refused { text: None },
        }
    }
}

impl<B> RefusalBody for ResponseBody<B> {
    fn refusal_text(text: Bytes) -> Self {
        Self {
            kind: Kind::Refused { text: Some(text) },
        }
    }
}

impl<B> ResponseBody<B> {
    /// The inner body, carrying `place` (none: a call not counted).
    pub(crate) fn with_place(body: B, place: Option<Place>) -> Self {
        Self {
            kind: Kind::Inner {
                body,
                place,
                messages: Messages::default(),
            },
        }
    }

    /// The inner service's body (the place given back now, without a
    /// sample); `None` for a refusal.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Inner { body, .. } => Some(body),
            Kind::Refused { .. } => None,
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body,
    B::Data: From<Bytes>,
{
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner {
                body,
                place,
                messages,
            } => {
                let polled = body.poll_frame(cx);
                match &polled {
                    Poll::Ready(Some(Ok(frame))) if place.is_some() => {
                        if let Some(data) = frame.data_ref() {
                            messages.count(data.chunk());
                        } else if let Some(trailers) = frame.trailers_ref() {
                            // The call's last frame (hyper may drop the
                            // body without polling its end): a sample if
                            // it ended OK after at most one message.
                            let ok = trailers.get(&GRPC_STATUS).is_some_and(|code| code == "0");
                            if let Some(place) = place.take() {
                                place.end(ok && messages.is_unary());
                            }
                        }
                    }
                    Poll::Ready(Some(Ok(_)) | None) => drop(place.take()),
                    Poll::Ready(Some(Err(_))) => drop(place.take()),
                    Poll::Pending => {}
                }
                polled
            }
            KindProj::Refused { text } => {
                Poll::Ready(text.take().map(|text| Ok(Frame::data(text.into()))))
            }
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Refused { text } => text.is_none(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Refused { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |text| text.len() as u64))
            }
        }
    }
}

/// Counts the gRPC messages in a response body up to two (a stream):
/// each is a 5-byte prefix (a flag and a big-endian length) and that many
/// bytes, split across data frames anyhow.
#[derive(Debug, Default)]
struct Messages {
    /// Messages begun (at most 2).
    begun: u8,
    /// Bytes of the current message still to come.
    remaining: u64,
    /// The prefix read so far, and how much of it.
    prefix: [u8; 5],
    prefix_len: u8,
}

impl Messages {
    fn count(&mut self, mut data: &[u8]) {
        while !data.is_empty() && self.begun < 2 {
            if self.remaining > 0 {
                let skip = usize::try_from(self.remaining)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                data = &data[skip..];
                self.remaining -= skip as u64;
                continue;
            }
            let want = 5 - usize::from(self.prefix_len);
            let take = want.min(data.len());
            let at = usize::from(self.prefix_len);
            self.prefix[at..at + take].copy_from_slice(&data[..take]);
            self.prefix_len += take as u8;
            data = &data[take..];
            if self.prefix_len == 5 {
                self.begun += 1;
                self.prefix_len = 0;
                let length = [
                    self.prefix[1],
                    self.prefix[2],
                    self.prefix[3],
                    self.prefix[4],
                ];
                self.remaining = u64::from(u32::from_be_bytes(length));
            }
        }
    }

    /// At most one message: a unary answer (or an error status with
    /// none).
    fn is_unary(&self) -> bool {
        self.begun <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(length: u32) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&length.to_be_bytes());
        bytes.extend(std::iter::repeat_n(7, length as usize));
        bytes
    }

    #[test]
    fn one_message_in_any_split_is_unary_and_two_are_a_stream() {
        let one = message(300);
        for split in [1, 3, 5, 6, 299, 305] {
            let mut messages = Messages::default();
            for chunk in one.chunks(split) {
                messages.count(chunk);
            }
            assert!(messages.is_unary(), "split {split}");
            assert_eq!(messages.begun, 1);
        }
        let mut two = message(0);
        two.extend(message(4));
        for split in [1, 2, 5, 9] {
            let mut messages = Messages::default();
            for chunk in two.chunks(split) {
                messages.count(chunk);
            }
            assert!(!messages.is_unary(), "split {split}");
        }
        // A length near u32::MAX is skipped, not allocated.
        let mut messages = Messages::default();
        messages.count(&[0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]);
        assert_eq!(messages.remaining, u64::from(u32::MAX) - 3);
        assert!(messages.is_unary());
    }
}
