package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ferryio/ferry"

// forbidden lists, for each package prefix (relative to the module), the module packages
// it must not import, directly or indirectly.
var forbidden = map[string][]string{
	"iggy/wire":      {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	"iggy":           {"server", "connect", "connectors", "sdk", "cmd"},
	"server":         {"iggy", "connect", "connectors", "sdk", "cmd"},
	"sdk":            {"iggy", "server", "connect", "connectors", "cmd"},
	"connectors":     {"iggy", "server", "connect", "cmd"},
	"connect/plugin": {"iggy", "server", "connectors", "cmd", "connect"},
	// Configuration is data: it knows the sdk's types, nothing that runs.
	"connect/config": {"iggy", "server", "connectors", "cmd", "connect"},
	"connect":        {"server", "connectors", "cmd"},
	// A config provider reads and writes configs; it knows config, nothing that runs.
	"connect/provider": {"iggy", "server", "connectors", "cmd", "connect"},
	// The API's JSON forms of configs are data over config.
	"connect/configjson": {"iggy", "server", "connectors", "cmd", "connect"},
	// Payload decoders/encoders and transforms are pure: bytes and values in and out.
	"connect/schema":    {"iggy", "server", "connectors", "cmd", "connect"},
	"connect/transform": {"iggy", "server", "connectors", "cmd", "connect"},
	// The HTTP API and the metrics read the runtime; the runtime never sees them.
	"connect/httpapi": {"server", "connectors", "cmd"},
	"connect/metrics": {"server", "connectors", "cmd", "connect/httpapi"},
	// The conformance suite judges a runtime from outside: the client, the embedded
	// server, never the runtime's internals.
	"conformance": {"connect", "connectors", "sdk", "cmd"},
	// A test helper for PostgreSQL knows pgx only.
	"internal/pgtest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// The config API of the http provider's tests is the remote side: it knows nothing of Ferry.
	"internal/providertest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// Telemetry builds the OpenTelemetry SDK from the config; it never sees the runtime.
	"connect/telemetry": {"iggy", "server", "connectors", "cmd", "connect"},
	// A test helper that reads the OpenTelemetry Collector's files knows nothing of Ferry.
	"internal/oteltest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// A test helper that runs promtool knows nothing of Ferry.
	"internal/promtooltest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// The S3 sink sees the sdk only, no other connector (the packages under
	// connectors/internal are shared by connectors, not connectors); its test helper the
	// AWS SDK only.
	"connectors/s3":   {"iggy", "server", "connect", "cmd", "connectors"},
	"internal/s3test": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// What connectors share (the Parquet rows) sees the sdk only, never a connector.
	"connectors/internal": {"iggy", "server", "connect", "cmd", "connectors"},
	// The MQTT source and sink see the sdk and the Paho client only.
	"connectors/mqtt": {"iggy", "server", "connect", "cmd", "connectors"},
	// The HTTP sink sees the sdk only; its tests' receiver knows nothing of Ferry.
	"connectors/http":      {"iggy", "server", "connect", "cmd", "connectors"},
	"internal/webhooktest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// The PostgreSQL CDC source sees the sdk only, not even the PostgreSQL sink beside it.
	"connectors/postgres/source": {"iggy", "server", "connect", "cmd", "connectors"},
	// The Redis Streams sink sees the sdk and go-redis only.
	"connectors/redis": {"iggy", "server", "connect", "cmd", "connectors"},
	// The Iggy source is an Iggy client by nature: its remote side is Ferry's own client
	// (iggy, iggy/wire), the one exception to "connectors see only the sdk"; never the
	// server, the runtime or another connector. Putting the client behind the sdk would
	// copy its API into the sdk for one connector.
	"connectors/iggy": {"server", "connect", "cmd", "connectors"},
	// The Kafka source and sink see the sdk and their shared client package only.
	"connectors/kafka":   {"iggy", "server", "connect", "cmd", "connectors"},
	"internal/kafkatest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// The Iceberg sink sees the sdk, iceberg-go and the pgx driver only.
	"connectors/iceberg":   {"iggy", "server", "connect", "cmd", "connectors"},
	"internal/icebergtest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// The MongoDB sink sees the sdk and the MongoDB driver only; its test helper the driver only.
	"connectors/mongodb": {"iggy", "server", "connect", "cmd", "connectors"},
	"internal/mongotest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// The Elasticsearch sink sees the sdk and the standard library only; its test helper
	// the standard library only.
	"connectors/elasticsearch": {"iggy", "server", "connect", "cmd", "connectors"},
	"internal/searchtest":      {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	// The test kit's waits and files know nothing of Ferry, so the lowest package's tests
	// can use them; its server kit knows the client and the server, never the runtime, so
	// connect's own tests can use it; its runtime kit may start anything but the command.
	"internal/testkit":         {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
	"internal/testkit/iggykit": {"connect", "connectors", "sdk", "cmd"},
	"internal/testkit/runkit":  {"cmd"},
	// The CDC judge (conformance's and the e2e tests') reads a topic with the client and
	// writes with pgx; it never sees the server or the runtime.
	"internal/cdccheck": {"server", "connect", "connectors", "sdk", "cmd"},
	// The replication judge (conformance's and the e2e tests') reads both servers with the
	// client; it never sees the server, the runtime or the connector.
	"internal/replcheck": {"server", "connect", "connectors", "sdk", "cmd"},
	// The docs' command finder reads Markdown only.
	"internal/docstest": {"iggy", "server", "connect", "connectors", "sdk", "cmd"},
}

type pkg struct {
	ImportPath string
	Deps       []string
}

// TestImportDirection fails when a package imports a module package its layer must not see.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		rule, ok := ruleFor(rel)
		if !ok {
			continue
		}
		checked++
		for _, dep := range p.Deps {
			if !strings.HasPrefix(dep, module+"/") {
				continue
			}
			drel := strings.TrimPrefix(dep, module+"/")
			for _, bad := range forbidden[rule] {
				if within(drel, bad) && !within(drel, rule) && !allowedBelow(rule, drel) && !throughIggySource(rel, drel) {
					t.Errorf("%s imports %s, which %s must not depend on", rel, drel, rule)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package matched any rule: go list output changed?")
	}
}

// ruleFor returns the most specific rule prefix covering rel.
func ruleFor(rel string) (string, bool) {
	best := ""
	for prefix := range forbidden {
		if within(rel, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	return best, best != ""
}

// allowedBelow permits the downward edges that a broader forbidden prefix would catch:
// a connector may use connectors/internal, iggy may use iggy/wire, server may use iggy/wire, connect/config and connect/transform
// may use the pure packages below them.
func allowedBelow(rule, dep string) bool {
	if within(rule, "connectors") && within(dep, "connectors/internal") {
		return true // a connector may use what connectors share
	}
	switch rule {
	case "iggy", "server":
		return within(dep, "iggy/wire")
	case "connect/plugin":
		return false
	case "connect/config": // validates transform tables at parse time
		return within(dep, "connect/transform") || within(dep, "connect/schema")
	case "connect/provider": // configs are parsed by config, bodies by configjson
		return within(dep, "connect/config") || within(dep, "connect/configjson") || within(dep, "connect/transform") || within(dep, "connect/schema")
	case "connect/configjson": // over config
		return within(dep, "connect/config") || within(dep, "connect/transform") || within(dep, "connect/schema")
	case "connect/transform":
		return within(dep, "connect/schema")
	case "connect/telemetry": // reads [telemetry]
		return within(dep, "connect/config") || within(dep, "connect/transform") || within(dep, "connect/schema")
	}
	return false
}

// throughIggySource permits the registry (package connectors, which lists every built-in)
// the client that connectors/iggy, an Iggy client by nature, brings with it; every other
// connector package is still held to "no iggy".
func throughIggySource(rel, dep string) bool {
	return rel == "connectors" && within(dep, "iggy")
}

func within(rel, prefix string) bool {
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

// TestSDKDoesNoIO: the sdk is types and contracts; the standard packages that reach the
// file system, the network or the OS are not among its direct imports (checks on disk live
// in connect/config).
func TestSDKDoesNoIO(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", module+"/sdk").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	banned := []string{"os", "os/exec", "net", "net/http", "syscall", "io/fs", "path/filepath", "golang.org/x/sys/unix"}
	for _, imp := range strings.Fields(string(out)) {
		for _, b := range banned {
			if imp == b {
				t.Errorf("sdk imports %s: the sdk must do no I/O", imp)
			}
		}
	}
}
