//! The request body of a call that may be tried more than once: the
//! caller's body, read once, its messages kept (the `Bytes` tonic encoded
//! them into, not copies) so that a later attempt sends them again, until
//! the call commits to one attempt.
//!
//! Each attempt reads through its own [`AttemptBody`]: first the frames
//! kept so far, then, at the end of them, the caller's body itself, whose
//! new frames are kept for the attempts to come. Kept bytes are bounded
//! per call and, where set, per channel: past either bound the call
//! commits to the attempt that read the frame (grpc-go's
//! `MaxRetryRPCBufferSize`), and nothing more is kept.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use tonic::Status;

use tower::BoxError;

/// The bytes a channel's calls may keep for retries, together.
#[derive(Debug)]
pub(crate) struct ChannelBudget {
    limit: usize,
    used: AtomicUsize,
}

impl ChannelBudget {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
        }
    }

    fn reserve(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// The bytes kept now, by every call of the channel.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// One call's body, shared by its attempts.
#[derive(Debug)]
pub(crate) struct CallBody<B> {
    state: Mutex<State<B>>,
}

#[derive(Debug)]
struct State<B> {
    /// The caller's body; `None` once it ended or failed.
    source: Option<B>,
    /// Data frames kept: frame `i` (counted from the call's first) is
    /// `kept[i - first_kept]`.
    kept: VecDeque<Bytes>,
    first_kept: usize,
    /// Data frames read from the source so far.
    read: usize,
    /// The bytes in `kept`.
    kept_bytes: usize,
    per_call_limit: usize,
    channel: Option<Arc<ChannelBudget>>,
    /// The source's trailers, if it sent any.
    trailers: Option<HeaderMap>,
    ended: bool,
    /// The source's error, handed to every attempt that reaches it.
    error: Option<Status>,
    /// The attempt the call committed to.
    committed: Option<u32>,
    /// The latest attempt: earlier ones are over and read no more.
    current: u32,
    /// Attempts that found the source not ready, to wake when another
    /// attempt reads from it (the source wakes only its last reader).
    waiting: Vec<(u32, Waker)>,
    /// The attempt that last found the source not ready: the one the
    /// source will wake.
    source_waker: Option<u32>,
}

impl<B> State<B> {
    fn wake_others(&mut self, attempt: u32) {
        self.waiting.retain(|(waiting, waker)| {
            if *waiting != attempt {
                waker.wake_by_ref();
            }
            false
        });
        self.source_waker = None;
    }

    /// Drops the kept frames before frame `upto`.
    fn release_before(&mut self, upto: usize) {
        while self.first_kept < upto {
            let Some(frame) = self.kept.pop_front() else {
                break;
            };
            self.first_kept += 1;
            self.kept_bytes -= frame.len();
            if let Some(channel) = &self.channel {
                channel.release(frame.len());
            }
        }
    }

    fn commit(&mut self, attempt: u32) {
        if self.committed.is_none() {
            self.committed = Some(attempt);
        }
    }
}

impl<B> Drop for CallBody<B> {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(channel) = &state.channel {
            channel.release(state.kept_bytes);
        }
    }
}

