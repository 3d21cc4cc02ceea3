package archtest

import (
	"os/exec"
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
