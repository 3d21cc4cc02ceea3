//! Sink-controlled commits for native sink plugins run by Ferry.
//!
//! Ferry stores a sink's offset only when the sink says its write is durable (offset_commit =
//! "sink_controlled"). A native plugin says it through a C callback that Ferry hands to
//! `iggy_sink_set_commit_callback` (see `include/iggy_connector.h`, FERRY EXTENSION 2). This
//! crate keeps that callback per plugin instance and wraps it in a [`CommitHandle`] whose
//! [`CommitHandle::commit`] returns a [`CommitError`] for each refusal code.
//!
//! The callback addresses a partition by numeric stream and topic ids. A plugin that decodes
//! the raw `TopicMetadata` buffer reads them with [`topic_ids`] (FERRY EXTENSION 1). A plugin
//! built with Iggy's connector SDK sees only the names; for it Ferry calls
//! `iggy_sink_set_topic_ids` before the first batch of each topic (FERRY EXTENSION 3), this
//! crate remembers them, and [`CommitHandle::commit_topic`] commits by name.
//!
//! Put [`export_commit_symbols!`] once in the plugin crate (next to Iggy's `sink_connector!`
//! if it uses the SDK) to export both symbols. The crate depends on nothing but the ABI.
//!
//! Under Iggy's own runtime neither symbol is ever called: [`CommitHandle::is_enabled`] is
//! false and every commit returns [`CommitError::NotEnabled`], so one plugin serves both
//! runtimes.

use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The commit callback's C type: `(plugin_id, stream_id, topic_id, partition_id, offset)`.
pub type CommitCallback = extern "C" fn(u32, u32, u32, u32, u64) -> i32;

/// Why a commit was not accepted. The variants map the callback's return codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitError {
    /// No callback for this instance: the runtime is not Ferry, the connector is not
    /// configured with offset_commit = "sink_controlled", or the instance was forgotten.
    NotEnabled,
    /// [`CommitHandle::commit_topic`] was given names Ferry has not announced for this
    /// instance (no batch of that topic was delivered yet).
    UnknownTopic,
    /// Code -1: the instance was closed or restarted, or the partition is no longer this
    /// sink's (stopped, rebalanced away). Nothing changed; the new owner redelivers.
    Gone,
    /// Code -2: the offset is at or below one already committed. Harmless for a sink that
    /// commits the same offset twice.
    Stale,
    /// Code -3: the offset is beyond what was delivered to this sink on that partition: a
    /// bug in the plugin's bookkeeping.
    OutOfRange,
    /// Code -4, or any code the ABI does not define (carried as is).
    Other(i32),
}

impl CommitError {
    /// Maps a return code of the commit callback: `Ok(())` for 0.
    pub fn from_code(code: i32) -> Result<(), CommitError> {
        match code {
            0 => Ok(()),
            -1 => Err(CommitError::Gone),
            -2 => Err(CommitError::Stale),
            -3 => Err(CommitError::OutOfRange),
            c => Err(CommitError::Other(c)),
        }
    }

    /// The callback's return code for this error (-1..-4); `NotEnabled` and `UnknownTopic`
    /// never reached the callback and have none.
    pub fn code(&self) -> Option<i32> {
        match self {
            CommitError::NotEnabled | CommitError::UnknownTopic => None,
            CommitError::Gone => Some(-1),
            CommitError::Stale => Some(-2),
            CommitError::OutOfRange => Some(-3),
            CommitError::Other(c) => Some(*c),
        }
    }
}

impl fmt::Display for CommitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommitError::NotEnabled => write!(f, "sink-controlled commits are not enabled for this instance"),
            CommitError::UnknownTopic => write!(f, "topic not announced by the runtime for this instance"),
            CommitError::Gone => write!(f, "instance or partition no longer owned (code -1)"),
            CommitError::Stale => write!(f, "offset already committed (code -2)"),
            CommitError::OutOfRange => write!(f, "offset beyond what was delivered (code -3)"),
            CommitError::Other(c) => write!(f, "commit refused (code {c})"),
        }
    }
}

impl std::error::Error for CommitError {}

#[derive(Default)]
struct Instance {
    callback: Option<CommitCallback>,
    topics: HashMap<(String, String), (u32, u32)>,
}

fn registry() -> MutexGuard<'static, HashMap<u32, Instance>> {
    static R: OnceLock<Mutex<HashMap<u32, Instance>>> = OnceLock::new();
    // A panic while the lock was held cannot leave the map half-written (every update is one
    // insert or remove), so a poisoned lock is still usable.
    R.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// A plugin instance's way to commit. Cheap to create and copy; it looks the callback up on
/// every commit, so a handle made before Ferry installed the callback works once it has.
/// Safe to use from any thread, concurrently; a commit never blocks on the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitHandle {
    plugin_id: u32,
}

impl CommitHandle {
    /// The handle of instance `plugin_id` (the id the runtime passed to `iggy_sink_open`;
    /// Iggy's SDK hands it to the sink's constructor).
    pub fn new(plugin_id: u32) -> Self {
        CommitHandle { plugin_id }
    }

