package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one running memory-mcp and the client connected to it over
// its stdin and stdout, as an agent would launch it.
type session struct {
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr *tail
}

// launch starts the server and connects a client. It returns once the
// initialize result is in, with the time from starting the process to then.
func launch(ctx context.Context, bin string, env []string, dir string) (*session, time.Duration, error) {
	cmd := exec.Command(bin)
	cmd.Env = env
	cmd.Dir = dir
	s := &session{cmd: cmd, stderr: &tail{max: 64 << 10}}
	cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "memory-bench", Version: "1"}, nil)
	start := time.Now()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	took := time.Since(start)
	if err != nil {
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		return nil, took, fmt.Errorf("start %s: %w%s", bin, err, s.stderr.suffix())
	}
	s.cs = cs
	return s, took, nil
}

// close ends the session the way clients do: stdin closed, then a wait
// for the process to exit.
func (s *session) close() error {
	return s.cs.Close()
}

// call runs one tool call and fails on a tool error: in a benchmark one
// means the benchmark itself is wrong.
func (s *session) call(ctx context.Context, tool string, args map[string]any) error {
	_, err := s.result(ctx, tool, args)
	return err
}

// result is call's, with the tool's result.
func (s *session) result(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				b.WriteString(t.Text)
			}
		}
		return nil, fmt.Errorf("%s: tool error: %s", tool, b.String())
	}
	return res, nil
}

// resident is a server's resident set, in bytes, from /proc/PID/status:
// the peak (VmHWM) and, now, its anonymous memory (the heaps, SQLite's
// caches, stacks) and the pages mapped from files (the executable's code
// and read-only data, shared libraries, mapped database files). How many
// of a file's pages are mapped depends on how the kernel holds the file
// in its page cache as well as on what the process touched, so the split
// says which share a change can move.
type resident struct {
	peak, now, anon, file int64
}

// memory reads the server's resident set from /proc (Linux only).
func (s *session) memory() (resident, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return resident{}, err
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus reads a /proc/PID/status file's resident set fields.
func parseStatus(r io.Reader) (resident, error) {
	var m resident
	fields := map[string]*int64{"VmHWM": &m.peak, "VmRSS": &m.now, "RssAnon": &m.anon, "RssFile": &m.file}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		field, rest, ok := strings.Cut(sc.Text(), ":")
		dst := fields[field]
		if !ok || dst == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return resident{}, fmt.Errorf("parse %s: %w", field, err)
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		return resident{}, err
	}
	if m.peak == 0 {
		return resident{}, errors.New("no VmHWM in /proc status")
	}
	return m, nil
}

// split says what the resident set held at the end: anonymous memory and
// pages mapped from files; empty where the kernel does not tell.
func (m resident) split() string {
	if m.anon == 0 && m.file == 0 {
		return ""
	}
	return fmt.Sprintf("%s anonymous, %s mapped from files", mib(m.anon), mib(m.file))
}

// cpu reads the server's CPU time so far, user and system, from /proc
// (Linux only); 0 when it cannot. On a machine others share, the CPU time
// a call costs the server is steadier than its latency.
func (s *session) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(utime+stime) * tick
}

// op is one measured kind of call.
type op struct {
	name string
	tool string
	// args builds the arguments of call i; it runs outside the timing.
	args func(i int) map[string]any
	// settle waits after the op for the files it wrote to leave the
	// mirror's racy window, so that the next op's syncs do not pay for
	// this one's writes.
	settle bool
}

// limits bound how long one op may take.
type limits struct {
	count   int           // calls to measure
	warm    int           // calls before measuring, not counted
	budget  time.Duration // stop measuring an op after this long, having made at least one call
	timeout time.Duration // give up on a call after this long, and on the op with it
}

// sample is what measuring one op gave.
type sample struct {
	name     string
	durs     []time.Duration
	wall     time.Duration
	cpu      time.Duration // the server's CPU time over the timed calls; 0 if unknown
	timedOut bool
	note     string
}

// measure makes the calls of o one at a time and times each at the client,
// from sending the request to holding the decoded result.
func measure(ctx context.Context, s *session, o op, lim limits) (sample, error) {
	res := sample{name: o.name}
	once := func(i int) (time.Duration, error) {
		args := o.args(i)
		cctx, cancel := context.WithTimeout(ctx, lim.timeout)
		defer cancel()
		start := time.Now()
		err := s.call(cctx, o.tool, args)
		took := time.Since(start)
		if err != nil && cctx.Err() != nil && ctx.Err() == nil {
			res.timedOut = true
			res.note = fmt.Sprintf("timed out: one call took over %v", lim.timeout)
			return took, nil
		}
		return took, err
	}
	// Warm-up calls load what a first call loads (the tokenizer, pages of
	// the database); a slow op gets fewer of them.
	warmStart := time.Now()
	for i := range lim.warm {
		if _, err := once(lim.count + i); err != nil {
			return res, fmt.Errorf("%s: %w%s", o.name, err, s.stderr.suffix())
		}
		if res.timedOut || time.Since(warmStart) > lim.budget/4 {
			break
		}
	}
	if res.timedOut {
		return res, nil
	}
	start, cpu := time.Now(), s.cpu()
	for i := range lim.count {
		if i > 0 && time.Since(start) > lim.budget {
			res.note = fmt.Sprintf("stopped after %v", lim.budget)
			break
		}
		d, err := once(i)
		if err != nil {
			return res, fmt.Errorf("%s: %w%s", o.name, err, s.stderr.suffix())
		}
		if res.timedOut {
			break
		}
		res.durs = append(res.durs, d)
	}
	res.wall = time.Since(start)
	if end := s.cpu(); cpu > 0 && end > cpu {
		res.cpu = end - cpu
	}
	return res, nil
}

// tail keeps the last max bytes written to it: the server's log, shown
// when something fails.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// suffix is the log, ready to end an error message, or "".
func (t *tail) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == 0 {
		return ""
	}
	return "\nserver log:\n" + string(t.buf)
}
