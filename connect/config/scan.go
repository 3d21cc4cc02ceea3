package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// FileError is a connector file that could not be loaded, with the type and key its
// header names when the header itself could be read ("" otherwise).
type FileError struct {
	File string
	Type ConnectorType
	Key  string
	Err  error // an *Error naming the file, field and line where it can
}

func (e FileError) Error() string { return e.Err.Error() }

// ScanConnectors reads the connector files of dir as [LoadConnectors] does, but a file
// that does not load does not fail the others: it is left out and listed in the
// returned errors (a second file for the same type, key and version is listed too, and
// both are left out). It is the read of a reload, where one broken file must leave the
// rest of the configuration to apply. The error is for the directory itself.
func ScanConnectors(dir string, env []string) (*Connectors, []FileError, error) {
	files, err := ConnectorFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	out := &Connectors{}
	active, err := ReadActiveVersions(filepath.Join(dir, ActiveVersionsFile))
	if err != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s ignored: %v", ActiveVersionsFile, err))
	}
	var bad []FileError
	var good []string
	for _, f := range files {
		if _, err := parseConnectorFile(f, env); err != nil {
			fe := FileError{File: f, Err: err}
			if data, rerr := os.ReadFile(f); rerr == nil {
				if h, _, herr := readHeader(f, data); herr == nil {
					fe.Type, fe.Key = h.Type, h.Key
				}
			}
			bad = append(bad, fe)
			continue
		}
		good = append(good, f)
	}
	d, err := scanDir(good, env)
	var dup *Error
	for err != nil && errors.As(err, &dup) {
		// Two files for one (type, key, version): both are refused, the rest loads.
		var fe FileError
		fe.File, fe.Err = dup.File, err
		if data, rerr := os.ReadFile(dup.File); rerr == nil {
			if h, _, herr := readHeader(dup.File, data); herr == nil {
				fe.Type, fe.Key = h.Type, h.Key
			}
		}
		bad = append(bad, fe)
		good = without(good, dup.File, fe.Type, fe.Key)
		d, err = scanDir(good, env)
	}
	if err != nil {
		return nil, nil, err
	}
	out.Warnings = append(out.Warnings, d.warnings...)
	// A file that names its connector but does not load is that connector's refusal here
	// (LoadConnectors would list it in Invalid): the reload keeps what runs for it.
	var inv, more []*Invalid
	out.Sinks, inv, out.Warnings = pickActive(d, d.sinks, active.Sinks, TypeSink, out.Warnings)
	out.Sources, more, out.Warnings = pickActive(d, d.sources, active.Sources, TypeSource, out.Warnings)
	for _, i := range append(inv, more...) {
		bad = append(bad, FileError{File: i.File, Type: i.Type, Key: i.Key, Err: i.Err})
	}
	return out, bad, nil
}

// without returns files less file and every other file with the same type and key (the
// other side of a duplicate): the key is refused whole.
func without(files []string, file string, typ ConnectorType, key string) []string {
	var out []string
	for _, f := range files {
		if f == file {
			continue
		}
		if key != "" {
			if data, err := os.ReadFile(f); err == nil {
				if h, _, err := readHeader(f, data); err == nil && h.Type == typ && h.Key == key {
					continue
				}
			}
		}
		out = append(out, f)
	}
	return out
}
