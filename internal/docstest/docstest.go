// Package docstest finds the shell commands of Ferry's documentation (the fenced sh blocks
// of README.md and docs/*.md) and how each is to be tested, so that a test can run every
// command a reader is told to type.
//
// Every sh block carries a marker, an HTML comment on the line just before its fence (a
// reader of the rendered page does not see it):
//
//	<!-- docs-test: run -->
//	    the block runs as a bash script (errexit, pipefail) and must exit 0.
//	<!-- docs-test: run until "TEXT" -->
//	    the block ends in a command that keeps running (a server, ferry run): once its
//	    output holds TEXT the test presses Ctrl-C (SIGINT to its process group), and the
//	    block must then exit 0.
//	<!-- docs-test: run until "TEXT" cleanup "COMMAND" -->
//	    the same, and COMMAND runs at the end in the block's shell (it sees what the block
//	    exported), e.g. to stop a service the block started.
//	<!-- docs-test: run needs "VARIABLE" ... -->
//	    run only where the environment variable VARIABLE is set: the block needs a service
//	    or package that .ci/run provides and says so by setting it (FERRY_POSTGRES_URL
//	    for Debian's PostgreSQL); elsewhere the test is skipped, naming VARIABLE.
//	<!-- docs-test: run ferry "CONFIG" ... -->
//	    before the block, start the fixture CONFIG, a runtime config in the repository: its
//	    directory is copied into the block's directory, CONFIG as config.toml, and
//	    `ferry run --config config.toml --embedded` runs there (the HTTP API and the
//	    embedded server on free ports) until it says "ferry: caught up"; the block then
//	    runs with the documented API address 127.0.0.1:8081 replaced by the bound one.
//	<!-- docs-test: skip: REASON -->
//	    not run; REASON says why (it needs systemd, a real cluster, a binary built
//	    elsewhere...), and the test reports it as skipped with that reason.
//
// A block without a marker, or with a marker this package does not read, is an error: a
// new command in the docs is either run or explained.
package docstest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Block is one fenced sh block of a document.
type Block struct {
	File    string // the document, relative to the repository root
	Line    int    // the line of its opening fence, from 1
	Script  string // its lines, each ending in a newline
	Run     bool   // false: skipped, for Reason
	Until   string // with Run: the output that means the last command is up (then Ctrl-C)
	Cleanup string // with Until: a command run at the end in the block's shell
	Needs   string // with Run: an environment variable that must be set, else skip
	Ferry   string // with Run: a fixture runtime config to run first, relative to the root
	Reason  string // without Run: why the block is not run
}

// Name is "file:line", how a test names the block.
func (b Block) Name() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var (
	markerRE = regexp.MustCompile(`^<!-- docs-test: (.*) -->$`)
	optionRE = regexp.MustCompile(`^ (until|cleanup|needs|ferry) "([^"]+)"`)
	skipRE   = regexp.MustCompile(`^skip: (\S.*)$`)
	openShRE = regexp.MustCompile("^```(sh|bash|shell|console)\\b")
	fenceRE  = regexp.MustCompile("^```")
)

// Docs lists the documents whose commands are tested: README.md and docs/*.md under root,
// relative to it, sorted.
func Docs(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// Read parses the document at root/name.
func Read(root, name string) ([]Block, error) {
	text, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		return nil, err
	}
	return Parse(name, text)
}

// Parse returns the sh blocks of a document named name (for messages) with its text. It
// fails on a block without a marker, on a marker it cannot read (naming file and line),
// and on a block left open.
func Parse(name string, text []byte) ([]Block, error) {
	var out []Block
	var cur *Block
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && fenceRE.MatchString(line):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.Script += line + "\n"
		case openShRE.MatchString(line):
			b, err := marker(name, n, prev)
			if err != nil {
				return nil, err
			}
			cur = &b
		case fenceRE.MatchString(line):
			// Another language's block: skip to its closing fence.
			for sc.Scan() {
				n++
				if fenceRE.MatchString(sc.Text()) {
					break
				}
			}
		}
		prev = strings.TrimSpace(line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the sh block is never closed", name, cur.Line)
	}
	return out, nil
}

// marker reads the marker line before the block opening at line n.
func marker(name string, n int, prev string) (Block, error) {
	b := Block{File: name, Line: n}
	m := markerRE.FindStringSubmatch(prev)
	if m == nil {
		return b, fmt.Errorf(`%s:%d: the sh block has no marker; put <!-- docs-test: run --> or <!-- docs-test: skip: REASON --> on the line before it`, name, n)
	}
	if rest, ok := strings.CutPrefix(m[1], "run"); ok && (rest == "" || rest[0] == ' ') {
		b.Run = true
		for rest != "" {
			o := optionRE.FindStringSubmatch(rest)
			if o == nil {
				return b, fmt.Errorf(`%s:%d: marker %q: cannot read %q (want until, cleanup, needs or ferry, each with a "quoted" value)`, name, n-1, prev, rest)
			}
			switch o[1] {
			case "until":
				b.Until = o[2]
			case "cleanup":
				b.Cleanup = o[2]
			case "needs":
				b.Needs = o[2]
			case "ferry":
				b.Ferry = o[2]
			}
			rest = rest[len(o[0]):]
		}
		if b.Cleanup != "" && b.Until == "" {
			return b, fmt.Errorf(`%s:%d: marker %q: cleanup goes with until`, name, n-1, prev)
		}
		return b, nil
	}
	if s := skipRE.FindStringSubmatch(m[1]); s != nil {
		b.Reason = s[1]
		return b, nil
	}
	return b, fmt.Errorf(`%s:%d: marker %q: want run [until "TEXT" [cleanup "COMMAND"]] [needs "VARIABLE"] [ferry "CONFIG"], or skip: REASON`, name, n-1, prev)
}
