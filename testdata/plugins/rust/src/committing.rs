//! The committing sink: a Rust twin of examples/plugins/c/committing_sink.c written the way a
//! plugin built with Iggy's SDK would commit, through the ferry-commit crate.
//!
//! Config: {"path": "<file>", "flush_interval_ms": 50, "codes_out": "<file>"}. consume appends
//! each payload plus '\n' to a buffer and remembers the highest buffered offset per
//! (stream, topic, partition) BY NAME (what an SDK plugin sees). A thread, every
//! flush_interval_ms, writes the buffer, fsyncs, and only then commits each partition with
//! CommitHandle::commit_topic. consume also checks that the ids Ferry announced through
//! iggy_sink_set_topic_ids equal the ids appended to the raw TopicMetadata, and fails the batch
//! if not. With codes_out, the first flush that commits also tries the refused cases (the same
//! offset again, an offset beyond the batch, a partition it does not own) and writes one JSON
//! line per attempt to codes_out.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use ferry_commit::{CommitError, CommitHandle};
use serde::Deserialize;
use serde_json::json;

use crate::{log, LogCb, MessagesMetadata, RawMessages, TopicMetadata};

#[derive(Deserialize)]
pub struct Config {
    path: String,
    #[serde(default = "default_flush")]
    flush_interval_ms: u64,
    #[serde(default)]
    codes_out: Option<String>,
}

fn default_flush() -> u64 {
    100
}

type PartKey = (String, String, u32);

#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    parts: HashMap<PartKey, u64>,
    stop: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
}

pub struct Instance {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

fn instances() -> &'static Mutex<HashMap<u32, Instance>> {
    static S: OnceLock<Mutex<HashMap<u32, Instance>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

pub fn open(id: u32, cfg: Config, log_cb: LogCb) -> i32 {
    let mut m = instances().lock().unwrap();
    if m.contains_key(&id) {
        return -1;
    }
    let file = match OpenOptions::new().create(true).append(true).open(&cfg.path) {
        Ok(f) => f,
        Err(e) => {
            log(log_cb, 4, &format!("open {}: {e}", cfg.path));
            return 1;
        }
    };
    let shared = Arc::new(Shared { pending: Mutex::new(Pending::default()), wake: Condvar::new() });
    let every = Duration::from_millis(cfg.flush_interval_ms.max(1));
    let flusher = Flusher { id, file, handle: CommitHandle::new(id), codes_out: cfg.codes_out, log_cb };
    let sh = Arc::clone(&shared);
    let thread = std::thread::spawn(move || flusher.run(&sh, every));
    m.insert(id, Instance { shared, thread: Some(thread) });
    log(log_cb, 2, &format!("rust committing sink {id} writes to {}, fsync every {} ms", cfg.path, cfg.flush_interval_ms));
    0
}

pub fn is_open(id: u32) -> bool {
    instances().lock().unwrap().contains_key(&id)
}

pub fn consume(id: u32, tm: &[u8], mm: &[u8], ms: &[u8]) -> i32 {
    let shared = match instances().lock().unwrap().get(&id) {
        Some(i) => Arc::clone(&i.shared),
        None => return -1,
    };
    let (Ok(topic), Ok(meta), Ok(raw)) = (
        postcard::from_bytes::<TopicMetadata>(tm),
        postcard::from_bytes::<MessagesMetadata>(mm),
        postcard::from_bytes::<RawMessages>(ms),
    ) else {
        return -1;
    };
    // The ids announced by name must be the ids appended to the raw metadata.
    let announced = CommitHandle::new(id).topic_ids(&topic.stream, &topic.topic);
    if announced.is_none() || announced != ferry_commit::topic_ids(tm) {
        return 1;
    }
    let mut p = shared.pending.lock().unwrap();
    for m in &raw.messages {
        p.buf.extend_from_slice(&m.payload);
        p.buf.push(b'\n');
        let e = p.parts.entry((topic.stream.clone(), topic.topic.clone(), meta.partition_id)).or_insert(m.offset);
        *e = (*e).max(m.offset);
    }
    0
}

pub fn close(id: u32) -> i32 {
    let Some(mut inst) = instances().lock().unwrap().remove(&id) else {
        return -1;
    };
    inst.shared.pending.lock().unwrap().stop = true;
    inst.shared.wake.notify_all();
    if let Some(t) = inst.thread.take() {
        let _ = t.join();
    }
    CommitHandle::new(id).forget();
    0
}

struct Flusher {
    id: u32,
    file: File,
    handle: CommitHandle,
    codes_out: Option<String>,
    log_cb: LogCb,
}

impl Flusher {
    fn run(mut self, shared: &Shared, every: Duration) {
        loop {
            let (buf, parts, stop) = {
                let mut p = shared.pending.lock().unwrap();
                if !p.stop {
                    p = shared.wake.wait_timeout(p, every).unwrap().0;
                }
                (std::mem::take(&mut p.buf), std::mem::take(&mut p.parts), p.stop)
            };
            self.flush(&buf, parts);
            if stop {
                return;
            }
        }
    }

    /// Writes and fsyncs buf, then commits each partition's highest written offset.
    fn flush(&mut self, buf: &[u8], parts: HashMap<PartKey, u64>) {
        if parts.is_empty() {
            return;
        }
        if let Err(e) = self.file.write_all(buf).and_then(|_| self.file.sync_all()) {
            log(self.log_cb, 4, &format!("write or fsync failed: {e}; nothing committed"));
            return;
        }
        for ((stream, topic, partition), offset) in parts {
            let r = self.handle.commit_topic(&stream, &topic, partition, offset);
            if let Err(e) = r {
                log(self.log_cb, 3, &format!("commit {stream}/{topic}/{partition} offset {offset}: {e}"));
            }
            if r.is_ok() {
                if let Some(path) = self.codes_out.take() {
                    self.probe_codes(&path, &stream, &topic, partition, offset);
                }
            }
        }
    }

    /// The refused commits, each once, right after an accepted commit of `offset`.
    fn probe_codes(&self, path: &str, stream: &str, topic: &str, partition: u32, offset: u64) {
        let (sid, tid) = self.handle.topic_ids(stream, topic).unwrap_or((0, 0));
        let attempts: [(&str, Result<(), CommitError>); 4] = [
            ("same_offset", self.handle.commit_topic(stream, topic, partition, offset)),
            ("beyond_delivered", self.handle.commit(sid, tid, partition, offset + 1_000_000)),
            ("unowned_partition", self.handle.commit(sid, tid, 4242, 0)),
            ("unknown_topic", self.handle.commit_topic(stream, "no-such-topic", partition, offset)),
        ];
        let mut out = String::new();
        for (case, r) in attempts {
            let (error, code) = match r {
                Ok(()) => ("ok".to_string(), Some(0)),
                Err(e) => (format!("{e:?}"), e.code()),
            };
            out.push_str(&json!({"plugin_id": self.id, "case": case, "error": error, "code": code}).to_string());
            out.push('\n');
        }
        if let Err(e) = std::fs::write(path, out) {
            log(self.log_cb, 4, &format!("write {path}: {e}"));
        }
    }
}