impl<B> CallBody<B> {
    pub(crate) fn new(
        source: B,
        per_call_limit: usize,
        channel: Option<Arc<ChannelBudget>>,
    ) -> Self {
        Self {
            state: Mutex::new(State {
                source: Some(source),
                kept: VecDeque::new(),
                first_kept: 0,
                read: 0,
                kept_bytes: 0,
                per_call_limit,
                channel,
                trailers: None,
                ended: false,
                error: None,
                committed: None,
                current: 0,
                waiting: Vec::new(),
                source_waker: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commits the call to `attempt`: no other attempt reads on, nothing
    /// more is kept. The first commit stands.
    pub(crate) fn commit(&self, attempt: u32) {
        let mut state = self.lock();
        state.commit(attempt);
        if state.committed != Some(attempt) {
            return;
        }
        // Attempts waiting on the source end now (their next poll says
        // the call went to another attempt). The committed attempt drops
        // the kept frames as it reads past them.
        state.wake_others(attempt);
    }

    /// Starts attempt `attempt`: the earlier ones, over, read no more
    /// (their bodies may outlive them in the transport for a while).
    pub(crate) fn start(&self, attempt: u32) {
        let mut state = self.lock();
        state.current = state.current.max(attempt);
        state.wake_others(attempt);
    }

    /// Whether the call committed to an attempt (a bound on kept bytes
    /// was passed, or the call was answered), or its body failed: either
    /// way no attempt may follow.
    pub(crate) fn is_final(&self) -> bool {
        let state = self.lock();
        state.committed.is_some() || state.error.is_some()
    }

    /// The bytes kept now.
    #[cfg(test)]
    pub(crate) fn kept_bytes(&self) -> usize {
        self.lock().kept_bytes
    }
}

/// What one attempt sends: the call's kept frames, then the caller's body.
#[derive(Debug)]
pub(crate) struct AttemptBody<B> {
    call: Arc<CallBody<B>>,
    attempt: u32,
    /// The next data frame this attempt sends (counted from the call's
    /// first).
    next: usize,
    trailers_sent: bool,
}

impl<B> AttemptBody<B> {
    pub(crate) fn new(call: Arc<CallBody<B>>, attempt: u32) -> Self {
        Self {
            call,
            attempt,
            next: 0,
            trailers_sent: false,
        }
    }
}

impl<B> Drop for AttemptBody<B> {
    fn drop(&mut self) {
        let mut state = self.call.lock();
        let attempt = self.attempt;
        state.waiting.retain(|(waiting, _)| *waiting != attempt);
        // The source would have woken this attempt: wake the others, so
        // that one of them reads from it instead.
        if state.source_waker == Some(attempt) {
            state.wake_others(attempt);
        }
    }
}

impl<B> Body for AttemptBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let mut state = this.call.lock();
        let superseded = match state.committed {
            Some(attempt) => attempt != this.attempt,
            None => this.attempt < state.current,
        };
        if superseded {
            return Poll::Ready(Some(Err(Status::cancelled(
                "this attempt is over: the call went on with another",
            ))));
        }
        if state.committed == Some(this.attempt) {
            state.release_before(this.next);
        }
        // Frames kept from an earlier attempt's reading.
        if this.next < state.read {
            let Some(frame) = this
                .next
                .checked_sub(state.first_kept)
                .and_then(|index| state.kept.get(index))
                .cloned()
            else {
                return Poll::Ready(Some(Err(Status::internal(
                    "a retried request's message is no longer kept",
                ))));
            };
            this.next += 1;
            return Poll::Ready(Some(Ok(Frame::data(frame))));
        }
        if let Some(error) = &state.error {
            return Poll::Ready(Some(Err(error.clone())));
        }
        if state.ended {
            if !this.trailers_sent
                && let Some(trailers) = &state.trailers
            {
                this.trailers_sent = true;
                return Poll::Ready(Some(Ok(Frame::trailers(trailers.clone()))));
            }
            return Poll::Ready(None);
        }
        loop {
            let Some(source) = state.source.as_mut() else {
                return Poll::Ready(None);
            };
            let polled = Pin::new(source).poll_frame(cx);
            match polled {
                Poll::Pending => {
                    let attempt = this.attempt;
                    match state
                        .waiting
                        .iter_mut()
                        .find(|(waiting, _)| *waiting == attempt)
                    {
                        Some((_, waker)) => waker.clone_from(cx.waker()),
                        None => state.waiting.push((attempt, cx.waker().clone())),
                    }
                    state.source_waker = Some(attempt);
                    return Poll::Pending;
                }
                Poll::Ready(None) => {
                    state.ended = true;
                    state.source = None;
                    state.wake_others(this.attempt);
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(error))) => {
                    let status = Status::from_error(error.into());
                    state.error = Some(status.clone());
                    state.source = None;
                    state.wake_others(this.attempt);
                    return Poll::Ready(Some(Err(status)));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = match frame.into_data() {
                        Ok(data) => {
                            keep(&mut state, &mut this.next, this.attempt, &data);
                            Frame::data(data)
                        }
                        Err(frame) => match frame.into_trailers() {
                            Ok(trailers) => {
                                state.trailers = Some(trailers.clone());
                                this.trailers_sent = true;
                                Frame::trailers(trailers)
                            }
                            // A frame of a kind http-body may add later:
                            // not ours to replay; read on.
                            Err(_) => continue,
                        },
                    };
                    state.wake_others(this.attempt);
                    return Poll::Ready(Some(Ok(frame)));
                }
            }
        }
    }

    /// The end, once this attempt has sent every kept frame and the
    /// source is done (or says it is): so that the transport ends the
    /// stream with the last frame rather than with an empty one.
    fn is_end_stream(&self) -> bool {
        let state = self.call.lock();
        if self.next < state.read || state.error.is_some() {
            return false;
        }
        if state.ended {
            return state.trailers.is_none() || self.trailers_sent;
        }
        state.source.as_ref().is_some_and(Body::is_end_stream)
    }
}

/// A data frame attempt `attempt` read from the source (its next frame
/// `next`): kept for the attempts to come, unless the call committed or a
/// bound is passed (then the call commits to this attempt).
fn keep<B>(state: &mut State<B>, next: &mut usize, attempt: u32, data: &Bytes) {
    state.read += 1;
    *next += 1;
    if state.committed.is_some() {
        state.first_kept = state.read;
        return;
    }
    let len = data.len();
    let within_call = state
        .kept_bytes
        .checked_add(len)
        .is_some_and(|total| total <= state.per_call_limit);
    let within_channel = within_call
        && state
            .channel
            .as_ref()
            .is_none_or(|channel| channel.reserve(len));
    if within_call && within_channel {
        state.kept.push_back(data.clone());
        state.kept_bytes += len;
    } else {
        state.commit(attempt);
        let read = state.read;
        state.release_before(read);
        state.first_kept = read;
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    type Frames = StreamBody<tokio_stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Status>>>>;

    fn source(frames: &[&'static str]) -> Frames {
        StreamBody::new(tokio_stream::iter(
            frames
                .iter()
                .map(|f| Ok(Frame::data(Bytes::from_static(f.as_bytes()))))
                .collect::<Vec<_>>(),
        ))
    }

    async fn read_all<B>(body: AttemptBody<B>) -> Result<Vec<Bytes>, Status>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        let mut body = body;
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                frames.push(data);
            }
        }
        Ok(frames)
    }

