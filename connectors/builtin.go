package connectors

import (
	"github.com/ferryio/ferry/connectors/elasticsearch"
	"github.com/ferryio/ferry/connectors/file"
	httpsink "github.com/ferryio/ferry/connectors/http"
	"github.com/ferryio/ferry/connectors/iceberg"
	iggysource "github.com/ferryio/ferry/connectors/iggy"
	"github.com/ferryio/ferry/connectors/kafka"
	kafkasource "github.com/ferryio/ferry/connectors/kafka/source"
	"github.com/ferryio/ferry/connectors/mongodb"
	"github.com/ferryio/ferry/connectors/mqtt"
	"github.com/ferryio/ferry/connectors/null"
	"github.com/ferryio/ferry/connectors/postgres"
	pgsource "github.com/ferryio/ferry/connectors/postgres/source"
	"github.com/ferryio/ferry/connectors/random"
	redissink "github.com/ferryio/ferry/connectors/redis"
	s3 "github.com/ferryio/ferry/connectors/s3"
	"github.com/ferryio/ferry/connectors/stdout"
	"github.com/ferryio/ferry/sdk"
)

// Registry returns a new registry holding every built-in connector: sinks "stdout", "null",
// "file", "postgres", "s3", "http", "mqtt", "kafka", "redis", "iceberg", "mongodb" and
// "elasticsearch",
// sources "random", "postgres" (change data capture), "mqtt", "kafka", "iggy" (another Iggy
// server) and "redis". Each call returns a fresh value the caller may extend.
func Registry() *sdk.Registry {
	return sdk.NewRegistry().
		AddSink(stdout.Name, func() sdk.Sink { return stdout.New() }, stdout.Spec).
		AddSink(null.Name, func() sdk.Sink { return null.New() }, null.Spec).
		AddSink(file.Name, func() sdk.Sink { return file.New() }, file.Spec).
		AddSink(postgres.Name, func() sdk.Sink { return postgres.New() }, postgres.Spec).
		AddSink(s3.Name, func() sdk.Sink { return s3.New() }, s3.Spec).
		AddSource(random.Name, func() sdk.Source { return random.New() }, random.Spec).
		AddSource(pgsource.Name, func() sdk.Source { return pgsource.New() }, pgsource.Spec).
		AddSink(httpsink.Name, func() sdk.Sink { return httpsink.New() }, httpsink.Spec).
		AddSink(mqtt.Name, func() sdk.Sink { return mqtt.NewSink() }, mqtt.SinkSpec).
		AddSource(mqtt.Name, func() sdk.Source { return mqtt.NewSource() }, mqtt.SourceSpec).
		AddSink(kafka.Name, func() sdk.Sink { return kafka.New() }, kafka.Spec).
		AddSource(kafkasource.Name, func() sdk.Source { return kafkasource.New() }, kafkasource.Spec).
		AddSink(redissink.Name, func() sdk.Sink { return redissink.New() }, redissink.Spec).
		AddSource(iggysource.Name, func() sdk.Source { return iggysource.New() }, iggysource.Spec).
		AddSource(redissink.Name, func() sdk.Source { return redissink.NewSource() }, redissink.SourceSpec).
		AddSink(iceberg.Name, func() sdk.Sink { return iceberg.New() }, iceberg.Spec).
		AddSink(mongodb.Name, func() sdk.Sink { return mongodb.New() }, mongodb.Spec).
		AddSink(elasticsearch.Name, func() sdk.Sink { return elasticsearch.New() }, elasticsearch.Spec)
}
