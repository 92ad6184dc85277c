//! [`AnswerWait`]: a call waiting for its tenant's lease answer, for at
//! most the policy's `answer_wait`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use event_listener::EventListener;
use tokio::time::Sleep;

use super::requests::SharedLimits;
use crate::tenant::limits::state::TenantState;

/// Ready when the answer to the request in flight for a tenant's call
/// lease lands (or the request ends without one), or when the policy's
/// `answer_wait` has passed, whichever comes first.
#[derive(Debug)]
pub(crate) struct AnswerWait {
    answered: EventListener,
    deadline: Pin<Box<Sleep>>,
}

impl AnswerWait {
    /// Waits for the answer due on `state`'s call lease, if it is still in
    /// flight (`None` if it landed already: judge the call again now).
    #[cold]
    #[inline(never)]
    pub(crate) fn new(state: &TenantState, shared: &SharedLimits) -> Option<Self> {
        // Listen first, then look: an answer that lands in between wakes
        // the listener; one that landed before cleared the mark.
        let answered = state.answered.listen();
        if !state.call_lease.requesting() {
            return None;
        }
        // The backend's runtime has a timer (its operations time out); the
        // server's may not.
        let _runtime = shared.backend().inner.runtime.enter();
        let deadline = Box::pin(tokio::time::sleep(shared.answer_wait()));
        Some(Self { answered, deadline })
    }
}

impl Future for AnswerWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Pin::new(&mut self.answered).poll(cx).is_ready() {
            return Poll::Ready(());
        }
        self.deadline.as_mut().poll(cx)
    }
}
