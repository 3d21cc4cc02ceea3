package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// An object's key is a pure function of its messages: the prefix, the path template with
// every variable taken from the object's first message (never the wall clock), and a file
// name holding the partition and the object's first and last offsets, zero-padded so keys
// sort by offset. Upstream's s3_sink names its files the same way:
//
//	<prefix>/<template>/<partition:05>-<first:020>-<last:020>.<ext>
//
// so an upload retried after a crash targets the same key, and the conditional PUT
// (If-None-Match: *) makes the second one a no-op.
//
// A key must name one (stream, topic, partition, range) whatever the template, or two of
// the sink's topics share keys and the second upload of a range is refused as "already
// written". So the sink keys every object by a template that holds {stream} and {topic}
// each as a whole path segment: the segments a path_template lacks are appended to it
// ("{stream}/{date}" keys as "{stream}/{date}/{topic}"), and a name that sanitizing changes
// is followed by '~' and a hash of the name itself ("é" and "ü" are "_~<8 hex>", never both
// "_"). No variable renders a '/', so the segments of a rendered key are the template's,
// and a whole-segment name tells its stream or topic apart. A template that holds both
// already, over names sanitizing leaves alone, keys exactly as before (and as upstream).
//
// A partition that went back to offset 0 (purged) gets its new objects under a
// generation, ".r<n>" before the extension (n = 1 after the first rewind the sink saw,
// and so on): the purged messages' objects keep their keys, and the new messages, whose
// offsets are the same, never meet them. Listing resumes after the highest object of the
// highest generation; objects without one are generation 0.
//
//	<prefix>/<template>/<partition:05>-<first:020>-<last:020>.r<n>.<ext>

// extensions are the file name endings per output format; listing matches any of them,
// so objects written under another output_format still count as written.
var extensions = map[format]string{
	formatJSONLines: "jsonl",
	formatJSONArray: "json",
	formatRaw:       "bin",
	formatParquet:   "parquet",
}

// template is a parsed path_template: literal text and variables, in order.
type template struct {
	parts []tplPart // what objects are keyed by: written, with the missing segments appended
	// written is the path_template as written: the layout older versions keyed objects by,
	// searched on assignment only to say that it holds objects no longer counted.
	written []tplPart
	added   []string // the variables appended to it, in order
}

type tplPart struct {
	lit string // literal text, when name is ""
	// name is the variable: stream, topic, partition, date, hour or timestamp.
	name string
}

var tplVar = regexp.MustCompile(`\{([a-z_]+)\}`)

// newTemplate parses path_template; an unknown {variable} is an error naming it.
func newTemplate(s string) (template, error) {
	var t template
	last := 0
	for _, m := range tplVar.FindAllStringSubmatchIndex(s, -1) {
		name := s[m[2]:m[3]]
		switch name {
		case "stream", "topic", "partition", "date", "hour", "timestamp":
		default:
			return t, fmt.Errorf("unknown variable {%s} at byte %d (known: {stream} {topic} {partition} {date} {hour} {timestamp})", name, m[0])
		}
		if m[0] > last {
			t.parts = append(t.parts, tplPart{lit: s[last:m[0]]})
		}
		t.parts = append(t.parts, tplPart{name: name})
		last = m[1]
	}
	if last < len(s) {
		t.parts = append(t.parts, tplPart{lit: s[last:]})
	}
	t.written = t.parts
	t.parts = slices.Clone(t.parts)
	for _, name := range []string{"stream", "topic"} {
		if t.segment(name) {
			continue
		}
		if n := len(t.parts); n == 0 || !strings.HasSuffix(t.parts[n-1].lit, "/") {
			t.parts = append(t.parts, tplPart{lit: "/"})
		}
		t.parts = append(t.parts, tplPart{name: name})
		t.added = append(t.added, name)
	}
	return t, nil
}

// segment reports whether variable name is, somewhere in t, a whole path segment: between
// the template's ends or slashes.
func (t template) segment(name string) bool {
	for i, p := range t.parts {
		if p.name != name {
			continue
		}
		before := i == 0 || t.parts[i-1].name == "" && strings.HasSuffix(t.parts[i-1].lit, "/")
		after := i == len(t.parts)-1 || t.parts[i+1].name == "" && strings.HasPrefix(t.parts[i+1].lit, "/")
		if before && after {
			return true
		}
	}
	return false
}

// extended reports whether objects are keyed otherwise than path_template says alone:
// segments appended, or a name of c that sanitizing changes.
func (t template) extended(c keyCtx) bool {
	return len(t.added) > 0 || sanitize(c.stream) != c.stream || sanitize(c.topic) != c.topic
}

// effective is the template objects are keyed by, as text.
func (t template) effective() string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.name == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString("{" + p.name + "}")
		}
	}
	return b.String()
}

// keyCtx is what a key is made of besides the offsets.
type keyCtx struct {
	stream, topic string
	partition     uint32
	firstTS       uint64 // µs since the epoch: the object's first message's timestamp
	gen           uint64 // the partition's generation: rewinds the sink has seen of it
}

// render fills the template for one object.
func (t template) render(c keyCtx) string { return renderParts(t.parts, c, keyName) }

