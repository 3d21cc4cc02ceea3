// Package mongodb is the built-in MongoDB sink (path = "builtin:mongodb"), a drop-in for
// Iggy's mongodb_sink: the same plugin_config keys, defaults and document shape (payload
// and the iggy_* metadata fields), written with the official Go driver.
//
// Guarantee: exactly once, by _id. Each document's _id is derived from its message —
// "stream:topic:partition:message_id", upstream's scheme, or, for a message whose id is 0
// (a producer that set none, a server that assigned none), "stream:topic:partition:offset-N"
// — so a message written again after a crash or a retry lands on the document it already
// wrote. Documents are inserted unordered, batch_size at a time; a duplicate-key refusal
// of a document whose _id is already in the collection counts as written, any other
// refusal of one document (a validator, a unique index of the user's) hands that message
// alone to on_failure (sdk.RejectedMessages). The sink commits a partition's offset
// (sink_controlled, its only mode) once every document up to it was acknowledged with
// the write concern of connection_uri (w=0 is refused), never before; of a batch with
// rejected messages it commits only the offsets below the first, and the runtime marks
// the rest done once on_failure handled them. Iggy's stored offset may lag what the
// collection holds: what is delivered again is taken as written.
//
// It imports only the sdk and the MongoDB driver.
package mongodb
