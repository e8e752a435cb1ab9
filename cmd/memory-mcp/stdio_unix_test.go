//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// blockingPipe returns a pipe made as most clients make a child's stdin:
// both ends blocking.
func blockingPipe(t testing.TB) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(p[0]), "pipe r"), os.NewFile(uintptr(p[1]), "pipe w")
}

// socketPair returns a connected pair of blocking Unix sockets, as Node
// makes a child's stdin and stdout.
func socketPair(t testing.TB) (a, b *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "socket a"), os.NewFile(uintptr(fds[1]), "socket b")
}

// socketWriter returns a writer of the socket s that, when closed, shuts
// s down for writing, as Node ends a child's stdin: the server reads the
// end of its input while the client still reads its output.
func socketWriter(tb testing.TB, s *os.File) io.WriteCloser {
	tb.Helper()
	fd, err := unix.Dup(int(s.Fd()))
	if err != nil {
		tb.Fatal(err)
	}
	return shutdownWriter{os.NewFile(uintptr(fd), "socket w")}
}

type shutdownWriter struct{ *os.File }

func (w shutdownWriter) Close() error {
	unix.Shutdown(int(w.Fd()), unix.SHUT_WR)
	return w.File.Close()
}

// startOver starts e's stdio server reading stdin and writing stdout, and
// connects a real MCP client through r (the server's output) and w (its
// input). Closing the session closes r and w.
func startOver(tb testing.TB, e env, stdin, stdout, r *os.File, w io.WriteCloser) (*mcp.ClientSession, *exec.Cmd, *strings.Builder) {
	tb.Helper()
	cmd := e.command()
	var stderr strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: r, Writer: w}, nil)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		tb.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	return cs, cmd, &stderr
}

// exercise pings the server and writes and reads a fact through it.
func exercise(t *testing.T, cs *mcp.ClientSession, key string) {
	t.Helper()
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": key, "body": "Read over " + key + "."})
	if got := bodyOf(t, cs, key); got != "Read over "+key+"." {
		t.Fatalf("read back %q", got)
	}
}

// endsCleanly closes the client's side and waits for the server to end.
func endsCleanly(t *testing.T, cs *mcp.ClientSession, cmd *exec.Cmd, stderr *strings.Builder) {
	t.Helper()
	cs.Close()
	ends(t, cmd, stderr, "when its input closed")
}

// ends waits for the server to end, with no error, on what when says.
func ends(t *testing.T, cmd *exec.Cmd, stderr *strings.Builder, when string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server ended %s with %v\nstderr: %s", when, err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("server did not end %s\nstderr: %s", when, stderr.String())
	}
}

// overSockets starts e's stdio server with stdin and stdout each one end
// of a socket pair, as Node gives a child them, and connects a client
// through the other ends.
func overSockets(tb testing.TB, e env) (*mcp.ClientSession, *exec.Cmd, *strings.Builder) {
	tb.Helper()
	inClient, inServer := socketPair(tb)
	outClient, outServer := socketPair(tb)
	cs, cmd, stderr := startOver(tb, e, inServer, outServer, outClient, socketWriter(tb, inClient))
	outServer.Close()
	inClient.Close() // the client writes through its duplicate
	tb.Cleanup(func() { inServer.Close() })
	return cs, cmd, stderr
}

// TestStdioOverASocket runs the server as Node starts a child, the way
// most agents are: stdin and stdout each one end of a socket pair. It
// answers over them and ends when the client shuts its side of stdin.
func TestStdioOverASocket(t *testing.T) {
	cs, cmd, stderr := overSockets(t, newEnv(t))
	exercise(t, cs, "over-a-socket")
	endsCleanly(t, cs, cmd, stderr)
}

// TestStdioEndsOnHangup: a server whose terminal went away (a hangup)
// ends cleanly, with no error logged.
func TestStdioEndsOnHangup(t *testing.T) {
	cs, cmd, stderr := overSockets(t, newEnv(t))
	defer cs.Close()
	exercise(t, cs, "before-a-hangup")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	ends(t, cmd, stderr, "on a hangup")
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Fatalf("a hangup logged an error:\n%s", stderr.String())
	}
}

// TestHangupIgnoredUnderNohup: a server started with hangups ignored, as
// nohup starts it, keeps them ignored and serves on after one.
func TestHangupIgnoredUnderNohup(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command("/bin/sh", "-c", `trap "" HUP; exec "$0"`, binary)
	cmd.Env, cmd.Dir = e.vars(), e.root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	if err := cs.Ping(context.Background(), nil); err != nil { // the shell has exec'd the server
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	exercise(t, cs, "after-an-ignored-hangup")
	cs.Close()
}

// TestStdioOverOneSocket runs the server with stdin and stdout the same
// socket, as inetd or socat give them: a long answer gets through whole.
func TestStdioOverOneSocket(t *testing.T) {
	e := newEnv(t)
	client, server := socketPair(t)
	defer server.Close()
	cs, cmd, stderr := startOver(t, e, server, server, client, socketWriter(t, client))
	exercise(t, cs, "over-one-socket")
	// An answer longer than the socket's buffer, written while the
	// client is not reading yet.
	body := strings.Repeat("A long fact that fills the socket. ", 1800)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "long-one", "body": body})
	if got := bodyOf(t, cs, "long-one"); got != strings.TrimSpace(body) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(strings.TrimSpace(body)))
	}
	endsCleanly(t, cs, cmd, stderr)
}

