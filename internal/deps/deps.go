package deps
import (
 _ "github.com/cockroachdb/pebble/v2"
 _ "github.com/zeebo/xxh3"
 _ "github.com/pelletier/go-toml/v2"
 _ "github.com/spf13/cobra"
 _ "go.uber.org/goleak"
 _ "github.com/prometheus/client_golang/prometheus"
)
