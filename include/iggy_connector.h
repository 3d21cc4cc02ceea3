/*
 * iggy_connector.h — the native connector plugin ABI of Apache Iggy, as loaded by Ferry.
 *
 * A plugin is a shared library (.so) exporting the symbols below with the C calling
 * convention. Plugins built with Iggy's Rust connector SDK (ABI generations G3/G4) export
 * them already; a C/C++/Zig plugin includes this header and implements them.
 *
 * ---------------------------------------------------------------------------------------
 * SYMBOLS
 *
 *   Sink (all four required):
 *     iggy_sink_open, iggy_sink_consume, iggy_sink_close, iggy_sink_version
 *   Sink, optional Ferry extensions:
 *     iggy_sink_set_commit_callback, iggy_sink_set_topic_ids
 *   Source (required): iggy_source_open, iggy_source_close, iggy_source_version, and either
 *     G4: iggy_source_handle_v2 + iggy_source_batch_result   (preferred, ACK/NACK per batch)
 *     G3: iggy_source_handle                                 (fire and forget, no ACK)
 *   A library may export both the sink and the source set. The generic G1/G2 names (open,
 *   consume, close, handle, version) are NOT supported by Ferry.
 *
 * RETURN CODES (int32_t) of open/consume/close/handle/batch_result
 *    0  success
 *    1  the plugin's own logic failed (open() or consume() returned an error)
 *   -1  the input could not be used: unknown or duplicate instance id, config not UTF-8 or
 *       not parseable, a postcard buffer that did not decode, no batch pending (batch_result)
 *
 * INSTANCE IDS
 *   uint32_t chosen by the host, unique among live instances of one library. Ferry uses a
 *   process-global counter starting at 1 and a NEW id on every open (restart = new id).
 *
 * CALL ORDER
 *   sink:   version (any time) -> open -> consume x N (possibly concurrent, see THREADING)
 *           -> close. With the commit extension: open -> set_commit_callback -> consume ...
 *           If open fails the host calls close on the same id to release it.
 *   source: version -> open(state) -> handle_v2(send_cb) once
 *           -> [ plugin calls send_cb(id, batch_id, ...); host later calls
 *                batch_result(id, batch_id, 0|1) ]* -> close
 *
 * THREADING
 *   - Every export may block the calling host thread (open, consume, close, batch_result).
 *   - consume may be called concurrently for the SAME id: one caller per (stream, topic);
 *     calls for one (stream, topic) are sequential. Ferry only: a connector file with
 *     max_in_flight = N > 1 (the user's statement that the plugin allows it) lets up to N
 *     calls for one (stream, topic) run at once, for different partitions; the calls for
 *     one partition stay sequential and in order.
 *   - Callbacks (log, send, commit) may be called from any plugin thread, concurrently, and
 *     also from the host thread while it is inside an export. They are short and never block
 *     (a full G4 queue makes send return -1; the G3 send callback blocks while the host's
 *     queue is full and until close begins, which is Ferry's only back-pressure for G3).
 *   - NEVER call a plugin export from inside a callback, and the host never does either.
 *   - iggy_source_close waits for the plugin's producing thread; Ferry stops accepting
 *     batches before calling it, so the send callback cannot hold close up.
 *
 * MEMORY OWNERSHIP
 *   Nothing allocated by one side is freed by the other; there is no free function.
 *   - cfg, state, topic_meta, msgs_meta, msgs: owned by the host, valid only during the call;
 *     never NULL (a valid dummy pointer when the length is 0), except state == NULL which
 *     means "no saved state" (state_len is then 0 and must be ignored).
 *   - send-callback messages, log target/message: owned by the plugin, valid only during the
 *     callback; the host copies them. A zero length may come with any pointer.
 *   - the version string: static, NUL-terminated, owned by the plugin, never freed.
 *   No buffer is NUL-terminated except the version string.
 *
 * POSTCARD LAYOUTS (postcard 1.1, serde field order)
 *   varint: unsigned LEB128, least significant group first; usize/lengths are u64 varints.
 *   String / Vec<u8>: varint length + bytes.   Option<T>: 0x00 | 0x01 T.
 *   Schema (unit enum, varint index): 0 json, 1 raw, 2 text, 3 proto, 4 flat_buffer, 5 avro.
 *   TopicMetadata   : stream String, topic String, [Ferry: stream_id u32, topic_id u32]
 *   MessagesMetadata: partition_id u32, current_offset u64 (partition high-water mark, not
 *                     the batch end), schema
 *   RawMessages     : schema, count, RawMessage x count
 *   RawMessage      : id u128, offset u64, checksum u64, timestamp u64, origin_timestamp u64,
 *                     headers Vec<u8> (EMPTY = no headers, else a nested header map),
 *                     payload Vec<u8>
 *   header map      : count, then (key HeaderField, value HeaderField) x count, sorted by
 *                     key kind then raw key bytes
 *   HeaderField     : kind varint (0-based: Iggy wire code - 1; 0 raw, 1 string, 2 bool,
 *                     3 i8, 4 i16, 5 i32, 6 i64, 7 i128, 8 u8, 9 u16, 10 u32, 11 u64,
 *                     12 u128, 13 f32, 14 f64), value String = standard Base64 with padding
 *                     of the raw little-endian value bytes
 *   ProducedMessages: schema, count, ProducedMessage x count, state Option<Vec<u8>>
 *   ProducedMessage : id Option<u128>, checksum Option<u64>, timestamp Option<u64>,
 *                     origin_timestamp Option<u64>, headers Option<header map> (INLINE, not a
 *                     blob), payload Vec<u8>
 *   Decoders read one value and ignore trailing bytes (postcard::from_bytes).
 *
 * FERRY EXTENSION 1: appended ids in TopicMetadata
 *   Ferry appends stream_id (u32 varint) and topic_id (u32 varint) AFTER the two names of
 *   TopicMetadata. Plugins built with the upstream SDK decode with from_bytes and never see
 *   them; Ferry-aware plugins read them to address the commit callback. A decoder that finds
 *   no bytes after the topic name is talking to an upstream runtime.
 *
 * FERRY EXTENSION 2: sink-controlled commits
 *   int32_t iggy_sink_set_commit_callback(uint32_t plugin_id, iggy_commit_cb cb);
 *     Called by Ferry right after a successful iggy_sink_open and before the first consume,
 *     only when the connector runs with offset_commit = "sink_controlled" (a connector
 *     configured so is REFUSED if the plugin lacks this symbol). Return 0 when the callback
 *     was stored, -1 for an unknown id.
 *   The plugin later calls
 *     cb(plugin_id, stream_id, topic_id, partition_id, offset)
 *   to say that every message of that partition up to and including `offset` (Iggy offsets:
 *   the last DURABLY written message; consumption resumes at offset + 1) is safely stored.
 *   Any thread, any time, concurrently, during consume, after it, and during close. It never
 *   blocks (commits are queued and coalesced by Ferry). Return codes:
 *      0  accepted
 *     -1  unknown plugin id (instance closed/restarted), or the partition is not owned by
 *         this sink any more (stopped, rebalanced away); nothing changed
 *     -2  stale: offset at or below the offset already committed
 *     -3  out of range: offset beyond what was delivered to this sink on that partition
 *     -4  any other error
 *
 * FERRY EXTENSION 3: topic ids by name (optional)
 *   int32_t iggy_sink_set_topic_ids(uint32_t plugin_id, const uint8_t *stream,
 *                                   size_t stream_len, const uint8_t *topic, size_t topic_len,
 *                                   uint32_t stream_id, uint32_t topic_id);
 *     A plugin built with Iggy's SDK gets TopicMetadata decoded to the two names and never
 *     sees the ids of EXTENSION 1, which the commit callback needs. When the library exports
 *     this symbol, Ferry calls it once per (instance, stream, topic), from the consuming
 *     thread, right before the first iggy_sink_consume of that topic (again after a reopen:
 *     the new instance id is told again). The names are UTF-8, not NUL-terminated, valid
 *     during the call only. Return 0 when stored; any other value fails that batch as an
 *     iggy_sink_consume returning it would, and the next batch of the topic tells it again.
 *     Ferry's Rust crate ferry-commit (rust/ferry-commit) exports it, with the commit
 *     callback, in one macro.
 * ---------------------------------------------------------------------------------------
 */