    #[tokio::test]
    async fn a_later_attempt_sends_the_same_bytes_not_copies() {
        let call = Arc::new(CallBody::new(source(&["one", "two"]), 1024, None));
        let first = read_all(AttemptBody::new(Arc::clone(&call), 0))
            .await
            .unwrap();
        let second = read_all(AttemptBody::new(Arc::clone(&call), 1))
            .await
            .unwrap();
        assert_eq!(first, second);
        assert_eq!(first[0].as_ptr(), second[0].as_ptr(), "one buffer, shared");
        assert_eq!(call.kept_bytes(), 6);
        call.commit(1);
        assert!(call.is_final());
        let third = read_all(AttemptBody::new(Arc::clone(&call), 2)).await;
        assert_eq!(third.unwrap_err().code(), tonic::Code::Cancelled);
    }

    #[tokio::test]
    async fn past_the_per_call_bound_the_call_commits_and_keeps_nothing() {
        let call = Arc::new(CallBody::new(source(&["12345", "67890", "x"]), 8, None));
        let first = read_all(AttemptBody::new(Arc::clone(&call), 0))
            .await
            .unwrap();
        assert_eq!(
            first.len(),
            3,
            "the committed attempt still sends everything"
        );
        assert!(call.is_final());
        assert_eq!(call.kept_bytes(), 0);
    }

    #[tokio::test]
    async fn the_channel_budget_is_shared_and_given_back() {
        let channel = Arc::new(ChannelBudget::new(10));
        let a = Arc::new(CallBody::new(
            source(&["123456"]),
            1024,
            Some(Arc::clone(&channel)),
        ));
        let b = Arc::new(CallBody::new(
            source(&["123456"]),
            1024,
            Some(Arc::clone(&channel)),
        ));
        read_all(AttemptBody::new(Arc::clone(&a), 0)).await.unwrap();
        assert_eq!(channel.used(), 6);
        read_all(AttemptBody::new(Arc::clone(&b), 0)).await.unwrap();
        assert!(b.is_final(), "over the channel's budget: committed");
        assert_eq!(channel.used(), 6);
        drop(a);
        assert_eq!(channel.used(), 0);
    }

    #[tokio::test]
    async fn a_failing_source_fails_every_attempt_and_ends_retries() {
        let failing = StreamBody::new(tokio_stream::iter(vec![
            Ok(Frame::data(Bytes::from_static(b"a"))),
            Err(Status::invalid_argument("bad message")),
        ]));
        let call = Arc::new(CallBody::new(failing, 1024, None));
        let error = read_all(AttemptBody::new(Arc::clone(&call), 0))
            .await
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert!(call.is_final());
        let again = read_all(AttemptBody::new(Arc::clone(&call), 1))
            .await
            .unwrap_err();
        assert_eq!(again.message(), "bad message");
    }

    #[test]
    fn a_waiting_attempt_is_woken_when_another_reads_or_leaves() {
        let (sender, receiver) =
            tokio::sync::mpsc::unbounded_channel::<Result<Frame<Bytes>, Status>>();
        let stream = tokio_stream::wrappers::UnboundedReceiverStream::new(receiver);
        let call = Arc::new(CallBody::new(StreamBody::new(stream), 1024, None));
        let mut first = AttemptBody::new(Arc::clone(&call), 0);
        let mut second = AttemptBody::new(Arc::clone(&call), 1);
        let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let waker = Waker::from(Arc::new(CountingWaker(Arc::clone(&woken))));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut first).poll_frame(&mut cx).is_pending());
        assert!(Pin::new(&mut second).poll_frame(&mut cx).is_pending());
        // The source now wakes `second` only; `second` leaves.
        drop(second);
        assert_eq!(woken.load(Ordering::SeqCst), 1, "first woken to read on");
        sender
            .send(Ok(Frame::data(Bytes::from_static(b"m"))))
            .unwrap();
        match Pin::new(&mut first).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => assert_eq!(frame.into_data().unwrap(), "m"),
            other => panic!("{other:?}"),
        }
    }

    struct CountingWaker(Arc<std::sync::atomic::AtomicUsize>);

    impl std::task::Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}
