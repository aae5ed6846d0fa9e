package cowkv_test

// The conformance runner: runs ../conformance/scenarios.json (format in
// ../conformance/README.md) against live cowkvd processes. The server
// binary is $COWKVD or ../../bazel-bin/server/cowkvd; the test is skipped
// when neither exists (unless COWKV_REQUIRE_SERVER=1).

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cowkv.dev/cowkv"
)

type scenario struct {
	Name       string          `json:"name"`
	Server     json.RawMessage `json:"server"`
	ClientSide bool            `json:"client_side"`
	Steps      []step          `json:"steps"`
}

type step struct {
	Op     string            `json:"op"`
	Args   map[string]any    `json:"args"`
	Expect map[string]any    `json:"expect"`
	Save   map[string]string `json:"save"`
}

// ---- cowkvd processes ----

type server struct {
	t      *testing.T
	bin    string
	device string
	args   []string
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	paused bool
}

var portLine = regexp.MustCompile(`\(port (\d+)\)`)

func startServer(t *testing.T, bin, dir, size, token string, extra ...string) *server {
	s := &server{t: t, bin: bin, device: filepath.Join(dir, "cowkv.img")}
	s.args = append([]string{"--device", s.device, "--create-size", size, "--listen", "127.0.0.1:0", "--metrics-listen", ""}, extra...)
	if token != "" {
		f := filepath.Join(dir, "token")
		if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.args = append(s.args, "--auth-token-file", f)
	}
	s.start()
	return s
}

func (s *server) start() {
	s.cmd = exec.Command(s.bin, s.args...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", s.bin, err)
	}
	port := make(chan string, 1)
	s.exited = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := portLine.FindStringSubmatch(sc.Text()); m != nil {
				port <- m[1]
			} else if testing.Verbose() {
				s.t.Logf("cowkvd: %s", sc.Text())
			}
		}
		s.cmd.Wait()
		close(s.exited)
	}()
	select {
	case p := <-port:
		s.addr = "127.0.0.1:" + p
	case <-s.exited:
		s.t.Fatalf("cowkvd exited at start: %v", s.cmd.ProcessState)
	case <-time.After(60 * time.Second):
		s.t.Fatal("cowkvd did not start in 60 s")
	}
}

// pause stops the process (SIGSTOP) and waits until every thread is stopped:
// the signal is asynchronous, and a thread still running could answer.
func (s *server) pause() {
	s.paused = true
	s.cmd.Process.Signal(syscall.SIGSTOP)
	pid := s.cmd.Process.Pid
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // a thread that just ended
			}
			st := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
			if len(st) == 0 || (st[0] != "T" && st[0] != "t") {
				stopped = false
			}
		}
		if stopped {
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("cowkvd %d not stopped 10 s after SIGSTOP", pid)
		}
	}
}

// resume continues a paused process (SIGCONT).
func (s *server) resume() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGCONT)
	}
	s.paused = false
}