func renderParts(parts []tplPart, c keyCtx, name func(string) string) string {
	at := time.UnixMicro(int64(c.firstTS)).UTC()
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(renderPart(p, c, at, name))
	}
	return b.String()
}

func renderPart(p tplPart, c keyCtx, at time.Time, name func(string) string) string {
	switch p.name {
	case "":
		return p.lit
	case "stream":
		return name(c.stream)
	case "topic":
		return name(c.topic)
	case "partition":
		return strconv.FormatUint(uint64(c.partition), 10)
	case "date":
		return at.Format("2006-01-02")
	case "hour":
		return at.Format("15")
	}
	return strconv.FormatUint(c.firstTS/1000, 10) // timestamp
}

// sanitize keeps a stream or topic name to letters, digits, '.', '_' and '-' (anything
// else becomes '_'), as upstream does, so a name never adds a directory.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return r
		}
		return '_'
	}, s)
}

// keyName is a stream or topic name as keys hold it: sanitized, and when that changed the
// name, followed by '~' and the first 8 hex digits of the SHA-256 of the name (a '~' no
// sanitized name holds), so names that sanitize alike still key apart.
func keyName(s string) string {
	clean := sanitize(s)
	if clean == s {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return clean + "~" + hex.EncodeToString(h[:4])
}

// joinKey puts the prefix, the rendered directories and the file name together.
func joinKey(prefix, dir, file string) string {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return dir + "/" + file
	}
	return p + "/" + dir + "/" + file
}

// objectKey is the key of the object holding offsets first..last of c's partition.
func objectKey(prefix string, t template, c keyCtx, first, last uint64, f format) string {
	gen := ""
	if c.gen > 0 {
		gen = fmt.Sprintf(".r%d", c.gen)
	}
	file := fmt.Sprintf("%05d-%020d-%020d%s.%s", c.partition, first, last, gen, extensions[f])
	return joinKey(prefix, t.render(c), file)
}

// finder locates one partition's objects whatever their date: LIST under listPrefix (the
// key up to the first time variable) and keep the keys match accepts.
type finder struct {
	listPrefix string
	match      *regexp.Regexp // groups 1 and 2: first and last offset; 3: the generation, if any
	partials   *regexp.Regexp // a streamed object's partial key
}

// newFinder builds the finder of partition c.partition of c.stream/c.topic.
func newFinder(prefix string, t template, c keyCtx) finder {
	return finderOf(prefix, t.parts, c, keyName)
}

// newLegacyFinder builds the finder of the partition's objects as older versions keyed
// them, when they keyed them otherwise (ok false: the same keys).
func newLegacyFinder(prefix string, t template, c keyCtx) (f finder, ok bool) {
	if !t.extended(c) {
		return finder{}, false
	}
	return finderOf(prefix, t.written, c, sanitize), true
}

func finderOf(prefix string, parts []tplPart, c keyCtx, name func(string) string) finder {
	head := strings.Trim(prefix, "/")
	if head != "" {
		head += "/"
	}
	static := head // the key before the first time variable
	re := regexp.QuoteMeta(head)
	timeSeen := false
	for _, p := range parts {
		pat := ""
		switch p.name {
		case "date":
			pat = `\d{4}-\d{2}-\d{2}`
		case "hour":
			pat = `\d{2}`
		case "timestamp":
			pat = `\d+`
		}
		if pat != "" {
			timeSeen = true
			re += pat
			continue
		}
		lit := renderPart(p, c, time.Time{}, name)
		re += regexp.QuoteMeta(lit)
		if !timeSeen {
			static += lit
		}
	}
	if !timeSeen {
		static += "/"
	}
	partial := "^" + re + fmt.Sprintf(`/%05d-\d{20}\.[0-9a-f]{16}\.partial$`, c.partition)
	re = "^" + re + fmt.Sprintf(`/%05d-(\d{20})-(\d{20})(?:\.r(\d{1,19}))?\.(?:jsonl|json|bin|parquet)$`, c.partition)
	return finder{listPrefix: static, match: regexp.MustCompile(re), partials: regexp.MustCompile(partial)}
}

// partial reports whether key is a partial object of the partition (see partialKey).
func (f finder) partial(key string) bool { return f.partials.MatchString(key) }

// offsets returns the first and last offsets in key, if key is one of the partition's.
func (f finder) offsets(key string) (first, last uint64, ok bool) {
	first, last, _, ok = f.object(key)
	return first, last, ok
}

// object returns the first and last offsets and the generation in key, if key is one of
// the partition's objects.
func (f finder) object(key string) (first, last, gen uint64, ok bool) {
	m := f.match.FindStringSubmatch(key)
	if m == nil {
		return 0, 0, 0, false
	}
	first, err1 := strconv.ParseUint(m[1], 10, 64)
	last, err2 := strconv.ParseUint(m[2], 10, 64)
	var err3 error
	if m[3] != "" {
		gen, err3 = strconv.ParseUint(m[3], 10, 64)
	}
	return first, last, gen, err1 == nil && err2 == nil && err3 == nil && first <= last
}
