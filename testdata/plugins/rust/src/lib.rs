//! Test-only Iggy connector plugin for Ferry's golden tests.
//!
//! The boundary structs below are written from the postcard layouts in include/iggy_connector.h with the
//! UPSTREAM field order and WITHOUT Ferry's extension fields (TopicMetadata has only the two
//! names). Decoding uses `postcard::from_bytes`, as the official SDK does, so this proves that
//! a plugin built against the old layout decodes Ferry's extended buffers.
//!
//! Sink: config {"out": "<file>", "fail_consume": false}. Every consume appends one JSON line
//! to `out` describing exactly what was decoded. A config with "path" instead opens the
//! committing sink of committing.rs (sink_controlled through the ferry-commit crate). Source (G4): config {"count": N}; produces N
//! single-message batches, state = next counter as 8 LE bytes.

use std::collections::{BTreeMap, HashMap};
use std::fs::OpenOptions;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

mod committing;

ferry_commit::export_commit_symbols!();

// ---- boundary types (upstream layout) ----

#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub enum Schema {
    Json,
    Raw,
    Text,
    Proto,
    FlatBuffer,
    Avro,
}

#[derive(Deserialize, Debug)]
pub struct TopicMetadata {
    pub stream: String,
    pub topic: String,
}

#[derive(Deserialize, Debug)]
pub struct MessagesMetadata {
    pub partition_id: u32,
    pub current_offset: u64,
    pub schema: Schema,
}

#[derive(Deserialize, Debug)]
pub struct RawMessages {
    pub schema: Schema,
    pub messages: Vec<RawMessage>,
}

#[derive(Deserialize, Debug)]
pub struct RawMessage {
    pub id: u128,
    pub offset: u64,
    pub checksum: u64,
    pub timestamp: u64,
    pub origin_timestamp: u64,
    pub headers: Vec<u8>,
    pub payload: Vec<u8>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeaderKind {
    Raw,
    String,
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    Int128,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Uint128,
    Float32,
    Float64,
}

/// HeaderField as it is on the wire: the value is a Base64 String (serde_with's Base64).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeaderField {
    pub kind: HeaderKind,
    pub value: String,
}

#[derive(Serialize, Debug)]
pub struct ProducedMessage {
    pub id: Option<u128>,
    pub checksum: Option<u64>,
    pub timestamp: Option<u64>,
    pub origin_timestamp: Option<u64>,
    pub headers: Option<BTreeMap<HeaderField, HeaderField>>,
    pub payload: Vec<u8>,
}

#[derive(Serialize, Debug)]
pub struct ConnectorState(pub Vec<u8>);

#[derive(Serialize, Debug)]
pub struct ProducedMessages {
    pub schema: Schema,
    pub messages: Vec<ProducedMessage>,
    pub state: Option<ConnectorState>,
}

// ---- C types ----

pub(crate) type LogCb = extern "C" fn(u8, *const u8, usize, *const u8, usize);
type SendCbV2 = extern "C" fn(u32, u64, *const u8, usize) -> i32;

pub(crate) fn slice<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

pub(crate) fn log(cb: LogCb, level: u8, msg: &str) {
    let target = "ferry_test_plugin";
    cb(level, target.as_ptr(), target.len(), msg.as_ptr(), msg.len());
}

// ---- sink ----

#[derive(Deserialize)]
struct SinkConfig {
    out: String,
    #[serde(default)]
    fail_consume: bool,
}

fn sinks() -> &'static Mutex<HashMap<u32, SinkConfig>> {
    static S: OnceLock<Mutex<HashMap<u32, SinkConfig>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

#[no_mangle]
pub extern "C" fn iggy_sink_open(id: u32, cfg: *const u8, cfg_len: usize, log_cb: LogCb) -> i32 {
    let raw = slice(cfg, cfg_len);
    if serde_json::from_slice::<Value>(raw).is_ok_and(|v| v.get("path").is_some()) {
        return match serde_json::from_slice::<committing::Config>(raw) {
            Ok(c) if !sinks().lock().unwrap().contains_key(&id) => committing::open(id, c, log_cb),
            Ok(_) => -1,
            Err(e) => {
                log(log_cb, 4, &format!("bad config: {e}"));
                -1
            }
        };
    }
    let cfg: SinkConfig = match serde_json::from_slice(raw) {
        Ok(c) => c,
        Err(e) => {
            log(log_cb, 4, &format!("bad config: {e}"));
            return -1;
        }
    };
    let mut m = sinks().lock().unwrap();
    if m.contains_key(&id) || committing::is_open(id) {
        return -1;
    }
    m.insert(id, cfg);
    log(log_cb, 2, &format!("opened sink id={id}"));
    0
}

