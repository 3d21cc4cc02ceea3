package source

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestConfigDefaults: a plugin_config with upstream's required keys only gets upstream's
// defaults (and Ferry's for its own keys).
func TestConfigDefaults(t *testing.T) {
	c, err := Config.Parse([]byte(`{"connection_string":"postgres://u@h/db","mode":"cdc","tables":["orders"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Mode, c.Tables, c.PollInterval, c.BatchSize, c.TrackingColumn, c.MaxConnections, c.IncludeMetadata,
		c.ReplicationSlot, c.CaptureOperations, c.capture, c.CDCBackend, c.PayloadFormat, c.MaxRetries, c.RetryDelay,
		c.Publication, c.PartitionBy, c.StatusInterval, c.SnakeCaseColumns, c.DeleteAfterRead, c.VerboseLogging)
	want := fmt.Sprint(modeCDC, []string{"orders"}, 10*time.Second, 1000, "id", 10, true, "iggy_slot", []string{"INSERT", "UPDATE", "DELETE"},
		map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true}, "builtin", "bytea", 3, time.Second, "iggy_slot_pub", partitionByKey, time.Second,
		false, false, false)
	if got != want {
		t.Fatalf("defaults\n got %s\nwant %s", got, want)
	}
	c, err = Config.Parse([]byte(`{"connection_string":"x","mode":"POLLING","tables":["s.t"],"capture_operations":[" truncate "],
		"replication_slot":"s1","publication":"p","partition_by":"none","poll_interval":"250ms","retry_delay":"0"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != modePolling || !c.capture[opTruncate] || len(c.capture) != 1 || c.Publication != "p" || c.PartitionBy != partitionByNone ||
		c.PollInterval != 250*time.Millisecond || c.RetryDelay != 0 {
		t.Fatalf("config %+v", c)
	}
}

// TestConfigErrorsNameTheField: every value the source cannot run with is refused by
// `ferry check` (the same Parse), naming its key. A polling poll_interval of 0 was
// refused only at Open before.
func TestConfigErrorsNameTheField(t *testing.T) {
	const base = `"connection_string":"x","mode":"cdc","tables":["t"]`
	for cfg, want := range map[string]string{
		`{}`: "plugin_config.connection_string: required field is missing",
		`{"connection_string":"x","tables":["t"]}`:                  "plugin_config.mode: required field is missing",
		`{"connection_string":" ","mode":"cdc","tables":["t"]}`:     "plugin_config.connection_string: must not be empty",
		`{"connection_string":"x","mode":"wal","tables":["t"]}`:     `plugin_config.mode: unknown value "wal" (want cdc or polling)`,
		`{"connection_string":"x","mode":"cdc","tables":[]}`:        "plugin_config.tables: must name at least one table",
		`{"connection_string":"x","mode":"cdc","tables":["a.b.c"]}`: `plugin_config.tables: entry 0 "a.b.c": want name or schema.name`,
		`{` + base + `,"batch_size":0}`:                             "plugin_config.batch_size: 0 is below the minimum 1",
		`{` + base + `,"cdc_backend":"pg_replicate"}`:               `plugin_config.cdc_backend: unknown value "pg_replicate" (want builtin)`,
		`{` + base + `,"replication_slot":""}`:                      "plugin_config.replication_slot: must not be empty",
		`{` + base + `,"capture_operations":["INSERT","MERGE"]}`:    `plugin_config.capture_operations: entry 1 "MERGE": want INSERT, UPDATE, DELETE or TRUNCATE`,
		`{` + base + `,"partition_by":"row"}`:                       `plugin_config.partition_by: unknown value "row" (want key, table or none)`,
		`{` + base + `,"status_interval":"0s"}`:                     "plugin_config.status_interval: 0s is below the minimum 1ns",
		`{` + base + `,"retry_delay":"soon"}`:                       `plugin_config.retry_delay: want a duration like "1s" or "250ms", got "soon"`,
		`{` + base + `,"max_retries":-1}`:                           "plugin_config.max_retries: -1 is below the minimum 0",
		`{` + base + `,"slot":"x"}`:                                 "plugin_config.slot: unknown field",
		`{"connection_string":"x","mode":"polling","tables":["t"],"delete_after_read":true,"processed_column":"done"}`: "plugin_config.delete_after_read: set with processed_column",
		`{"connection_string":"x","mode":"polling","tables":["t"],"poll_interval":"0s"}`:                               "plugin_config.poll_interval: 0s: want a positive duration in polling mode",
	} {
		if _, err := Config.Parse([]byte(cfg)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", cfg, err, want)
		}
	}
	// In CDC mode polling's keys are not used: not refused.
	if _, err := Config.Parse([]byte(`{` + base + `,"poll_interval":"0s","delete_after_read":true,"processed_column":"done"}`)); err != nil {
		t.Fatal(err)
	}
}
