package pb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

const regenerate = "cd clients/go && go generate ./... (then commit internal/pb/*.pb.go)"

// pbFiles maps the base names of dir's *.pb.go files to their contents.
func pbFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

// The committed stubs must be exactly what gen.sh makes from proto/ today.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	if _, err := os.Stat("../../../../proto/cowkv/v1"); err != nil {
		t.Skipf("not in a cowkv checkout (no proto/cowkv/v1: %v)", err)
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "./gen.sh", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh failed: %v\n%s", err, msg)
	}
	want, have := pbFiles(t, out), pbFiles(t, ".")
	if len(want) == 0 {
		t.Fatal("gen.sh generated no *.pb.go")
	}
	var stale []string
	for name, b := range want {
		if !bytes.Equal(have[name], b) {
			stale = append(stale, name)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			stale = append(stale, name+" (no longer generated)")
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Fatalf("internal/pb is out of date with proto/cowkv/v1: %v\nfix: %s", stale, regenerate)
	}
}
