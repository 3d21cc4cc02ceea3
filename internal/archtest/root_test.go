package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestRootImportsNothing: the module's root package (the project's version) is imported by
// the binary and must import no package of the module, so every layer may read it.
func TestRootImportsNothing(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Deps "\n"}}`, module).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", module, err)
	}
	for _, dep := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(dep, module+"/") {
			t.Errorf("%s imports %s; it must import nothing of the module", module, dep)
		}
	}
}

// TestOnlyCommandsImportCLI: package ferrycli is the command line, the top of the import
// graph like cmd/ferry that calls it; no other package of the module may depend on it.
func TestOnlyCommandsImportCLI(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	cli := module + "/ferrycli"
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !slices.Contains(f[1:], cli) {
			continue
		}
		rel := strings.TrimPrefix(f[0], module+"/")
		if !within(rel, "cmd") {
			t.Errorf("%s imports ferrycli: only commands (cmd/...) may", rel)
		}
		found = true
	}
	if !found {
		t.Fatal("no package imports ferrycli: cmd/ferry should")
	}
}