fn field_json(f: &HeaderField) -> Value {
    match STANDARD.decode(&f.value) {
        Ok(raw) => json!({"kind": f.kind as u8, "value": raw}),
        Err(e) => json!({"kind": f.kind as u8, "error": e.to_string()}),
    }
}

fn decode_all(tm: &[u8], mm: &[u8], ms: &[u8]) -> Result<Value, String> {
    let topic: TopicMetadata = postcard::from_bytes(tm).map_err(|e| format!("topic: {e}"))?;
    let meta: MessagesMetadata = postcard::from_bytes(mm).map_err(|e| format!("meta: {e}"))?;
    let raw: RawMessages = postcard::from_bytes(ms).map_err(|e| format!("messages: {e}"))?;
    let mut msgs = Vec::new();
    for m in &raw.messages {
        let headers = if m.headers.is_empty() {
            Value::Null
        } else {
            let map: BTreeMap<HeaderField, HeaderField> =
                postcard::from_bytes(&m.headers).map_err(|e| format!("headers: {e}"))?;
            Value::Array(map.iter().map(|(k, v)| json!({"key": field_json(k), "value": field_json(v)})).collect())
        };
        msgs.push(json!({
            "id": m.id.to_string(),
            "offset": m.offset,
            "checksum": m.checksum,
            "timestamp": m.timestamp,
            "origin_timestamp": m.origin_timestamp,
            "headers": headers,
            "payload": m.payload,
        }));
    }
    Ok(json!({
        "stream": topic.stream,
        "topic": topic.topic,
        "topic_meta_len": tm.len(),
        "partition_id": meta.partition_id,
        "current_offset": meta.current_offset,
        "schema": meta.schema as u8,
        "raw_schema": raw.schema as u8,
        "messages": msgs,
    }))
}

#[no_mangle]
pub extern "C" fn iggy_sink_consume(
    id: u32,
    tm: *const u8,
    tml: usize,
    mm: *const u8,
    mml: usize,
    ms: *const u8,
    msl: usize,
) -> i32 {
    if committing::is_open(id) {
        return committing::consume(id, slice(tm, tml), slice(mm, mml), slice(ms, msl));
    }
    let m = sinks().lock().unwrap();
    let Some(cfg) = m.get(&id) else { return -1 };
    let (line, code) = match decode_all(slice(tm, tml), slice(mm, mml), slice(ms, msl)) {
        Ok(mut v) => {
            v["plugin_id"] = json!(id);
            (v, if cfg.fail_consume { 1 } else { 0 })
        }
        Err(e) => (json!({"plugin_id": id, "error": e}), -1),
    };
    let mut f = match OpenOptions::new().create(true).append(true).open(&cfg.out) {
        Ok(f) => f,
        Err(_) => return 1,
    };
    if writeln!(f, "{line}").is_err() {
        return 1;
    }
    code
}

#[no_mangle]
pub extern "C" fn iggy_sink_close(id: u32) -> i32 {
    if committing::is_open(id) {
        return committing::close(id);
    }
    // Ferry announces topic ids to every instance of a library that exports
    // iggy_sink_set_topic_ids, so the plain sink has an entry in the crate's registry too.
    ferry_commit::CommitHandle::new(id).forget();
    match sinks().lock().unwrap().remove(&id) {
        Some(_) => 0,
        None => -1,
    }
}

#[no_mangle]
pub extern "C" fn iggy_sink_version() -> *const std::os::raw::c_char {
    c"0.1.0-ferry-test".as_ptr()
}

// ---- source (G4) ----

#[derive(Deserialize)]
struct SourceConfig {
    count: u64,
}

struct SourceShared {
    // (stop, pending batch id, result: None = waiting, Some(0) ack, Some(1) nack)
    state: Mutex<(bool, u64, Option<u8>)>,
    cond: Condvar,
}

struct SourceInstance {
    next: u64,
    count: u64,
    shared: Arc<SourceShared>,
    thread: Option<JoinHandle<()>>,
}

fn sources() -> &'static Mutex<HashMap<u32, SourceInstance>> {
    static S: OnceLock<Mutex<HashMap<u32, SourceInstance>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

