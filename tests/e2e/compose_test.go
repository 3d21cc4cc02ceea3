package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/ferryio/ferry/internal/testkit"
)

// composeFile is what the tests read of examples/compose/compose.yaml.
type composeFile struct {
	Name     string `yaml:"name"`
	Services map[string]struct {
		Image string `yaml:"image"`
		Build struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Restart     string            `yaml:"restart"`
		CapAdd      []string          `yaml:"cap_add"`
		SecurityOpt []string          `yaml:"security_opt"`
		Ulimits     map[string]any    `yaml:"ulimits"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck struct {
			Test     []string `yaml:"test"`
			Interval string   `yaml:"interval"`
			Timeout  string   `yaml:"timeout"`
			Retries  int      `yaml:"retries"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// composeProduceArgs are the arguments of examples/compose/README.md's `ferry produce`.
var composeProduceArgs = []string{"shop", "orders", "--format", "json", "--batch", "100"}

// composeVarRE is a compose variable reference: ${NAME}, ${NAME:-default}, ${NAME:?error}.
var composeVarRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-?])([^}]*))?\}`)

// composeExample reads examples/compose/compose.yaml and its .env.example (NAME=value).
func composeExample(t *testing.T) (composeFile, string, map[string]string) {
	t.Helper()
	dir := filepath.Join(repoRoot, "examples", "compose")
	raw, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.UnmarshalWithOptions(raw, &c, yaml.Strict()); err != nil {
		t.Fatalf("examples/compose/compose.yaml: %v", err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(readIfExists(t, filepath.Join(dir, ".env.example")))) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("examples/compose/.env.example: %q is not NAME=value", line)
		}
		env[k] = v
	}
	return c, string(raw), env
}

// expandCompose substitutes compose's variable references from env, as compose does.
func expandCompose(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return composeVarRE.ReplaceAllStringFunc(s, func(ref string) string {
		m := composeVarRE.FindStringSubmatch(ref)
		if v, ok := env[m[1]]; ok {
			return v
		}
		if m[2] == "-" {
			return m[3]
		}
		t.Fatalf("examples/compose: %s is neither in .env.example nor has a default", ref)
		return ""
	})
}

// composeFerryEnv is the ferry service's environment with .env.example's values, plus the
// two paths that are mount points in the container (connector files, the state volume)
// pointed at the example's directory and at stateDir.
func composeFerryEnv(t *testing.T, stateDir string) []string {
	t.Helper()
	c, _, env := composeExample(t)
	var out []string
	for k, v := range c.Services["ferry"].Environment {
		out = append(out, k+"="+expandCompose(t, v, env))
	}
	slices.Sort(out)
	return append(out, "IGGY_CONNECTORS_CONNECTORS_CONFIG_DIR="+filepath.Join(repoRoot, "examples", "compose", "connectors"),
		"IGGY_CONNECTORS_STATE_PATH="+stateDir)
}

// TestComposeExampleFiles: examples/compose cannot be run here (its images cannot be
// pulled), so its files are checked as far as they can be without them: compose.yaml
// parses (strictly: an unknown field is an error), has the three services with their
// images, builds Ferry from the repository's Dockerfile, mounts files that exist and the
// image's data volume, publishes the API on loopback only, starts Ferry after both
// servers are healthy; every variable it reads is in .env.example or has a default, no
// secret is written in it (.env is ignored by Git), the README runs what
// TestComposeExampleRun runs, and the Ferry config with the service's environment passes
// `ferry check` (the mount points pointed at the example's files).
func TestComposeExampleFiles(t *testing.T) {
	c, raw, env := composeExample(t)
	var names []string
	for name := range c.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "ferry,iggy,postgres" {
		t.Fatalf("compose.yaml services %v, want ferry, iggy, postgres", names)
	}
	iggy, pg, ferry := c.Services["iggy"], c.Services["postgres"], c.Services["ferry"]
	if img := expandCompose(t, iggy.Image, nil); !strings.HasPrefix(img, "docker.io/apache/iggy:0.9.") {
		t.Errorf("the iggy service's image is %q, want Apache Iggy's 0.9 server", img)
	}
	if img := expandCompose(t, pg.Image, nil); !strings.HasPrefix(img, "docker.io/library/postgres:") {
		t.Errorf("the postgres service's image is %q, want PostgreSQL's", img)
	}
	if ferry.Build.Context != "../.." || ferry.Build.Dockerfile != "Dockerfile" {
		t.Errorf("the ferry service builds %s/%s, want the repository's Dockerfile (../.., Dockerfile)", ferry.Build.Context, ferry.Build.Dockerfile)
	}
	dockerfile := string(readIfExists(t, filepath.Join(repoRoot, "Dockerfile")))
	if !strings.Contains(dockerfile, "\nVOLUME [\"/var/lib/ferry\"]\n") {
		t.Fatal("the Dockerfile declares no VOLUME /var/lib/ferry")
	}
	wantVolumes := []string{"./config.toml:/etc/ferry/config.toml:ro", "./connectors:/etc/ferry/connectors:ro", "ferry-data:/var/lib/ferry"}
	if !slices.Equal(ferry.Volumes, wantVolumes) {
		t.Errorf("the ferry service's volumes %q, want %q", ferry.Volumes, wantVolumes)
	}
	for _, v := range ferry.Volumes {
		if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./") {
			if _, err := os.Stat(filepath.Join(repoRoot, "examples", "compose", src)); err != nil {
				t.Errorf("the ferry service mounts %s: %v", src, err)
			}
		}
	}
	for _, v := range slices.Concat(ferry.Volumes, iggy.Volumes, pg.Volumes) {
		if src, _, _ := strings.Cut(v, ":"); !strings.HasPrefix(src, "./") {
			if _, ok := c.Volumes[src]; !ok {
				t.Errorf("the volume %s is not declared under volumes", src)
			}
		}
	}
	if !slices.Equal(ferry.Ports, []string{"127.0.0.1:8081:8081"}) {
		t.Errorf("the ferry service publishes %q, want only 127.0.0.1:8081:8081", ferry.Ports)
	}
	for _, dep := range []string{"iggy", "postgres"} {
		if ferry.DependsOn[dep].Condition != "service_healthy" {
			t.Errorf("the ferry service does not wait for %s to be healthy", dep)
		}
	}
	if len(ferry.Command) < 3 || ferry.Command[0] != "run" || !slices.Contains(ferry.Command, "--create-topics") ||
		slices.Contains(ferry.Command, "--embedded") || strings.Join(ferry.Command[1:3], " ") != "--config /etc/ferry/config.toml" {
		t.Errorf("the ferry service runs %q, want run --config /etc/ferry/config.toml --create-topics, not --embedded", ferry.Command)
	}
	for _, m := range composeVarRE.FindAllStringSubmatch(raw, -1) {
		if _, ok := env[m[1]]; !ok && m[2] != "-" {
			t.Errorf("compose.yaml reads ${%s} without a default and .env.example does not list it", m[1])
		}
	}
	// Secrets come from .env: every value that carries one is a variable reference.
	for name, s := range c.Services {
		for k, v := range s.Environment {
			if (strings.Contains(k, "PASSWORD") || strings.Contains(k, "API_KEY") || strings.Contains(k, "CONNECTION_STRING")) &&
				!composeVarRE.MatchString(v) {
				t.Errorf("the %s service's %s is written in compose.yaml (%q), not read from .env", name, k, v)
			}
		}
	}

	if !slices.Contains(strings.Split(string(readIfExists(t, filepath.Join(repoRoot, ".gitignore"))), "\n"), "/examples/compose/.env") {
		t.Error(".gitignore does not keep examples/compose/.env (the example's secrets) out of Git")
	}
	// The README's commands are the ones TestComposeExampleRun runs.
	readme := string(readIfExists(t, filepath.Join(repoRoot, "examples", "compose", "README.md")))
	for _, want := range []string{"cp .env.example .env", "docker compose up -d --build",
		"ferry produce " + strings.Join(composeProduceArgs, " ") + " --config /etc/ferry/config.toml"} {
		if !strings.Contains(readme, want) {
			t.Errorf("examples/compose/README.md lacks %q", want)
		}
	}

	cmd := exec.Command(ferryBin, "check", "--config", filepath.Join(repoRoot, "examples", "compose", "config.toml"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), composeFerryEnv(t, t.TempDir())...)
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^sink\s+orders\s+builtin:postgres\s.*← shop/\[orders\]\s+ok$`).Match(out) {
		t.Fatalf("ferry check of examples/compose/config.toml: %v\n%s", err, out)
	}
}

