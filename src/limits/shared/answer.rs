//! [`AnswerWait`]: a call waiting for its tenant's lease answer, for at
//! most the policy's `answer_wait`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use event_listener::EventListener;
use tokio::time::Sleep;

use super::requests::SharedLimits;
use super::tenant::FleetTenant;
use crate::limits::state::Bucket;

/// Ready when the answer to the request in flight for a tenant's call
/// lease lands (or the request ends without one), or when the policy's
/// `answer_wait` has passed, whichever comes first.
#[derive(Debug)]
pub(crate) struct AnswerWait {
    answered: EventListener,
    deadline: Pin<Box<Sleep>>,
}

impl AnswerWait {
    /// Waits for the answer due on the tenant's call lease, if it is still in
    /// flight (`None` if it landed already: judge the call again now), at
    /// most until `until`, or the policy's `answer_wait` from now.
    #[cold]
    #[inline(never)]
    pub(crate) fn new(
        tenant: &FleetTenant,
        shared: &SharedLimits,
        until: Option<std::time::Instant>,
    ) -> Option<Self> {
        // Listen first, then look: an answer that lands in between wakes
        // the listener; one that landed before cleared the mark.
        let answered = tenant.answered.listen();
        if !tenant.lease(Bucket::Calls).requesting() {
            return None;
        }
        // The backend's runtime has a timer (its operations time out); the
        // server's may not.
        let _runtime = shared.backend().inner.runtime.enter();
        let deadline = match until {
            Some(until) => tokio::time::Instant::from_std(until),
            None => tokio::time::Instant::now() + shared.answer_wait(),
        };
        let deadline = Box::pin(tokio::time::sleep_until(deadline));
        Some(Self { answered, deadline })
    }

    /// When the wait ends at the latest: a call judged again after it
    /// that must wait for another answer (a federated call's next tenant)
    /// waits no later than this.
    pub(crate) fn deadline(&self) -> std::time::Instant {
        self.deadline.deadline().into_std()
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
