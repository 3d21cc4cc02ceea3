package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Passed reports whether no result failed ("not supported" is not a failure of the
// suite's run, but it is not a pass either: callers decide).
func Passed(results []Result) bool {
	for _, r := range results {
		if r.Verdict == Fail {
			return false
		}
	}
	return true
}

// WriteText writes one line per result: scenario · mode · expected · observed · verdict.
func WriteText(w io.Writer, results []Result) error {
	for _, r := range results {
		if _, err := fmt.Fprintln(w, Line(r)); err != nil {
			return err
		}
	}
	return nil
}

// Line formats one result as scenario · mode · expected · observed · verdict.
func Line(r Result) string {
	return fmt.Sprintf("%s · %s · expected: %s · observed: %s · %s", r.Scenario, r.Mode, r.Expected, r.Observed, strings.ToUpper(string(r.Verdict)))
}

// WriteMarkdown writes the results as a Markdown table headed by a summary.
func WriteMarkdown(w io.Writer, runtime string, results []Result) error {
	pass, fail, ns := 0, 0, 0
	for _, r := range results {
		switch r.Verdict {
		case Pass:
			pass++
		case Fail:
			fail++
		default:
			ns++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Delivery conformance\n\nRuntime: `%s`\n\n%d pass, %d fail, %d not supported.\n\n", runtime, pass, fail, ns)
	b.WriteString("| scenario | mode | expected | observed | verdict |\n|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Scenario, r.Mode, md(r.Expected), md(r.Observed), r.Verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func md(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }

// WriteJSON writes {"runtime": ..., "results": [...]}.
func WriteJSON(w io.Writer, runtime string, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Runtime string   `json:"runtime"`
		Results []Result `json:"results"`
	}{runtime, results})
}
