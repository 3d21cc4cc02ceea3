package config

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzRedactString: a password inside a URL never survives RedactString, and nothing
// around it is lost.
func FuzzRedactString(f *testing.F) {
	f.Add("hunter2", "db.example:5432")
	f.Add("p@ss:w/rd", "h")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, pw, host string) {
		if pw == "" || host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
			return
		}
		u := "postgres://user:" + url.QueryEscape(pw) + "@" + host + "/db"
		if _, err := url.Parse(u); err != nil {
			return
		}
		out := RedactString("dial " + u + " failed")
		if want := "dial postgres://user:***@" + host + "/db failed"; out != want {
			t.Fatalf("RedactString(%q) = %q, want %q", u, out, want)
		}
	})
}