#ifndef IGGY_CONNECTOR_H
#define IGGY_CONNECTOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Log levels of iggy_log_cb; any other value is treated as ERROR. */
enum {
    IGGY_LOG_TRACE = 0,
    IGGY_LOG_DEBUG = 1,
    IGGY_LOG_INFO = 2,
    IGGY_LOG_WARN = 3,
    IGGY_LOG_ERROR = 4
};

/* iggy_source_batch_result codes. */
enum { IGGY_BATCH_ACK = 0, IGGY_BATCH_NACK = 1 };

/* Commit callback return codes (Ferry extension). */
enum {
    IGGY_COMMIT_OK = 0,
    IGGY_COMMIT_UNKNOWN = -1,
    IGGY_COMMIT_STALE = -2,
    IGGY_COMMIT_OUT_OF_RANGE = -3,
    IGGY_COMMIT_ERROR = -4
};

/* ---- callbacks supplied by the host ---- */

/* Plugin log line. target: the emitting module; message may be empty. Copy to keep. The
 * first open on a library fixes which callback the SDK uses for all its instances, so a
 * host always passes the same function per library. */
typedef void (*iggy_log_cb)(uint8_t level, const uint8_t *target, size_t target_len,
                            const uint8_t *message, size_t message_len);

/* G4 send: messages is a postcard ProducedMessages. Returns 0 when the host took the batch
 * (it will later call iggy_source_batch_result with the same batch_id), non-zero when it
 * refused it (treat as NACK). batch_id starts at 1 and grows by one per batch handed over. */