    /// The instance id.
    pub fn plugin_id(&self) -> u32 {
        self.plugin_id
    }

    /// Whether the runtime installed a commit callback for this instance: Ferry with
    /// offset_commit = "sink_controlled".
    pub fn is_enabled(&self) -> bool {
        registry().get(&self.plugin_id).is_some_and(|i| i.callback.is_some())
    }

    /// Says that every message of the partition up to and including `offset` is durably
    /// written. Call it only after the write is durable; commit the highest such offset (a
    /// lower one is refused as [`CommitError::Stale`]).
    pub fn commit(&self, stream_id: u32, topic_id: u32, partition_id: u32, offset: u64) -> Result<(), CommitError> {
        let callback = registry().get(&self.plugin_id).and_then(|i| i.callback);
        let Some(cb) = callback else {
            return Err(CommitError::NotEnabled);
        };
        CommitError::from_code(cb(self.plugin_id, stream_id, topic_id, partition_id, offset))
    }

    /// [`commit`](Self::commit) by the stream and topic names a plugin built with Iggy's SDK
    /// sees in its `TopicMetadata`.
    pub fn commit_topic(&self, stream: &str, topic: &str, partition_id: u32, offset: u64) -> Result<(), CommitError> {
        let (stream_id, topic_id) = self.topic_ids(stream, topic).ok_or_else(|| {
            if self.is_enabled() {
                CommitError::UnknownTopic
            } else {
                CommitError::NotEnabled
            }
        })?;
        self.commit(stream_id, topic_id, partition_id, offset)
    }

    /// The ids Ferry announced for (stream, topic) to this instance, if any.
    pub fn topic_ids(&self, stream: &str, topic: &str) -> Option<(u32, u32)> {
        registry()
            .get(&self.plugin_id)
            .and_then(|i| i.topics.get(&(stream.to_owned(), topic.to_owned())).copied())
    }

    /// Drops what is kept for this instance. Call it at the end of the plugin's close, after
    /// its last commit; Ferry refuses later commits of a closed instance anyway (code -1).
    pub fn forget(&self) {
        registry().remove(&self.plugin_id);
    }
}

/// Reads Ferry's stream and topic ids appended after the two names of a raw `TopicMetadata`
/// buffer (the `topic_meta` argument of `iggy_sink_consume`). `None` when the buffer ends
/// after the names (Iggy's own runtime) or is malformed.
pub fn topic_ids(topic_meta: &[u8]) -> Option<(u32, u32)> {
    let mut r = Reader { buf: topic_meta };
    for _ in 0..2 {
        let n = usize::try_from(r.varint()?).ok()?;
        r.skip(n)?;
    }
    let stream_id = u32::try_from(r.varint()?).ok()?;
    let topic_id = u32::try_from(r.varint()?).ok()?;
    Some((stream_id, topic_id))
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    /// An unsigned LEB128 varint of at most 10 bytes (postcard's u64).
    fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first()?;
            self.buf = rest;
            let bits = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return None;
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        if n > self.buf.len() {
            return None;
        }
        self.buf = &self.buf[n..];
        Some(())
    }
}

/// The body of the exported `iggy_sink_set_commit_callback`; use [`export_commit_symbols!`].
#[doc(hidden)]
pub fn set_commit_callback(plugin_id: u32, callback: Option<CommitCallback>) -> i32 {
    guarded(|| {
        let Some(cb) = callback else {
            return -1;
        };
        registry().entry(plugin_id).or_default().callback = Some(cb);
        0
    })
}

/// The body of the exported `iggy_sink_set_topic_ids`; use [`export_commit_symbols!`].
///
/// # Safety
/// `stream` and `topic` must point to `stream_len` and `topic_len` readable bytes (any
/// pointer when the length is 0), as the ABI promises.
#[doc(hidden)]
pub unsafe fn set_topic_ids(
    plugin_id: u32,
    stream: *const u8,
    stream_len: usize,
    topic: *const u8,
    topic_len: usize,
    stream_id: u32,
    topic_id: u32,
) -> i32 {
    // SAFETY: the caller's contract.
    let (s, t) = unsafe { (bytes(stream, stream_len), bytes(topic, topic_len)) };
    guarded(|| {
        let (Ok(s), Ok(t)) = (std::str::from_utf8(s), std::str::from_utf8(t)) else {
            return -1;
        };
        registry()
            .entry(plugin_id)
            .or_default()
            .topics
            .insert((s.to_owned(), t.to_owned()), (stream_id, topic_id));
        0
    })
}

/// # Safety
/// `p` points to `n` readable bytes unless `n` is 0.
unsafe fn bytes<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// Runs f, turning a panic into code -4: a panic must never unwind into the runtime.
fn guarded(f: impl FnOnce() -> i32) -> i32 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(-4)
}

