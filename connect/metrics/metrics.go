// Package metrics exposes a running connect.Runtime as Prometheus metrics: Iggy's
// runtime's families (same names, labels and buckets) and Ferry's own, read from the
// runtime's status at scrape time, so the pipeline pays nothing per message for them.
package metrics

import (
	"net/http"

	"github.com/ferryio/ferry/connect"
)

// Source is what the metrics read: connect.Runtime implements it.
type Source interface {
	Status() []connect.Status
	// Configured counts every connector config, disabled ones included (Iggy's *_total
	// gauges count those).
	Configured() (sinks, sources int)
}

// Handler serves the metrics of src in the OpenMetrics text format (ending "# EOF").
func Handler(src Source) http.Handler {
	return http.NotFoundHandler()
}
