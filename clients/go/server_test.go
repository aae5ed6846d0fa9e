package cowkv_test

// Live cowkvd processes for the tests: $COWKVD or ../../bazel-bin/server/cowkvd
// on a fresh device in a temp dir, on a free loopback port. A test is skipped
// when neither binary exists (unless COWKV_REQUIRE_SERVER=1).

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