// TestStdioSocketThatIsStderr: the server serves over a socket that is
// its stdin and its stderr both, its log lines going to it.
func TestStdioSocketThatIsStderr(t *testing.T) {
	e := newEnv(t)
	inClient, inServer := socketPair(t)
	outClient, outServer := socketPair(t)
	defer inServer.Close()
	cmd := e.command()
	cmd.Env = append(cmd.Env, "PROMETHEUS_MEMORY_LOG_LEVEL=debug")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inServer, outServer, inServer
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outServer.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outClient, Writer: socketWriter(t, inClient)}, nil)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	defer inClient.Close() // where the server's log goes, read or not, until it ends
	exercise(t, cs, "stdin-and-stderr")
	endsCleanly(t, cs, cmd, &strings.Builder{})
}

// BenchmarkStdioRoundTrip is a call's round trip to the real server over
// pipes and over socket pairs (as Node gives a child its stdin and stdout): a ping, which the SDK answers (the cost
// of reading a line, handing it on and writing the answer), and a
// project fact's write, which creates its markdown file.
func BenchmarkStdioRoundTrip(b *testing.B) {
	for _, over := range []string{"pipe", "socket"} {
		e := newEnv(b)
		var cs *mcp.ClientSession
		var cmd *exec.Cmd
		if over == "pipe" {
			inR, inW := blockingPipe(b)
			outR, outW := blockingPipe(b)
			cs, cmd, _ = startOver(b, e, inR, outW, outR, inW)
			inR.Close()
			outW.Close()
		} else {
			cs, cmd, _ = overSockets(b, e)
		}
		b.Run(over+"/ping", func(b *testing.B) {
			benchMeasure(b, func(ctx context.Context) error { return cs.Ping(ctx, nil) })
		})
		i := 0 // across runs: each write makes a new file
		b.Run(over+"/write", func(b *testing.B) {
			benchMeasure(b, func(ctx context.Context) error {
				i++
				key := over + "-fact-" + strconv.Itoa(i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_write", Arguments: map[string]any{
					"type": "semantic", "key": key, "description": "A fact written over " + over,
					"body": "The build runs on two cores; fact number " + strconv.Itoa(i) + " says so.", "tags": []string{"bench", over}}})
				if err == nil && res.IsError {
					err = fmt.Errorf("tool error: %v", res.Content)
				}
				return err
			})
		})
		cs.Close()
		cmd.Wait()
	}
}

// TestSocketInputEndsWithWritesInFlight sends, over a Node-style socket,
// many writes at once (non-ASCII bodies, one holding a secret) and shuts
// its side at once: every write is answered, the secret is refused
// without being echoed or written to the log, and every other fact is
// there for the next server, none lost to the input ending.
func TestSocketInputEndsWithWritesInFlight(t *testing.T) {
	e := newEnv(t)
	inClient, inServer := socketPair(t)
	outClient, outServer := socketPair(t)
	defer inServer.Close()
	cmd := e.command()
	var stderr strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inServer, outServer, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outServer.Close()
	token := fakeToken()
	const n = 40
	var lines strings.Builder
	lines.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	lines.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf("Fakt %d: Größe über alles — 日本語の本文 %d.", i, i)
		if i == n/2 {
			body = "export GITHUB_TOKEN=" + token
		}
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "tools/call",
			"params": map[string]any{"name": "memory_write", "arguments": map[string]any{"type": "semantic", "key": fmt.Sprintf("fact-%d", i), "body": body}}})
		lines.Write(append(line, '\n'))
	}
	if _, err := inClient.Write([]byte(lines.String())); err != nil {
		t.Fatal(err)
	}
	unix.Shutdown(int(inClient.Fd()), unix.SHUT_WR)
	out, err := io.ReadAll(outClient)
	if err != nil {
		t.Fatal(err)
	}
	ends(t, cmd, &stderr, "when its input ended")
	inClient.Close()
	answered := map[int]string{}
	for line := range strings.Lines(string(out)) {
		var f struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("not a frame on stdout: %q", line)
		}
		answered[f.ID] = string(f.Result)
	}
	for i := 1; i <= n; i++ {
		got, seen := answered[i]
		switch {
		case !seen:
			t.Errorf("write %d was not answered", i)
		case i == n/2 && !strings.Contains(got, "secret_rejected"):
			t.Errorf("the secret was not refused: %s", got)
		case i != n/2 && strings.Contains(got, `"isError":true`):
			t.Errorf("write %d failed: %s", i, got)
		}
	}
	if strings.Contains(string(out), token[4:12]) || strings.Contains(stderr.String(), token[4:12]) {
		t.Error("the secret came back on stdout or went to the log")
	}
	cs := connect(t, e, nil)
	for i := 1; i <= n; i++ {
		if i == n/2 {
			continue
		}
		if got, want := bodyOf(t, cs, fmt.Sprintf("fact-%d", i)), fmt.Sprintf("Fakt %d: Größe über alles — 日本語の本文 %d.", i, i); got != want {
			t.Errorf("fact-%d = %q, want %q", i, got, want)
		}
	}
}
