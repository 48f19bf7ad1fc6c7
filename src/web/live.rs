//! The event streams (Server-Sent Events): an open page's (`/api/events`:
//! the car, the counters, the log lines), and the game's frames for scripts
//! and the overlay (`/api/stream`: each frame the JSON object `export --as
//! jsonl` writes, at most `?hz=` a second).
//!
//! A stream holds no queue: it is sent the newest update of each kind when
//! its connection can take one, so a slow client skips updates and costs no
//! memory; one that stops reading is closed by its connection's write deadline
//! ([`super::connections::WRITE_DEADLINE`]). Each kind of stream takes a slot
//! among [`super::MAX_CLIENTS`]: one more closes the oldest of its kind
//! (streams that are never read can't keep a new page out).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::Notify;

use super::feed::{self, Wants};
use super::{lock, Shared};
use crate::output::{Encoder, Encoding, Frame, Selection};

/// How often a stream with nothing to say writes a comment, to find out that
/// its client is gone.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How soon a page's `EventSource` tries again after its stream ends.
const RETRY: Duration = Duration::from_secs(1);

/// Places for streams, at most `cap`; one more closes the oldest.
pub struct Slots {
    cap: usize,
    inner: Arc<Mutex<Open>>,
}

#[derive(Default)]
struct Open {
    next: u64,
    /// Oldest first: each stream's number and what closes it.
    streams: VecDeque<(u64, Arc<Notify>)>,
}

/// A stream's place, given back when dropped.
pub struct Slot {
    id: u64,
    closed: Arc<Notify>,
    inner: Arc<Mutex<Open>>,
}

impl Slots {
    /// At most `cap` streams.
    pub fn new(cap: usize) -> Slots {
        Slots {
            cap,
            inner: Arc::default(),
        }
    }

    /// A place for a new stream, closing the oldest one when all are taken.
    pub fn take(&self) -> Slot {
        let mut open = lock(&self.inner);
        while open.streams.len() >= self.cap.max(1) {
            if let Some((_, oldest)) = open.streams.pop_front() {
                // Kept as a permit if that stream is not waiting right now.
                oldest.notify_one();
            }
        }
        let id = open.next;
        open.next += 1;
        let closed = Arc::new(Notify::new());
        open.streams.push_back((id, closed.clone()));
        Slot {
            id,
            closed,
            inner: self.inner.clone(),
        }
    }

    /// Streams open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.inner).streams.len()
    }
}

impl Slot {
    /// Ends when a newer stream took this one's place.
    pub async fn closed(&self) {
        self.closed.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.inner).streams.retain(|(id, _)| *id != self.id);
    }
}

/// What a page's stream holds while it is open.
struct PageStream {
    slot: Slot,
    _listening: feed::Listening,
    car: tokio::sync::watch::Receiver<Option<Arc<str>>>,
    counters: tokio::sync::watch::Receiver<Option<Arc<str>>>,
    log: tokio::sync::watch::Receiver<Option<Arc<str>>>,
    started: bool,
}

fn named(kind: &'static str, data: Option<Arc<str>>) -> Option<Event> {
    data.map(|d| Event::default().event(kind).data(&*d))
}

impl PageStream {
    /// The next event: the newest update of whichever kind changed first;
    /// `None` when a newer page took this one's place or the page stops.
    async fn next(&mut self) -> Option<Event> {
        if !self.started {
            self.started = true;
            return Some(Event::default().retry(RETRY));
        }
        loop {
            let event = tokio::select! {
                () = self.slot.closed() => return None,
                r = self.car.changed() => { r.ok()?; named("car", self.car.borrow_and_update().clone()) }
                r = self.counters.changed() => { r.ok()?; named("counters", self.counters.borrow_and_update().clone()) }
                r = self.log.changed() => { r.ok()?; named("log", self.log.borrow_and_update().clone()) }
            };
            if event.is_some() {
                return event;
            }
        }
    }
}

