package worq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testServer is a real `worq serve` process with its own data directory.
type testServer struct {
	t       *testing.T
	script  string
	dataDir string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	logs    *syncBuffer
	clients []*Client // closed after the server stopped
	args    []string  // extra `worq serve` flags
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serverScript finds dist/src/cli/worq.js above the working directory, or skips the test
// (fails it when WORQ_REQUIRE_ALL=1).
func serverScript(t *testing.T) string {
	t.Helper()
	unavailable := func(reason string) {
		if os.Getenv("WORQ_REQUIRE_ALL") == "1" {
			t.Fatalf("WORQ_REQUIRE_ALL=1 but %s", reason)
		}
		t.Skip(reason)
	}
	if _, err := exec.LookPath("node"); err != nil {
		unavailable("node is not installed: the integration tests need a real server")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		script := filepath.Join(dir, "dist", "src", "cli", "worq.js")
		if _, err := os.Stat(script); err == nil {
			return script
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			unavailable("dist/src/cli/worq.js is missing: run `npm run build` at the repository root")
		}
		dir = parent
	}
}

// startServer starts a server on a fresh data directory and a free port; it is stopped
// when the test ends.
func startServer(t *testing.T, args ...string) *testServer {
	t.Helper()
	s := &testServer{t: t, script: serverScript(t), dataDir: t.TempDir(), logs: &syncBuffer{}, args: args}
	s.start(0)
	t.Cleanup(func() {
		begin := time.Now()
		s.stop()
		if took := time.Since(begin); took > 2*time.Second {
			t.Logf("server took %s to stop", took)
		}
		for _, c := range s.clients {
			_ = c.Close()
		}
		if t.Failed() || os.Getenv("WORQ_TEST_SERVER_LOG_LEVEL") != "" {
			t.Logf("server log:\n%s", s.logs.String())
		}
	})
	return s
}

func (s *testServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// start runs the server on port (0: any free port) and waits for its listening line.
func (s *testServer) start(port int) {
	s.t.Helper()
	// --http-port 0: a restart passes a fixed --port, and the HTTP side would then take 7420,
	// which a parallel test (or another server on the machine) may hold.
	args := append([]string{s.script, "serve", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--http-port", "0",
		"--data-dir", s.dataDir, "--orphan-grace", "1s", "--log-level", logLevel()}, s.args...)
	cmd := exec.Command("node", args...)
	cmd.Stderr = s.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start server: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	found := make(chan int, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		sent := false
		for scanner.Scan() {
			line := scanner.Text()
			fmt.Fprintln(s.logs, line)
			var msg struct {
				GRPCPort int `json:"grpcPort"`
			}
			if !sent && strings.Contains(line, `"grpcPort"`) && json.Unmarshal([]byte(line), &msg) == nil {
				found <- msg.GRPCPort
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	select {
	case s.port = <-found:
	case <-s.exited:
		s.t.Fatalf("server exited before listening:\n%s", s.logs.String())
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		s.t.Fatalf("server did not print its port in 20 s:\n%s", s.logs.String())
	}
}

// stop sends SIGTERM and waits for the process to exit.
func (s *testServer) stop() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	s.cmd = nil
}

// restart stops the server and starts a new one on the same port and data directory.
func (s *testServer) restart() {
	s.t.Helper()
	port := s.port
	s.stop()
	s.start(port)
}

// testLogger writes the library's logs to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// dial connects a client to s.
func dial(t *testing.T, s *testServer) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.addr(), WithBlock(), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatalf("dial %s: %v", s.addr(), err)
	}
	// Closed once the server stopped: a connection closing while the server shuts down
	// can hold up its graceful stop for 5 s.
	s.clients = append(s.clients, c)
	return c
}

// runWorker runs w in the background; the returned function stops it and returns Run's error.
func runWorker(t *testing.T, w *Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("Run did not return 30 s after its context was cancelled")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitResult waits for a terminal job.
func waitResult(t *testing.T, c *Client, jid string, timeout time.Duration) *Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	job, err := c.WaitResult(ctx, jid, timeout)
	if err != nil {
		t.Fatalf("WaitResult %s: %v", jid, err)
	}
	return job
}

func submit(t *testing.T, c *Client, jobType string, opts ...SubmitOption) string {
	t.Helper()
	jid, err := c.Submit(context.Background(), jobType, opts...)
	if err != nil {
		t.Fatalf("Submit %s: %v", jobType, err)
	}
	return jid
}

func logLevel() string {
	if l := os.Getenv("WORQ_TEST_SERVER_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}
