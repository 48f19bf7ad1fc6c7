//! The page's waiting work (issue 30): the requests that wait on a file or on
//! the relay (an edit, a recording, "Start at login", `/api/snapshot` with no
//! page open) run on [`WORKERS`] threads of their own, from a queue of at most
//! [`QUEUED`] jobs. A request that finds the queue full is answered 503 at
//! once; a job whose request has been answered meanwhile (its deadline passed,
//! its client gone: the waiting side dropped) is skipped, never run late.
//! Before this, tokio's blocking pool queued without bound: 200 clients asking
//! for snapshots left the page answering 408 for 80–90 s, and an edit answered
//! "408 not answered within 10 s" was applied 81 s later.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::lock;

/// Threads that carry out the page's waiting work.
pub const WORKERS: usize = 2;
/// Jobs that may wait for a worker; one more is refused.
pub const QUEUED: usize = 16;
/// A job is started only with this much time left before its request is
/// answered 408: the quick jobs (a recording, a token, "Start at login") end
/// well within it, so none is carried out after its request was answered
/// (review of issue 30). An edit has its own rule (`owner::Ticket`).
pub const START_MARGIN: Duration = Duration::from_secs(1);

/// One piece of waiting work.
struct Job {
    /// After this, its request has been answered 408: it is not run.
    deadline: Instant,
    /// Set when its request no longer waits for it.
    gone: Arc<AtomicBool>,
    run: Box<dyn FnOnce() + Send>,
}

#[derive(Default)]
struct Line {
    jobs: VecDeque<Job>,
    closed: bool,
    /// Jobs skipped because nobody waited for them any more.
    skipped: u64,
}

/// The queue and its workers; dropping the last handle does not wait for them.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<(Mutex<Line>, Condvar)>,
    cap: usize,
}

/// The queue is full: the request is answered 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// What a job's request waits on; dropping it (the request answered without
/// it) tells the queue not to run the job.
pub struct Waiting<T> {
    answer: oneshot::Receiver<T>,
    gone: Arc<AtomicBool>,
}

impl<T> Drop for Waiting<T> {
    fn drop(&mut self) {
        self.gone.store(true, Ordering::Release);
    }
}

impl<T> Waiting<T> {
    /// The job's result; `None` if it was not run (the page stops).
    pub async fn answer(mut self) -> Option<T> {
        (&mut self.answer).await.ok()
    }
}

impl Queue {
    /// A queue of at most `cap` waiting jobs and `workers` threads named
    /// `web-work` (none when they can't be started: every job then waits
    /// for its deadline, and the log says why).
    pub fn start(workers: usize, cap: usize) -> Queue {
        let queue = Queue {
            inner: Arc::default(),
            cap,
        };
        for _ in 0..workers {
            let q = queue.clone();
            let started = std::thread::Builder::new()
                .name("web-work".to_owned())
                .spawn(move || q.work());
            if let Err(e) = started {
                log::warn!("the web page's worker could not start: {e}");
            }
        }
        queue
    }

    /// Queues `run`, for a request answered (408) at `deadline` at the latest.
    pub fn submit<T: Send + 'static>(
        &self,
        deadline: Instant,
        run: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Waiting<T>, Full> {
        let (tx, answer) = oneshot::channel();
        let gone = Arc::new(AtomicBool::new(false));
        let job = Job {
            deadline,
            gone: gone.clone(),
            run: Box::new(move || {
                let _ = tx.send(run());
            }),
        };
        let (line, wake) = &*self.inner;
        let mut line = lock(line);
        if line.closed || line.jobs.len() >= self.cap {
            return Err(Full);
        }
        line.jobs.push_back(job);
        wake.notify_one();
        Ok(Waiting { answer, gone })
    }

    /// Jobs skipped so far because their request no longer waited.
    #[cfg(test)]
    pub fn skipped(&self) -> u64 {
        lock(&self.inner.0).skipped
    }

    /// Ends the workers once they finish what they run; queued jobs are
    /// dropped (their requests are answered 503).
    pub fn close(&self) {
        let (line, wake) = &*self.inner;
        let mut line = lock(line);
        line.closed = true;
        line.jobs.clear();
        wake.notify_all();
    }

    /// A worker: runs each job still waited for, until closed.
    fn work(&self) {
        let (line, wake) = &*self.inner;
        loop {
            let job = {
                let mut line = lock(line);
                loop {
                    if line.closed {
                        return;
                    }
                    match line.jobs.pop_front() {
                        Some(job)
                            if job.gone.load(Ordering::Acquire)
                                || Instant::now() + START_MARGIN >= job.deadline =>
                        {
                            line.skipped += 1;
                        }
                        Some(job) => break job,
                        None => line = wake.wait(line).unwrap_or_else(|e| e.into_inner()),
                    }
                }
            };
            (job.run)();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_full_queue_refuses_and_a_job_nobody_waits_for_never_runs() {
        let queue = Queue::start(1, 2);
        let later = Instant::now() + Duration::from_secs(60);
        // The one worker is held until the test lets it go.
        let (hold, held) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        let first = queue
            .submit(later, move || {
                started.send(()).unwrap();
                held.recv().unwrap();
                1
            })
            .unwrap();
        running.recv().unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let answered = queue
            .submit(later, move || r.store(true, Ordering::SeqCst))
            .unwrap();
        let third = queue.submit(later, || 3).unwrap();
        assert!(queue.submit(later, || 4).is_err(), "two wait already");
        // Its request was answered without it (a 408, a client gone).
        drop(answered);
        hold.send(()).unwrap();
        assert_eq!(block_on(first.answer()), Some(1));
        assert_eq!(block_on(third.answer()), Some(3));
        assert!(!ran.load(Ordering::SeqCst), "never run after its answer");
        assert_eq!(queue.skipped(), 1);
        queue.close();
    }

    #[test]
    fn a_job_past_its_deadline_is_skipped() {
        let queue = Queue::start(1, 4);
        let past = Instant::now();
        let late = queue.submit(past, || 1).unwrap();
        assert_eq!(block_on(late.answer()), None, "dropped unrun");
        let on_time = queue
            .submit(Instant::now() + Duration::from_secs(60), || 2)
            .unwrap();
        assert_eq!(block_on(on_time.answer()), Some(2));
        assert_eq!(queue.skipped(), 1);
        // Review of issue 30: started with less than START_MARGIN left, a job
        // could end after its request was answered 408.
        let too_close = queue
            .submit(Instant::now() + START_MARGIN / 2, || 3)
            .unwrap();
        assert_eq!(block_on(too_close.answer()), None, "not started so late");
        assert_eq!(queue.skipped(), 2);
        queue.close();
    }
}