// TestComposeExampleRun runs the compose example's Ferry as its service would, outside a
// container: its config, connector file, command and environment, with Ferry's own
// `ferry server` in the iggy service's place (its root's password, iggy) and the test's
// PostgreSQL in the postgres service's (tables of its own). The README's `ferry produce`
// of 1,000 JSON orders leaves 1,000 rows, each (partition, offset) once, and the image's
// HEALTHCHECK command answers with the example's config (the API on every address, its
// key required).
func TestComposeExampleRun(t *testing.T) {
	db, url := pgDB(t)
	table := fmt.Sprintf("compose_orders_%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets")
	})
	c, _, _ := composeExample(t)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	env := append(composeFerryEnv(t, filepath.Join(dir, "state")),
		"IGGY_CONNECTORS_IGGY_ADDRESS="+addr, "IGGY_CONNECTORS_IGGY_PASSWORD=iggy",
		"IGGY_CONNECTORS_HTTP_ADDRESS=0.0.0.0:0", // all addresses, as in the container: the api_key is required
		"IGGY_CONNECTORS_SINK_ORDERS_PLUGIN_CONFIG_CONNECTION_STRING="+url,
		"IGGY_CONNECTORS_SINK_ORDERS_PLUGIN_CONFIG_TARGET_TABLE="+table,
		"IGGY_CONNECTORS_SINK_ORDERS_PLUGIN_CONFIG_OFFSETS_TABLE="+table+"_offsets")
	args := slices.Clone(c.Services["ferry"].Command)
	args[slices.Index(args, "/etc/ferry/config.toml")] = filepath.Join(repoRoot, "examples", "compose", "config.toml")
	run := startFerry(t, "compose ferry", dir, env, args...)

	var lines strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&lines, "{\"id\":%d,\"item\":\"book\"}\n", i)
	}
	testkit.WaitFor(t, "the stream and topic created (--create-topics)", func() bool {
		if run.exited() {
			t.Fatalf("ferry run exited: %v", run.err)
		}
		return strings.Contains(run.out.String(), `msg="created stream and topic (--create-topics)" stream=shop topic=orders partitions=3`)
	})
	produce := ferryCmd(dir, env, slices.Concat([]string{"produce"}, composeProduceArgs,
		[]string{"--config", filepath.Join(repoRoot, "examples", "compose", "config.toml")})...)
	produce.Stdin = strings.NewReader(lines.String())
	if out, err := produce.CombinedOutput(); err != nil || !strings.Contains(string(out), "ferry: sent 1000 messages to shop/orders") {
		t.Fatalf("ferry produce: %v\n%s", err, out)
	}
	testkit.WaitFor(t, "1,000 rows in "+table, func() bool {
		if run.exited() {
			t.Fatalf("ferry run exited: %v", run.err)
		}
		return pgCount(db, "SELECT count(*) FROM information_schema.tables WHERE table_name = '"+table+"'") == 1 &&
			pgCount(db, "SELECT count(*) FROM "+table) >= 1000
	})
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	ids := pgCount(db, "SELECT count(DISTINCT (payload->>'id')::int) FROM "+table+" WHERE iggy_stream = 'shop' AND iggy_topic = 'orders'")
	partitions := pgCount(db, "SELECT count(DISTINCT iggy_partition_id) FROM "+table)
	if rows != 1000 || distinct != 1000 || ids != 1000 || partitions != 3 {
		t.Fatalf("%s: %d rows, %d distinct (partition, offset), %d distinct ids, %d partitions; want 1000, 1000, 1000, 3", table, rows, distinct, ids, partitions)
	}
	health := ferryCmd(dir, env, "health", "--config", filepath.Join(repoRoot, "examples", "compose", "config.toml"))
	if out, err := health.CombinedOutput(); err != nil {
		t.Fatalf("ferry health with the example's config: %v\n%s", err, out)
	}
	run.stop(30 * time.Second)
	if strings.Contains(run.out.String(), url) {
		t.Fatal("the example's run logged the connection string")
	}
}