func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	if s.paused {
		s.resume() // a step failed between pause_server and resume_server
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

func serverBinary(t *testing.T) string {
	bin := os.Getenv("COWKVD")
	if bin == "" {
		bin = "../../bazel-bin/server/cowkvd"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("COWKV_REQUIRE_SERVER") == "1" {
			t.Fatalf("cowkvd not found at %s (set COWKVD)", bin)
		}
		t.Skipf("cowkvd not found at %s (set COWKVD); skipping", bin)
	}
	abs, _ := filepath.Abs(bin)
	return abs
}

func deadAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// ---- the runner ----

type runner struct {
	t       *testing.T
	srv     *server
	addr    string
	db      *cowkv.DB
	opts    []cowkv.Option
	vars    map[string]any
	txs     map[string]*cowkv.Tx
	handles map[string]*cowkv.FileHandle
	watches map[string]watchHandle
	ctx     context.Context
	prefix  string
	own     bool // srv is the scenario's dedicated server
}

func (r *runner) connect(opts ...cowkv.Option) {
	if r.db != nil {
		r.db.Close()
	}
	r.opts = opts
	db, err := cowkv.Dial(r.ctx, r.addr, opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.db = db
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

// expand applies variables and byte specs (README "Values"); bytes become Go strings.
func (r *runner) expand(v any) any {
	switch x := v.(type) {
	case string:
		if m := varRef.FindStringSubmatch(x); m != nil && m[0] == x {
			return r.lookup(m[1])
		}
		return varRef.ReplaceAllStringFunc(x, func(s string) string {
			return fmt.Sprint(r.lookup(s[2 : len(s)-1]))
		})
	case map[string]any:
		if b, ok := x["base64"]; ok && len(x) == 1 {
			d, err := base64.StdEncoding.DecodeString(b.(string))
			if err != nil {
				r.t.Fatal(err)
			}
			return string(d)
		}
		if f, ok := x["fill"]; ok && len(x) == 2 {
			if n, ok := toInt(x["size"]); ok {
				fill := r.expand(f).(string)
				return strings.Repeat(fill, int(n)/len(fill)+1)[:n]
			}
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = r.expand(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.expand(e)
		}
		return out
	}
	return v
}

func (r *runner) lookup(name string) any {
	v, ok := r.vars[name]
	if !ok {
		r.t.Fatalf("undefined variable ${%s}", name)
	}
	return v
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		return int64(x), true
	case uint32:
		return int64(x), true
	}
	return 0, false
}

// match compares an expanded expectation with a canonical result.
func match(exp, act any, at string) error {
	switch e := exp.(type) {
	case map[string]any:
		if len(e) > 0 && allOps(e) {
			return matchOps(e, act, at)
		}
		a, ok := act.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %#v", at, act)
		}
		for k, ev := range e {
			av, ok := a[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing in result %v", at, k, a)
			}
			if err := match(ev, av, at+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		a, ok := act.([]any)
		if !ok || len(a) != len(e) {
			return fmt.Errorf("%s: want %d elements %v, got %v", at, len(e), short(e), short(act))
		}
		for i := range e {
			if err := match(e[i], a[i], fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if en, ok := toInt(exp); ok {
		if an, ok := toInt(act); ok && an == en {
			return nil
		}
	} else if exp == act {
		return nil
	}
	return fmt.Errorf("%s: want %v, got %v", at, short(exp), short(act))
}

func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

func allOps(m map[string]any) bool {
	for k := range m {
		if !strings.HasPrefix(k, "$") {
			return false
		}
	}
	return true
}

func matchOps(ops map[string]any, act any, at string) error {
	for op, arg := range ops {
		var ok bool
		a, _ := toInt(act)
		n, _ := toInt(arg)
		list, _ := act.([]any)
		switch op {
		case "$gt":
			ok = a > n
		case "$ge":
			ok = a >= n
		case "$lt":
			ok = a < n
		case "$le":
			ok = a <= n
		case "$ne":
			ok = match(arg, act, at) != nil
		case "$len":
			ok = len(list) == int(n)
		case "$min_len":
			ok = len(list) >= int(n)
		case "$contains", "$not_contains":
			for _, e := range list {
				if match(arg, e, at) == nil {
					ok = true
				}
			}
			ok = ok == (op == "$contains")
		case "$all":
			ok = true
			for i, e := range list {
				if err := match(arg, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%s: unknown matcher %s", at, op)
		}
		if !ok {
			return fmt.Errorf("%s: %s %v does not hold for %v", at, op, short(arg), short(act))
		}
	}
	return nil
}

func pathGet(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, _ := strconv.Atoi(p)
			v = x[i]
		}
	}
	return v
}

func (r *runner) runStep(i int, s step) {
	r.t.Helper()
	args, _ := r.expand(s.Args).(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	res, err := r.exec(s.Op, args)
	where := fmt.Sprintf("step %d (%s %s)", i, s.Op, short(s.Args))
	exp, _ := r.expand(s.Expect).(map[string]any)
	if want, ok := exp["error"].(string); ok {
		got := cowkv.ErrorClass(err)
		if got != want {
			r.t.Fatalf("%s: want error %s, got %s: %v (result %v)", where, want, got, err, short(res))
		}
		if want == "read_only" && !errors.Is(err, cowkv.ErrFailedPrecondition) ||
			want == "no_space" && !errors.Is(err, cowkv.ErrResourceExhausted) {
			r.t.Fatalf("%s: %v does not match its parent kind", where, err)
		}
		if want == "compacted" && !errors.Is(err, cowkv.ErrTooOld) {
			r.t.Fatalf("%s: %v is not an ErrTooOld", where, err)
		}
		if cr, ok := exp["compact_revision"]; ok {
			var ce *cowkv.Error
			errors.As(err, &ce)
			if err := match(cr, ce.CompactRevision, "compact_revision"); err != nil {
				r.t.Fatalf("%s: %v", where, err)
			}
		}
		if errno, ok := exp["errno"].(string); ok {
			var ce *cowkv.Error
			if errors.As(err, &ce); ce.Errno != errno {
				r.t.Fatalf("%s: want errno %s, got %q: %v", where, errno, ce.Errno, err)
			}
		}
		return
	}
	if err != nil {
		r.t.Fatalf("%s: unexpected error: %v", where, err)
	}
	if want, ok := exp["result"]; ok {
		if err := match(want, res, "result"); err != nil {
			r.t.Fatalf("%s: %v", where, err)
		}
	}
	for name, path := range s.Save {
		r.vars[name] = pathGet(res, path)
	}
}

func runScenario(t *testing.T, sc scenario, shared *server, bin, run string, addr string) {
	r := &runner{t: t, ctx: context.Background(), vars: map[string]any{"run": run,
		"sv": "c-" + run + "-" + sc.Name}, txs: map[string]*cowkv.Tx{}, watches: map[string]watchHandle{},
		handles: map[string]*cowkv.FileHandle{}}
	defer func() {
		for _, w := range r.watches {
			w.Close()
		}
	}()
	r.srv, r.addr = shared, addr
	if sc.Server != nil && addr == "" {
		var cfg struct {
			CreateSize string `json:"create_size"`
			AuthToken  string `json:"auth_token"`
		}
		json.Unmarshal(sc.Server, &cfg)
		if cfg.CreateSize == "" {
			cfg.CreateSize = "32M"
		}
		r.srv = startServer(t, bin, t.TempDir(), cfg.CreateSize, r.expand(cfg.AuthToken).(string))
		r.own = true
		defer r.srv.stop() // resumes a paused server first
	}
	if r.addr == "" {
		r.addr = r.srv.addr
	}
	r.connect()
	defer func() { r.db.Close() }()
	for i, s := range sc.Steps {
		r.runStep(i, s)
	}
}

func TestConformance(t *testing.T) {
	bin := serverBinary(t)
	file := os.Getenv("COWKV_SCENARIOS")
	if file == "" {
		file = "../conformance/scenarios.json"
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(f)
	dec.UseNumber()
	var parsed struct {
		Scenarios []scenario `json:"scenarios"`
	}
	if err := dec.Decode(&parsed); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run := fmt.Sprintf("%08x", time.Now().UnixNano()&0xffffffff)
	shared := startServer(t, bin, t.TempDir(), "256M", "")
	defer shared.stop()
	for _, sc := range parsed.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if only := os.Getenv("COWKV_SCENARIO"); only != "" && only != sc.Name {
				t.Skip("COWKV_SCENARIO=" + only)
			}
			runScenario(t, sc, shared, bin, run, "")
			if sc.ClientSide {
				// Bad-input pass: the same steps against a dead address must
				// give the same classes, so the client refused them itself.
				runScenario(t, sc, nil, bin, run, deadAddress(t))
			}
		})
	}
}
