//! A TCP proxy the fault tests control, between a store and its PostgreSQL server on
//! loopback: it forwards bytes both ways until told to freeze the link (nothing passes, the
//! sockets stay open, as on a cut link), to cut every connection and refuse new ones (a server
//! out of reach), or to cut a connection right around the next `COMMIT` it carries (the
//! commit's answer lost). Standard library only: a thread per direction of each connection.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What to do with the next `COMMIT` a client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitCut {
    /// Forward it, then cut the connection: the server commits, the answer is lost.
    After,
    /// Cut the connection without forwarding it: the server rolls back, the answer is lost.
    Before,
}

#[derive(Default)]
struct Control {
    frozen: AtomicBool,
    down: AtomicBool,
    /// 0: none; 1: after; 2: before.
    commit_cut: AtomicUsize,
    cuts_done: AtomicUsize,
    connections: Mutex<Vec<TcpStream>>,
}

/// The proxy: [`Proxy::port`] is where the store connects.
pub struct Proxy {
    port: u16,
    control: Arc<Control>,
}

impl Proxy {
    /// A proxy to `127.0.0.1:upstream`, on a free loopback port.
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let control = Arc::new(Control::default());
        let c = Arc::clone(&control);
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if c.down.load(Ordering::Acquire) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut all = c.connections.lock().unwrap();
                    all.push(client.try_clone().unwrap());
                    all.push(server.try_clone().unwrap());
                }
                let pair = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let up = Arc::clone(&c);
                thread::spawn(move || pump(client, server, &up, true));
                let down = Arc::clone(&c);
                thread::spawn(move || pump(pair.1, pair.0, &down, false));
            }
        });
        Proxy { port, control }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops (`true`) or resumes (`false`) every byte both ways; the sockets stay open.
    pub fn freeze(&self, on: bool) {
        self.control.frozen.store(on, Ordering::Release);
    }

    /// Cuts every connection and refuses new ones (`true`), or accepts them again (`false`).
    pub fn down(&self, on: bool) {
        self.control.down.store(on, Ordering::Release);
        if on {
            self.cut_all();
        }
    }

    /// Cuts every open connection (both sides).
    pub fn cut_all(&self) {
        for s in self.control.connections.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Arms a cut at the next `COMMIT` a client sends.
    pub fn cut_at_next_commit(&self, how: CommitCut) {
        let v = match how {
            CommitCut::After => 1,
            CommitCut::Before => 2,
        };
        self.control.commit_cut.store(v, Ordering::Release);
    }

    /// How many armed commit cuts happened.
    pub fn commit_cuts(&self) -> usize {
        self.control.cuts_done.load(Ordering::Acquire)
    }
}

/// Copies `from` to `to` until either ends; `upstream` is the client-to-server direction,
/// where a `COMMIT` is looked for.
fn pump(mut from: TcpStream, mut to: TcpStream, c: &Control, upstream: bool) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while c.frozen.load(Ordering::Acquire) {
            thread::sleep(Duration::from_millis(5));
        }
        let chunk = &buf[..n];
        // A simple-protocol query `COMMIT` (the store commits with it).
        let commit = upstream && contains(chunk, b"COMMIT\0");
        let cut = match commit {
            true => c.commit_cut.swap(0, Ordering::AcqRel),
            false => 0,
        };
        if cut == 2 {
            // Only what came before the COMMIT message ('Q', its length, the text) goes through.
            let at = find(chunk, b"COMMIT\0").unwrap_or(0);
            let _ = to.write_all(&chunk[..at.saturating_sub(5)]);
        } else if to.write_all(chunk).is_err() {
            break;
        }
        if cut != 0 {
            c.cuts_done.fetch_add(1, Ordering::AcqRel);
            // The server has the bytes before the cut (a FIN follows them).
            let _ = to.shutdown(Shutdown::Both);
            let _ = from.shutdown(Shutdown::Both);
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}
