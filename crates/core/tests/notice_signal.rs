//! The notice signal (semantics.md#notices-listener): background work that puts notices in the
//! listener's outbox tells the host's signal once every lock is released; notices queued on a
//! thread the host marked as its own (its calls, followed by its own look at the outbox) are
//! not signalled; close releases the signal.

mod two_stores;

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use session_awareness_core::{mark_caller_thread, Hooks, NoticeSignal, Options, Provenance, Store};
use two_stores::{db, human, open, opts, record, NOW, T, W};

/// Sends the outbox's size, read on the signalling thread, for every signal.
struct Told(Mutex<mpsc::Sender<usize>>, Mutex<Option<Arc<Store>>>);

impl NoticeSignal for Told {
    fn entered(&self) {
        // Every lock is released: the outbox can be read from here.
        let size = self
            .1
            .lock()
            .unwrap()
            .as_ref()
            .map_or(0, |s| s.take_entered_notices().len());
        let _ = self.0.lock().unwrap().send(size);
    }
}

fn listening(path: &str, sync_interval_ms: u32) -> Store {
    let o = Options {
        notice_outbox: true,
        ..opts(sync_interval_ms)
    };
    Store::open(path, o, Hooks::default()).unwrap()
}

#[test]
fn the_background_poll_signals_the_notices_it_queued_and_a_marked_thread_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let b = Arc::new(listening(&db(&dir), 20));
    let (tx, rx) = mpsc::channel();
    let told = Arc::new(Told(Mutex::new(tx), Mutex::new(Some(Arc::clone(&b)))));
    b.set_notice_signal(Some(Arc::clone(&told) as Arc<dyn NoticeSignal>));
    // The host's own thread: the watch and a record there queue a notice, unsignalled.
    mark_caller_thread();
    assert!(b.watch(W, T, Provenance::Explicit, NOW).unwrap());
    record(&b, human(T));
    assert_eq!(b.take_entered_notices().len(), 1);
    assert_eq!(b.drain(W, NOW).unwrap().len(), 1);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    // Another process records: B's background poll queues the notice and signals it, with the
    // notice already in the outbox.
    record(&a, human(T));
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    // A thread the host did not mark signals what it queued, after its call's locks are gone.
    assert_eq!(b.drain(W, NOW).unwrap().len(), 1);
    let b2 = Arc::clone(&b);
    thread::spawn(move || record(&b2, human(T))).join().unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
    *told.1.lock().unwrap() = None;
}

#[test]
fn close_releases_the_signal_and_a_closed_store_takes_none() {
    let dir = tempfile::tempdir().unwrap();
    let b = listening(&db(&dir), 0);
    let (tx, _rx) = mpsc::channel();
    let told = Arc::new(Told(Mutex::new(tx), Mutex::new(None)));
    b.set_notice_signal(Some(Arc::clone(&told) as Arc<dyn NoticeSignal>));
    assert_eq!(Arc::strong_count(&told), 2);
    b.set_notice_signal(None);
    assert_eq!(Arc::strong_count(&told), 1);
    b.set_notice_signal(Some(Arc::clone(&told) as Arc<dyn NoticeSignal>));
    b.close();
    assert_eq!(Arc::strong_count(&told), 1);
    b.set_notice_signal(Some(Arc::clone(&told) as Arc<dyn NoticeSignal>));
    assert_eq!(Arc::strong_count(&told), 1);
}

#[test]
fn a_signal_set_while_the_outbox_holds_notices_is_told_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = Arc::new(listening(&db(&dir), 0));
    assert!(b.watch(W, T, Provenance::Explicit, NOW).unwrap());
    record(&b, human(T));
    let (tx, rx) = mpsc::channel();
    let told = Arc::new(Told(Mutex::new(tx), Mutex::new(Some(Arc::clone(&b)))));
    // Registered on the host's own thread, after the notice entered: told all the same.
    mark_caller_thread();
    b.set_notice_signal(Some(Arc::clone(&told) as Arc<dyn NoticeSignal>));
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
    // With the outbox empty, registering again tells nothing.
    b.set_notice_signal(Some(Arc::clone(&told) as Arc<dyn NoticeSignal>));
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    *told.1.lock().unwrap() = None;
}
