//! Group commit for the embedded stores (the SQLite ledger, the folder archive): concurrent
//! callers hand their work to one thread, which runs whatever has queued up meanwhile in one
//! batch and makes it durable with one commit, then answers every caller. A caller is answered
//! only after the commit that holds its work succeeded; if that commit fails, every caller in
//! the batch gets the failure. A lone caller waits for nothing: a batch is what queued while
//! the previous one was committing, so batches grow with the load and no timer is involved.

use std::sync::mpsc;

use tokio::sync::oneshot;

/// The most jobs one batch holds.
const MOST: usize = 512;

/// A store whose work can share one commit.
pub(crate) trait Batched: Send + 'static {
    /// Starts a batch.
    fn begin(&mut self) -> Result<(), String>;
    /// Makes everything the batch's jobs did durable.
    fn commit(&mut self) -> Result<(), String>;
    /// Abandons the batch after a failed commit.
    fn abort(&mut self);
}

/// One caller's work, run on the store's thread.
trait Job<S>: Send {
    /// Does the work inside the current batch, keeping its answer.
    fn run(&mut self, store: &mut S);
    /// Answers the caller once the batch's commit is known.
    fn finish(self: Box<Self>, committed: Result<(), &str>);
}

/// A call and where its answer goes.
struct Call<F, T, E> {
    work: Option<F>,
    answer: Option<Result<T, E>>,
    reply: oneshot::Sender<Result<T, E>>,
}

impl<S, F, T, E> Job<S> for Call<F, T, E>
where
    F: FnOnce(&mut S) -> Result<T, E> + Send,
    T: Send,
    E: From<Failed> + Send,
{
    fn run(&mut self, store: &mut S) {
        if let Some(work) = self.work.take() {
            self.answer = Some(work(store));
        }
    }

    fn finish(self: Box<Self>, committed: Result<(), &str>) {
        let answer = match (committed, self.answer) {
            (Ok(()), Some(answer)) => answer,
            (Ok(()), None) => Err(Failed("the work was not run".into()).into()),
            (Err(e), _) => Err(Failed(e.to_owned()).into()),
        };
        // A caller that stopped waiting (its deadline passed) needs no answer.
        let _ = self.reply.send(answer);
    }
}

/// A batch that could not be started or committed, or a store whose thread has stopped.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Failed(pub(crate) String);

/// The handle callers share; the store's thread stops when the last handle is dropped.
pub(crate) struct GroupCommit<S> {
    jobs: mpsc::Sender<Box<dyn Job<S>>>,
}

impl<S> Clone for GroupCommit<S> {
    fn clone(&self) -> Self {
        Self {
            jobs: self.jobs.clone(),
        }
    }
}

impl<S> std::fmt::Debug for GroupCommit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl<S: Batched> GroupCommit<S> {
    /// Moves `store` to a thread of its own, named `name`.
    pub(crate) fn start(name: &str, store: S) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || serve(store, &queue))?;
        Ok(Self { jobs })
    }

    /// Runs `work` in the next batch and answers once that batch is committed.
    pub(crate) async fn call<F, T, E>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(&mut S) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<Failed> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let call = Call {
            work: Some(work),
            answer: None,
            reply,
        };
        let stopped = || Failed("the store's writer thread has stopped".into()).into();
        if self.jobs.send(Box::new(call)).is_err() {
            return Err(stopped());
        }
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }
}

/// The store's thread: every job queued meanwhile, run in one batch under one commit.
fn serve<S: Batched>(mut store: S, queue: &mpsc::Receiver<Box<dyn Job<S>>>) {
    while let Ok(first) = queue.recv() {
        let mut batch = Vec::with_capacity(16);
        batch.push(first);
        batch.extend(queue.try_iter().take(MOST - 1));
        if let Err(e) = store.begin() {
            batch.into_iter().for_each(|job| job.finish(Err(&e)));
            continue;
        }
        for job in &mut batch {
            job.run(&mut store);
        }
        let committed = store.commit();
        if committed.is_err() {
            store.abort();
        }
        let committed = committed.as_ref().map(|_| ()).map_err(String::as_str);
        batch.into_iter().for_each(|job| job.finish(committed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that counts its commits and fails the ones it is told to.
    #[derive(Default)]
    struct Counter {
        value: u64,
        pending: u64,
        commits: u64,
        fail_next: bool,
    }

    impl Batched for Counter {
        fn begin(&mut self) -> Result<(), String> {
            self.pending = self.value;
            Ok(())
        }
        fn commit(&mut self) -> Result<(), String> {
            self.commits += 1;
            match std::mem::take(&mut self.fail_next) {
                true => Err("the disk is full".into()),
                false => Ok(()),
            }
        }
        fn abort(&mut self) {
            self.value = self.pending;
        }
    }

    #[derive(Debug, PartialEq)]
    struct Error(String);

    impl From<Failed> for Error {
        fn from(failed: Failed) -> Self {
            Self(failed.0)
        }
    }

    #[tokio::test]
    async fn calls_queued_during_a_commit_share_the_next_and_each_gets_its_own_answer() {
        let store = GroupCommit::start("test", Counter::default()).expect("a thread");
        // The first batch holds the thread until the other calls have queued behind it.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let (running, started) = std::sync::mpsc::channel::<()>();
        let first = tokio::spawn({
            let store = store.clone();
            async move {
                store
                    .call(move |c: &mut Counter| -> Result<u64, Error> {
                        running.send(()).expect("the test waits");
                        gate.recv().expect("the gate opens");
                        c.value += 1;
                        Ok(c.value)
                    })
                    .await
            }
        });
        while started.try_recv().is_err() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let rest: Vec<_> = (0..199)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .call(|c: &mut Counter| -> Result<u64, Error> {
                            c.value += 1;
                            Ok(c.value)
                        })
                        .await
                })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        open.send(()).expect("the first call waits");
        let mut answers = vec![first.await.expect("a task").expect("committed")];
        for call in rest {
            answers.push(call.await.expect("a task").expect("committed"));
        }
        answers.sort_unstable();
        assert_eq!(answers, (1..=200).collect::<Vec<_>>());
        let commits = store
            .call(|c: &mut Counter| -> Result<u64, Error> { Ok(c.commits) })
            .await;
        assert_eq!(commits, Ok(2), "the 199 queued calls shared one commit");
    }

    #[tokio::test]
    async fn a_failed_commit_fails_its_callers_and_undoes_their_work() {
        let store = GroupCommit::start("test", Counter::default()).expect("a thread");
        let answer = store
            .call(|c: &mut Counter| -> Result<u64, Error> {
                c.value += 1;
                c.fail_next = true;
                Ok(c.value)
            })
            .await;
        assert_eq!(answer, Err(Error("the disk is full".into())));
        let value = store
            .call(|c: &mut Counter| -> Result<u64, Error> { Ok(c.value) })
            .await;
        assert_eq!(value, Ok(0), "the failed batch's work was abandoned");
    }
}
