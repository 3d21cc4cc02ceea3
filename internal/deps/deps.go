package deps

import (
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/pelletier/go-toml/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/zeebo/xxh3"
	_ "go.uber.org/goleak"
)
