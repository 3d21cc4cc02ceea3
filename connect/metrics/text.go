package metrics

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect"
)

// textEmitter writes the samples of one scrape as OpenMetrics or Prometheus text (the
// samples are the same in both), one buffer per family (a family's samples must be contiguous); write then puts the families in name
// order, each after its HELP and TYPE lines. Integer values are written as integers
// (exact, as Iggy's runtime writes its counters and gauges), other values as
// OpenMetrics floats. Not safe for concurrent use.
type textEmitter struct {
	bufs [numFamilies][]byte
}

// familyOrder lists the families by name, the order of the exposition.
var familyOrder = func() []int {
	out := make([]int, numFamilies)
	for i := range out {
		out[i] = i
	}
	slices.SortFunc(out, func(a, b int) int { return strings.Compare(families[a].name, families[b].name) })
	return out
}()

func (e *textEmitter) reset() {
	for i := range e.bufs {
		e.bufs[i] = e.bufs[i][:0]
	}
}

func (e *textEmitter) value(f int, v uint64, labels ...string) {
	b := appendSeries(e.bufs[f], families[f].name, "", families[f].labels, labels, "", "")
	b = strconv.AppendUint(b, v, 10)
	e.bufs[f] = append(b, '\n')
}

func (e *textEmitter) seconds(f int, d time.Duration, labels ...string) {
	b := appendSeries(e.bufs[f], families[f].name, "", families[f].labels, labels, "", "")
	b = appendFloat(b, d.Seconds())
	e.bufs[f] = append(b, '\n')
}

// histogram writes h in seconds: cumulative buckets, +Inf (the total, including the
// overflow count above the highest bound), _sum and _count.
func (e *textEmitter) histogram(f int, h connect.Histogram, labels ...string) {
	fam := &families[f]
	b := e.bufs[f]
	var cum uint64
	var le []byte
	for i, bound := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		le = appendBound(le[:0], bound.Seconds())
		b = appendSeries(b, fam.name, "_bucket", fam.labels, labels, "le", string(le))
		b = strconv.AppendUint(b, cum, 10)
		b = append(b, '\n')
	}
	count := histogramCount(h)
	b = appendSeries(b, fam.name, "_bucket", fam.labels, labels, "le", "+Inf")
	b = strconv.AppendUint(b, count, 10)
	b = appendSeries(append(b, '\n'), fam.name, "_sum", fam.labels, labels, "", "")
	b = appendFloat(b, h.Sum.Seconds())
	b = appendSeries(append(b, '\n'), fam.name, "_count", fam.labels, labels, "", "")
	b = strconv.AppendUint(b, count, 10)
	e.bufs[f] = append(b, '\n')
}

// appendSeries appends "name+suffix{labels} " (no braces without labels); extra, when
// not empty, is one more label (le) after the others.
func appendSeries(b []byte, name, suffix string, names, values []string, extra, extraValue string) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(names) > 0 || extra != "" {
		b = append(b, '{')
		for i, n := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLabel(b, n, values[i])
		}
		if extra != "" {
			if len(names) > 0 {
				b = append(b, ',')
			}
			b = appendLabel(b, extra, extraValue)
		}
		b = append(b, '}')
	}
	return append(b, ' ')
}

// appendLabel appends name="value", value escaped as OpenMetrics requires (backslash,
// double quote and line feed).
func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendFloat appends a sample value: an integral one of up to 15 digits as an integer
// ("7", as Iggy's runtime writes integers), any other in Go's shortest form ("0.00025").
func appendFloat(b []byte, v float64) []byte {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendBound appends a bucket bound as the registry's OpenMetrics encoder writes it:
// Go's shortest form, with ".0" when that has neither a point nor an exponent ("1.0",
// "0.25", "5e-05").
func appendBound(b []byte, v float64) []byte {
	n := len(b)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	if !bytes.ContainsAny(b[n:], ".e") {
		b = append(b, '.', '0')
	}
	return b
}

// write appends every family with samples, in name order, to b: in OpenMetrics (om) or
// in the Prometheus text format 0.0.4. They differ in the HELP and TYPE lines only: an
// OpenMetrics counter family is named without its samples' _total suffix, a text-format
// one with it; and Iggy's two gauges whose names end in _total (the configured
// connectors) are untyped in the text format, where that suffix belongs to counters
// (promtool check metrics refuses a gauge so named), and gauges in OpenMetrics, as Iggy's
// runtime has them.
func (e *textEmitter) write(b []byte, om bool) []byte {
	for _, f := range familyOrder {
		if len(e.bufs[f]) == 0 {
			continue
		}
		fam := &families[f]
		name := fam.name
		typ := "gauge"
		switch {
		case fam.kind == kindCounter && om:
			name, typ = strings.TrimSuffix(name, "_total"), "counter"
		case fam.kind == kindCounter:
			typ = "counter"
		case fam.kind == kindHistogram:
			typ = "histogram"
		case !om && strings.HasSuffix(name, "_total"):
			typ = "untyped"
		}
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, fam.help...) // no backslash or line feed (TestHelpText)
		b = append(b, "\n# TYPE "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, typ...)
		b = append(b, '\n')
		b = append(b, e.bufs[f]...)
	}
	return b
}
