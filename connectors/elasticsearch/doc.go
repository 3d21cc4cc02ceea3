// Package elasticsearch is the built-in Elasticsearch and OpenSearch sink, path =
// "builtin:elasticsearch" in a [type = sink] connector file, a drop-in for upstream
// Iggy's elasticsearch_sink (its keys, defaults and document shape).
//
// Guarantee: exactly once in the index, by idempotent ids. Each message becomes one
// document whose _id is "stream:topic:partition:offset" (document_id = "offset", the
// default), written with the _bulk "index" action, which replaces a document of the same
// id: a batch indexed again after a crash or a retry leaves the same documents (the
// document carries the message's own timestamp, never the time of indexing), never a
// second copy. The sink runs only as offset_commit = "sink_controlled": a partition's
// offset is committed once the _bulk responses said that every message up to it landed
// (each item 2xx), never before. Items the cluster refuses for a while (429, 5xx) are
// sent again alone (sdk.Retry); items it refuses for good (a mapping conflict, a document
// it cannot parse) are that message's failure alone (sdk.RejectedMessages: on_failure),
// and only the offsets below the first of them are committed (the runtime marks the rest
// done once on_failure handled them). document_id = "none" lets the cluster pick ids, as
// upstream does: at least once (a replay duplicates).
//
// It speaks _bulk over net/http rather than a client library: the official
// go-elasticsearch client refuses a server that is not Elasticsearch (its product check)
// and opensearch-go does not claim Elasticsearch 8, while the few calls a sink needs
// (_bulk, HEAD and PUT of an index, GET /) are the same on both.
//
// It imports only sdk and the standard library.
package elasticsearch
