//go:build unix && !aix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// nonBlocking reports whether f's description is in non-blocking mode.
func nonBlocking(t testing.TB, f *os.File) bool {
	t.Helper()
	var flags int
	var ferr error
	c, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}

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

// readTimesOut checks that a read of r, which has nothing to read, ends at
// a deadline: only a reader the runtime polls has deadlines.
func readTimesOut(t *testing.T, r io.Reader) {
	t.Helper()
	f, ok := r.(*os.File)
	if !ok {
		t.Fatalf("got a %T, want an *os.File", r)
	}
	if err := f.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatalf("no deadline on the input, so it is not polled: %v", err)
	}
	if _, err := f.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read of an empty input: %v, want the deadline", err)
	}
}

func TestPollableInput(t *testing.T) {
	t.Run("pipe: a description of its own", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("reopened through /proc on Linux only")
		}
		r, w := blockingPipe(t)
		defer r.Close()
		defer w.Close()
		in, release := pollable(r, nil)
		if in == io.Reader(r) {
			t.Fatal("a blocking pipe was left to block the processor")
		}
		readTimesOut(t, in)
		if nonBlocking(t, r) {
			t.Fatal("the pipe's given description was put in non-blocking mode; whoever shares it would see reads fail")
		}
		// It reads the same pipe, to its end.
		w.Write([]byte("one line\n"))
		w.Close()
		in.(*os.File).SetReadDeadline(time.Time{})
		got, err := io.ReadAll(in)
		if err != nil || string(got) != "one line\n" {
			t.Fatalf("read %q, %v", got, err)
		}
		release()
		if _, err := in.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("after release, a read: %v, want it closed", err)
		}
		if nonBlocking(t, r) {
			t.Fatal("the given description is non-blocking after release")
		}
	})
	t.Run("socket: non-blocking while read, as it was after", func(t *testing.T) {
		a, b := socketPair(t)
		defer a.Close()
		defer b.Close()
		in, release := pollable(b, nil)
		if in == io.Reader(b) {
			t.Fatal("a blocking socket was left to block the processor")
		}
		readTimesOut(t, in)
		if !nonBlocking(t, b) {
			t.Fatal("the socket shares its description with its duplicate, which the poller needs non-blocking")
		}
		a.Write([]byte("x"))
		in.(*os.File).SetReadDeadline(time.Time{})
		if n, err := in.Read(make([]byte, 8)); n != 1 || err != nil {
			t.Fatalf("read %d, %v", n, err)
		}
		release()
		if nonBlocking(t, b) {
			t.Fatal("the socket was left non-blocking after release")
		}
		// b itself still works, blocking.
		a.Write([]byte("y"))
		if n, err := b.Read(make([]byte, 8)); n != 1 || err != nil {
			t.Fatalf("read of the given socket after release: %d, %v", n, err)
		}
	})
	t.Run("polled already: as it is", func(t *testing.T) {
		r, w, err := os.Pipe() // non-blocking and polled
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		in, release := pollable(r, nil)
		release()
		if in != io.Reader(r) {
			t.Fatal("a reader polled already was replaced")
		}
		readTimesOut(t, r) // and release left it alone
	})
	t.Run("file and reader: as they are", func(t *testing.T) {
		f, err := os.Create(filepath.Join(t.TempDir(), "input"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if in, release := pollable(f, nil); in != io.Reader(f) {
			t.Fatal("a regular file was replaced")
		} else {
			release()
		}
		sr := strings.NewReader("x")
		if in, release := pollable(sr, nil); in != io.Reader(sr) {
			t.Fatal("a reader that is no file was replaced")
		} else {
			release()
		}
		if _, err := f.Write([]byte("still open")); err != nil {
			t.Fatalf("release closed the file: %v", err)
		}
	})
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
// through the other ends; it returns stdin's end too, kept open to look at
// its description.
func overSockets(tb testing.TB, e env) (*mcp.ClientSession, *exec.Cmd, *strings.Builder, *os.File) {
	tb.Helper()
	inClient, inServer := socketPair(tb)
	outClient, outServer := socketPair(tb)
	cs, cmd, stderr := startOver(tb, e, inServer, outServer, outClient, socketWriter(tb, inClient))
	outServer.Close()
	inClient.Close() // the client writes through its duplicate
	tb.Cleanup(func() { inServer.Close() })
	return cs, cmd, stderr, inServer
}

// TestStdioOverASocket runs the server as Node starts a child, the way
// most agents are: stdin and stdout each one end of a socket pair. It
// answers over them, ends when the client shuts its side of stdin, and
// leaves stdin's description blocking, as it was given, for whoever
// shares it.
func TestStdioOverASocket(t *testing.T) {
	cs, cmd, stderr, inServer := overSockets(t, newEnv(t))
	exercise(t, cs, "over-a-socket")
	if !nonBlocking(t, inServer) {
		t.Fatal("the server reads its socket blocking: each read keeps its one processor")
	}
	endsCleanly(t, cs, cmd, stderr)
	if nonBlocking(t, inServer) {
		t.Fatal("the server left its stdin's description non-blocking")
	}
}

// TestStdioSocketPutBackOnHangup: a server that ends on a hangup (its
// terminal went away) still puts its stdin's description back.
func TestStdioSocketPutBackOnHangup(t *testing.T) {
	cs, cmd, stderr, inServer := overSockets(t, newEnv(t))
	defer cs.Close()
	exercise(t, cs, "before-a-hangup")
	if !nonBlocking(t, inServer) {
		t.Fatal("the server reads its socket blocking")
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	ends(t, cmd, stderr, "on a hangup")
	if nonBlocking(t, inServer) {
		t.Fatal("a hangup left the server's stdin non-blocking")
	}
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
// socket, as inetd or socat give them: its description stays blocking,
// or the answers written to it would fail when it is full instead of
// waiting; a long answer gets through whole.
func TestStdioOverOneSocket(t *testing.T) {
	e := newEnv(t)
	client, server := socketPair(t)
	defer server.Close()
	cs, cmd, stderr := startOver(t, e, server, server, client, socketWriter(t, client))
	exercise(t, cs, "over-one-socket")
	if nonBlocking(t, server) {
		t.Fatal("the server made the socket it also writes to non-blocking")
	}
	// An answer longer than the socket's buffer, written while the
	// client is not reading yet.
	body := strings.Repeat("A long fact that fills the socket. ", 1800)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "long-one", "body": body})
	if got := bodyOf(t, cs, "long-one"); got != strings.TrimSpace(body) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(strings.TrimSpace(body)))
	}
	endsCleanly(t, cs, cmd, stderr)
}

