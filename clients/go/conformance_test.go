package cowkv_test

// The conformance scenarios (../conformance/scenarios.json) through this
// client: builds the adapter (internal/conformanceadapter, one JSON op per
// line) and runs the shared driver (../conformance/driver.py) with it, which
// starts its own cowkvd processes and fails on the first step of a scenario
// whose outcome differs. COWKV_SCENARIO=name runs one scenario;
// COWKV_SCENARIOS=file another scenarios file.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestConformance(t *testing.T) {
	bin := serverBinary(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the conformance driver needs python3: %v", err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the adapter needs go on PATH: %v", err)
	}
	adapter := filepath.Join(t.TempDir(), "conformanceadapter")
	build := exec.Command(gobin, "build", "-o", adapter, "./internal/conformanceadapter")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/conformanceadapter: %v\n%s", err, out)
	}
	args := []string{"../conformance/driver.py", "--adapter", adapter, "--cowkvd", bin}
	if only := os.Getenv("COWKV_SCENARIO"); only != "" {
		args = append(args, "--only", only)
	}
	if file := os.Getenv("COWKV_SCENARIOS"); file != "" {
		args = append(args, "--scenarios", file)
	}
	out, err := exec.Command(python, args...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		t.Fatalf("conformance driver: %v\n%s", err, text)
	}
	t.Log(text[strings.LastIndex(text, "\n")+1:]) // the summary line
}