typedef int32_t (*iggy_send_cb_v2)(uint32_t plugin_id, uint64_t batch_id,
                                   const uint8_t *messages, size_t messages_len);

/* G3 send: no batch id, no result; no flow control. */
typedef void (*iggy_send_cb_v1)(uint32_t plugin_id, const uint8_t *messages,
                                size_t messages_len);

/* Ferry extension: see FERRY EXTENSION 2 above. */
typedef int32_t (*iggy_commit_cb)(uint32_t plugin_id, uint32_t stream_id, uint32_t topic_id,
                                  uint32_t partition_id, uint64_t offset);

/* ---- sink ---- */

/* cfg: plugin_config as compact JSON ("null" when absent). 0 ok, -1 bad config/duplicate id,
 * 1 the plugin's open failed. */
int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, iggy_log_cb log);

/* One batch from one partition: postcard TopicMetadata, MessagesMetadata, RawMessages.
 * 0 ok, -1 unknown id or undecodable buffer, 1 the plugin failed to write the batch. */
int32_t iggy_sink_consume(uint32_t id, const uint8_t *topic_meta, size_t topic_meta_len,
                          const uint8_t *msgs_meta, size_t msgs_meta_len,
                          const uint8_t *msgs, size_t msgs_len);

/* Flush and release. 0 closed, -1 unknown id. The plugin may still call the commit
 * callback until this returns. */
int32_t iggy_sink_close(uint32_t id);

/* Static NUL-terminated version string. */
const char *iggy_sink_version(void);

/* Optional, Ferry extension. 0 stored, -1 unknown id. */
int32_t iggy_sink_set_commit_callback(uint32_t plugin_id, iggy_commit_cb cb);

/* Optional, Ferry extension 3. 0 stored; anything else fails the batch. */
int32_t iggy_sink_set_topic_ids(uint32_t plugin_id, const uint8_t *stream, size_t stream_len,
                                const uint8_t *topic, size_t topic_len, uint32_t stream_id,
                                uint32_t topic_id);

/* ---- source ---- */

/* state: saved state bytes, or NULL when there is none. */
int32_t iggy_source_open(uint32_t id, const uint8_t *cfg, size_t cfg_len,
                         const uint8_t *state, size_t state_len, iggy_log_cb log);

/* G4: start producing; returns immediately. Called once per open. 0 ok, -1 unknown id. */
int32_t iggy_source_handle_v2(uint32_t id, iggy_send_cb_v2 cb);

/* G4: outcome of batch batch_id: IGGY_BATCH_ACK (delivered to Iggy, state saved) or
 * IGGY_BATCH_NACK (not delivered; produce it again). Called from a host thread, never from
 * inside the send callback. 0 applied, -1 unknown id / no such pending batch / bad code. */
int32_t iggy_source_batch_result(uint32_t id, uint64_t batch_id, uint8_t result);

/* G3: start producing, fire and forget. */
int32_t iggy_source_handle(uint32_t id, iggy_send_cb_v1 cb);

/* Stop producing (waits for the producing thread) and release. 0 ok, -1 unknown id. */
int32_t iggy_source_close(uint32_t id);

/* Static NUL-terminated version string. */
const char *iggy_source_version(void);

/* Function pointer types of the exports, for hosts that resolve them with dlsym. */
typedef int32_t (*iggy_sink_open_fn)(uint32_t, const uint8_t *, size_t, iggy_log_cb);
typedef int32_t (*iggy_sink_consume_fn)(uint32_t, const uint8_t *, size_t, const uint8_t *,
                                        size_t, const uint8_t *, size_t);
typedef int32_t (*iggy_close_fn)(uint32_t);
typedef const char *(*iggy_version_fn)(void);
typedef int32_t (*iggy_sink_set_commit_callback_fn)(uint32_t, iggy_commit_cb);
typedef int32_t (*iggy_sink_set_topic_ids_fn)(uint32_t, const uint8_t *, size_t,
                                              const uint8_t *, size_t, uint32_t, uint32_t);
typedef int32_t (*iggy_source_open_fn)(uint32_t, const uint8_t *, size_t, const uint8_t *,
                                       size_t, iggy_log_cb);
typedef int32_t (*iggy_source_handle_v2_fn)(uint32_t, iggy_send_cb_v2);
typedef int32_t (*iggy_source_batch_result_fn)(uint32_t, uint64_t, uint8_t);
typedef int32_t (*iggy_source_handle_fn)(uint32_t, iggy_send_cb_v1);

#ifdef __cplusplus
}
#endif

#endif /* IGGY_CONNECTOR_H */