// TestStdioSocketThatIsStderr: a socket that is stdin and stderr both
// stays blocking too: the server's log lines go to it.
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
	if nonBlocking(t, inServer) {
		t.Fatal("the server made the socket it logs to non-blocking")
	}
	endsCleanly(t, cs, cmd, &strings.Builder{})
}

// TestStdioPipeReadOnItsOwn runs the server on pipes, and checks that it
// reads its input through a non-blocking description of its own, leaving
// the one it was given as it was.
func TestStdioPipeReadOnItsOwn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reopened through /proc on Linux only")
	}
	e := newEnv(t)
	inR, inW := blockingPipe(t)
	outR, outW := blockingPipe(t)
	defer inR.Close() // kept, to look at the description the server was given
	cs, cmd, stderr := startOver(t, e, inR, outW, outR, inW)
	outW.Close()
	exercise(t, cs, "over-a-pipe")
	if nonBlocking(t, inR) {
		t.Fatal("the server put the pipe's shared description in non-blocking mode")
	}
	if !readsOwnNonBlocking(t, cmd.Process.Pid, inR) {
		t.Fatal("the server has no non-blocking description of its input pipe: its reads block its one processor")
	}
	endsCleanly(t, cs, cmd, stderr)
	if nonBlocking(t, inR) {
		t.Fatal("the pipe's description is non-blocking after the server ended")
	}
}

// readsOwnNonBlocking reports whether process pid has, besides its stdin,
// a non-blocking descriptor of the pipe p.
func readsOwnNonBlocking(t *testing.T, pid int, p *os.File) bool {
	t.Helper()
	fi, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("no inode in %T", fi.Sys())
	}
	want := fmt.Sprintf("pipe:[%d]", st.Ino)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if ent.Name() == "0" {
			continue
		}
		if link, err := os.Readlink(filepath.Join(dir, ent.Name())); err != nil || link != want {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(info)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "flags:"); ok {
				flags, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
				if err != nil {
					t.Fatal(err)
				}
				if flags&unix.O_NONBLOCK != 0 {
					return true
				}
			}
		}
	}
	return false
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
			cs, cmd, _, _ = overSockets(b, e)
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
// there for the next server, none lost to the input ending or to the
// socket's mode going back.
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
	if nonBlocking(t, inServer) {
		t.Error("the socket was left non-blocking")
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
