package connectors

import (
	"reflect"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := Registry()
	if got := r.SinkNames(); !reflect.DeepEqual(got, []string{"elasticsearch", "file", "http", "iceberg", "kafka", "mongodb", "mqtt", "null", "postgres", "redis", "s3", "stdout"}) {
		t.Fatalf("sinks = %v", got)
	}
	if got := r.SourceNames(); !reflect.DeepEqual(got, []string{"iggy", "kafka", "mqtt", "postgres", "random", "redis"}) {
		t.Fatalf("sources = %v", got)
	}
	for _, n := range r.SinkNames() {
		if f, _ := r.Sink(n); f() == nil {
			t.Fatalf("sink %s factory returned nil", n)
		}
	}
	if f, _ := r.Source("random"); f() == nil {
		t.Fatal("random factory returned nil")
	}
}
