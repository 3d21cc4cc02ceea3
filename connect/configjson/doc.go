// Package configjson is the JSON form of connector configs in the HTTP API: [SinkJSON] and
// [SourceJSON] render a config as Iggy's SinkConfig and SourceConfig objects (Ferry's keys
// after upstream's, plugin_config secrets redacted), and [BodyToTOML] and
// [ConnectorFromJSON] read a create body, or a config a remote provider serves, as a
// connector file, with the same checks.
//
// In these forms batch_length, poll_interval, linger_time and consumer_group give the value
// in effect where upstream echoes the file (null when unset), and a create body whose
// plugin_config holds a null is refused, since the TOML file written for it cannot hold one.
//
// It does no I/O. It imports connect/config and the sdk only of Ferry.
package configjson