#[no_mangle]
pub extern "C" fn iggy_source_open(
    id: u32,
    cfg: *const u8,
    cfg_len: usize,
    state: *const u8,
    state_len: usize,
    log_cb: LogCb,
) -> i32 {
    let cfg: SourceConfig = match serde_json::from_slice(slice(cfg, cfg_len)) {
        Ok(c) => c,
        Err(_) => return -1,
    };
    let mut next = 0;
    if !state.is_null() {
        let s = slice(state, state_len);
        if s.len() == 8 {
            next = u64::from_le_bytes(s.try_into().unwrap());
        }
    }
    let shared = Arc::new(SourceShared { state: Mutex::new((false, 0, None)), cond: Condvar::new() });
    let mut m = sources().lock().unwrap();
    if m.contains_key(&id) {
        return -1;
    }
    m.insert(id, SourceInstance { next, count: cfg.count, shared, thread: None });
    log(log_cb, 2, &format!("opened source id={id} next={next}"));
    0
}

fn batch(n: u64) -> Vec<u8> {
    let mut headers = BTreeMap::new();
    headers.insert(
        HeaderField { kind: HeaderKind::String, value: STANDARD.encode("n") },
        HeaderField { kind: HeaderKind::Uint64, value: STANDARD.encode(n.to_le_bytes()) },
    );
    let p = ProducedMessages {
        schema: Schema::Text,
        messages: vec![ProducedMessage {
            id: Some(1000 + n as u128 + (1u128 << 100)),
            checksum: None,
            timestamp: None,
            origin_timestamp: Some(42),
            headers: Some(headers),
            payload: format!("rust-{n}").into_bytes(),
        }],
        state: Some(ConnectorState((n + 1).to_le_bytes().to_vec())),
    };
    postcard::to_allocvec(&p).expect("encode")
}

fn produce(id: u32, mut next: u64, count: u64, sh: Arc<SourceShared>, cb: SendCbV2) {
    let mut batch_id = 0u64;
    while next < count {
        let buf = batch(next);
        batch_id += 1;
        {
            let mut st = sh.state.lock().unwrap();
            if st.0 {
                return;
            }
            st.1 = batch_id;
            st.2 = None;
        }
        let rc = cb(id, batch_id, buf.as_ptr(), buf.len());
        let mut st = sh.state.lock().unwrap();
        if rc != 0 {
            st.2 = Some(1);
        }
        while st.2.is_none() && !st.0 {
            st = sh.cond.wait_timeout(st, Duration::from_millis(100)).unwrap().0;
        }
        if st.0 {
            return;
        }
        let acked = st.2 == Some(0);
        st.1 = 0;
        drop(st);
        if acked {
            next += 1;
        } else {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[no_mangle]
pub extern "C" fn iggy_source_handle_v2(id: u32, cb: SendCbV2) -> i32 {
    let mut m = sources().lock().unwrap();
    let Some(inst) = m.get_mut(&id) else { return -1 };
    if inst.thread.is_some() {
        return -1;
    }
    let (next, count, sh) = (inst.next, inst.count, inst.shared.clone());
    inst.thread = Some(std::thread::spawn(move || produce(id, next, count, sh, cb)));
    0
}

#[no_mangle]
pub extern "C" fn iggy_source_batch_result(id: u32, batch_id: u64, result: u8) -> i32 {
    let sh = match sources().lock().unwrap().get(&id) {
        Some(i) => i.shared.clone(),
        None => return -1,
    };
    let mut st = sh.state.lock().unwrap();
    if st.1 == 0 || st.1 != batch_id || st.2.is_some() {
        return -1;
    }
    st.2 = Some(if result == 0 { 0 } else { 1 });
    sh.cond.notify_all();
    if result > 1 {
        -1
    } else {
        0
    }
}

#[no_mangle]
pub extern "C" fn iggy_source_close(id: u32) -> i32 {
    let Some(mut inst) = sources().lock().unwrap().remove(&id) else { return -1 };
    {
        let mut st = inst.shared.state.lock().unwrap();
        st.0 = true;
        inst.shared.cond.notify_all();
    }
    if let Some(t) = inst.thread.take() {
        let _ = t.join();
    }
    0
}

#[no_mangle]
pub extern "C" fn iggy_source_version() -> *const std::os::raw::c_char {
    c"0.1.0-ferry-test".as_ptr()
}