/// An open page's event stream: the newest car, counters and log lines as
/// they change (those known already at once), a keep-alive comment when
/// nothing changes.
pub fn page_events(
    shared: &Arc<Shared>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    let slot = shared.pages.take();
    let listening = feed::listen(shared, Wants::Page);
    let subscribe = |tx: &tokio::sync::watch::Sender<Option<Arc<str>>>| {
        let mut rx = tx.subscribe();
        // What is known already goes at once.
        rx.mark_changed();
        rx
    };
    let stream = PageStream {
        slot,
        _listening: listening,
        car: subscribe(&shared.updates.car),
        counters: subscribe(&shared.updates.counters),
        log: subscribe(&shared.updates.log),
        started: false,
    };
    let events = futures_util::stream::unfold(stream, |mut s| async move {
        let event = s.next().await?;
        Some((Ok(event), s))
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(KEEPALIVE).text("keepalive"))
}

/// What a frame stream holds while it is open.
struct FrameStream {
    slot: Slot,
    _listening: feed::Listening,
    frames: tokio::sync::watch::Receiver<Option<feed::Frame>>,
    encoder: Encoder,
    /// The object's text, kept from frame to frame.
    text: Vec<u8>,
    /// The least time between two frames sent.
    period: Duration,
    /// When the last frame went.
    sent: Option<tokio::time::Instant>,
}

impl FrameStream {
    /// The next frame's object: the newest frame once it is new and a period
    /// has passed since the last one; `None` when a newer stream took this
    /// one's place or the page stops.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(sent) = self.sent {
                tokio::time::sleep_until(sent + self.period).await;
            }
            tokio::select! {
                () = self.slot.closed() => return None,
                r = self.frames.changed() => r.ok()?,
            }
            let Some(frame) = *self.frames.borrow_and_update() else {
                continue;
            };
            let encoded = self.encoder.encode(
                &Frame {
                    payload: frame.payload(),
                    format: frame.format,
                    time: frame.time,
                },
                &mut self.text,
            );
            if encoded.is_err() {
                continue;
            }
            self.sent = Some(tokio::time::Instant::now());
            // The encoder writes JSON: UTF-8, one line.
            return Some(Event::default().data(String::from_utf8_lossy(&self.text)));
        }
    }
}

/// A stream of the game's frames: each the object `export --as jsonl` writes
/// with `selection`'s columns, at most `hz` a second, the newest when it goes.
pub fn frames(
    shared: &Arc<Shared>,
    hz: u32,
    selection: &Selection,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    let hz = hz.clamp(1, feed::MAX_HZ);
    let stream = FrameStream {
        slot: shared.streams.take(),
        _listening: feed::listen(shared, Wants::Frames(hz)),
        // Only frames that come from now on.
        frames: shared.updates.frame.subscribe(),
        encoder: Encoder::new(Encoding::Json, selection),
        text: Vec::new(),
        period: Duration::from_secs(1) / hz,
        sent: None,
    };
    let events = futures_util::stream::unfold(stream, |mut s| async move {
        let event = s.next().await?;
        Some((Ok(event), s))
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(KEEPALIVE).text("keepalive"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_more_stream_than_the_cap_closes_the_oldest() {
        let slots = Slots::new(2);
        let (a, b) = (slots.take(), slots.take());
        let c = slots.take();
        assert_eq!(slots.len(), 2);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            // a's permit was kept: it ends at once; b and c stay open.
            tokio::time::timeout(Duration::from_secs(5), a.closed())
                .await
                .expect("the oldest is closed");
            for open in [&b, &c] {
                let waited = tokio::time::timeout(Duration::from_millis(10), open.closed()).await;
                assert!(waited.is_err(), "a newer stream stays open");
            }
        });
        drop(b);
        assert_eq!(slots.len(), 1, "a dropped stream gives its place back");
    }
}