/// Exports `iggy_sink_set_commit_callback` and `iggy_sink_set_topic_ids` from the plugin
/// crate, storing what Ferry passes for [`CommitHandle`]. Use it once per cdylib, at the
/// crate root or in any module:
///
/// ```ignore
/// iggy_connector_sdk::sink_connector!(MySink); // when the plugin uses Iggy's SDK
/// ferry_commit::export_commit_symbols!();
/// ```
#[macro_export]
macro_rules! export_commit_symbols {
    () => {
        #[no_mangle]
        pub extern "C" fn iggy_sink_set_commit_callback(
            plugin_id: u32,
            callback: ::core::option::Option<$crate::CommitCallback>,
        ) -> i32 {
            $crate::set_commit_callback(plugin_id, callback)
        }

        /// # Safety
        /// Called by the runtime with valid buffers, as the plugin ABI promises.
        #[no_mangle]
        pub unsafe extern "C" fn iggy_sink_set_topic_ids(
            plugin_id: u32,
            stream: *const u8,
            stream_len: usize,
            topic: *const u8,
            topic_len: usize,
            stream_id: u32,
            topic_id: u32,
        ) -> i32 {
            // SAFETY: forwarded from the runtime's call.
            unsafe { $crate::set_topic_ids(plugin_id, stream, stream_len, topic, topic_len, stream_id, topic_id) }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};

    static NEXT_CODE: AtomicI32 = AtomicI32::new(0);
    static LAST: Mutex<Option<(u32, u32, u32, u32, u64)>> = Mutex::new(None);

    extern "C" fn fake(p: u32, s: u32, t: u32, pa: u32, o: u64) -> i32 {
        *LAST.lock().unwrap() = Some((p, s, t, pa, o));
        NEXT_CODE.load(Ordering::SeqCst)
    }

    #[test]
    fn codes_map_to_errors() {
        assert_eq!(CommitError::from_code(0), Ok(()));
        assert_eq!(CommitError::from_code(-1), Err(CommitError::Gone));
        assert_eq!(CommitError::from_code(-2), Err(CommitError::Stale));
        assert_eq!(CommitError::from_code(-3), Err(CommitError::OutOfRange));
        assert_eq!(CommitError::from_code(-4), Err(CommitError::Other(-4)));
        assert_eq!(CommitError::from_code(7), Err(CommitError::Other(7)));
        assert_eq!(CommitError::Stale.code(), Some(-2));
        assert_eq!(CommitError::NotEnabled.code(), None);
    }

    #[test]
    fn handle_routes_through_the_instance_callback() {
        let h = CommitHandle::new(9001);
        assert!(!h.is_enabled());
        assert_eq!(h.commit(1, 2, 3, 4), Err(CommitError::NotEnabled));
        assert_eq!(h.commit_topic("s", "t", 0, 1), Err(CommitError::NotEnabled));
        assert_eq!(set_commit_callback(9001, None), -1);
        assert_eq!(set_commit_callback(9001, Some(fake)), 0);
        assert!(h.is_enabled());
        assert_eq!(h.commit_topic("s", "t", 0, 1), Err(CommitError::UnknownTopic));
        let (s, t) = ("s".as_bytes(), "tópico".as_bytes());
        assert_eq!(unsafe { set_topic_ids(9001, s.as_ptr(), s.len(), t.as_ptr(), t.len(), 5, 6) }, 0);
        let bad = [0xffu8];
        assert_eq!(unsafe { set_topic_ids(9001, bad.as_ptr(), 1, t.as_ptr(), t.len(), 5, 6) }, -1);
        for (code, want) in [(0, Ok(())), (-1, Err(CommitError::Gone)), (-2, Err(CommitError::Stale)), (-3, Err(CommitError::OutOfRange)), (-4, Err(CommitError::Other(-4)))] {
            NEXT_CODE.store(code, Ordering::SeqCst);
            assert_eq!(h.commit_topic("s", "tópico", 2, 41), want);
            assert_eq!(*LAST.lock().unwrap(), Some((9001, 5, 6, 2, 41)));
        }
        assert_eq!(CommitHandle::new(9002).commit(1, 2, 3, 4), Err(CommitError::NotEnabled));
        h.forget();
        assert!(!h.is_enabled());
        assert_eq!(h.topic_ids("s", "tópico"), None);
    }

    #[test]
    fn topic_ids_read_ferry_extension() {
        // "s1", "t" then stream id 300 (varint 0xac 0x02) and topic id 7.
        let buf = [2, b's', b'1', 1, b't', 0xac, 0x02, 7];
        assert_eq!(topic_ids(&buf), Some((300, 7)));
        // Iggy's runtime: nothing after the names.
        assert_eq!(topic_ids(&buf[..5]), None);
        // Truncated varint, name longer than the buffer, id beyond u32.
        assert_eq!(topic_ids(&buf[..6]), None);
        assert_eq!(topic_ids(&[9, b'x']), None);
        let big = [0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 1];
        assert_eq!(topic_ids(&big), None);
    }

    #[test]
    fn panics_become_code_minus_4() {
        assert_eq!(guarded(|| panic!("boom")), -4);
    }
}
