package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
)

// runHTTP measures a team server under load: the binary serves HTTP on a
// loopback port, and that many client sessions, each with its own token, call a mix
// of writes, reads, searches and lists as fast as the server answers, for
// ops calls each or until the budget runs out.
func runHTTP(ctx context.Context, cfg config, b backend, bin, tmp string, stdout, stderr io.Writer) error {
	home := filepath.Join(tmp, "home")
	root := filepath.Join(tmp, "workspace")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	env := []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		b.env(filepath.Join(home, ".prometheus", "memory.db")), "PROMETHEUS_WORKSPACE_ROOT=" + root,
		"PROMETHEUS_MEMORY_LOG_LEVEL=warn",
	}
	clients := cfg.httpClients
	tokens := make([]string, clients)
	for i := range tokens {
		cmd := exec.CommandContext(ctx, bin, "token", "create", "--tenant", "bench", "--user", fmt.Sprint("user", i%4), "--profile", fmt.Sprint("p", i))
		cmd.Env, cmd.Dir = env, root
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("token create: %w", err)
		}
		tokens[i] = strings.TrimSpace(string(out))
	}
	srv := exec.CommandContext(ctx, bin, "serve", "--http", "127.0.0.1:0", "--rate", "1000000")
	srv.Env, srv.Dir = env, root
	srv.Env[len(srv.Env)-1] = "PROMETHEUS_MEMORY_LOG_LEVEL=info" // for the address
	pipe, err := srv.StderrPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Process.Kill()
	url, err := serverURL(pipe)
	if err != nil {
		return err
	}
	go io.Copy(io.Discard, pipe)

	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		c := mcp.NewClient(&mcp.Implementation{Name: "memory-bench", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: url, HTTPClient: &http.Client{Transport: withToken{tokens[i]}}, DisableStandaloneSSE: true,
		}, nil)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer s.Close()
		sessions[i] = s
	}
	fmt.Fprintf(stderr, "memory-bench: %d clients over HTTP\n", clients)
	var mu sync.Mutex
	var durs []time.Duration
	var failures int
	var firstErr error
	begin := time.Now()
	deadline := begin.Add(cfg.budget)
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			recs := newRecords(cfg.seed+int64(i), 0) // one corpus per goroutine
			for j := 0; j < cfg.ops && time.Now().Before(deadline); j++ {
				tool, args := httpOp(recs, j)
				start := time.Now()
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				mine = append(mine, time.Since(start))
				if err == nil && res.IsError {
					err = fmt.Errorf("%s: %v", tool, res.Content)
				}
				if err != nil {
					mu.Lock()
					failures++
					if firstErr == nil {
						firstErr = fmt.Errorf("client %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			durs = append(durs, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(begin)
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		return fmt.Errorf("server after SIGTERM: %w", err)
	}
	if firstErr != nil {
		return fmt.Errorf("%d calls failed, the first: %w", failures, firstErr)
	}
	slices.Sort(durs)
	m := describeMachine()
	fmt.Fprintf(stdout, "## memory-mcp over HTTP: %d concurrent clients, on %s\n\n", clients, b.title())
	fmt.Fprintf(stdout, "| calls | requests/s | p50 | p99 | max |\n|---|---|---|---|---|\n")
	fmt.Fprintf(stdout, "| %d | %.0f | %s | %s | %s |\n\n", len(durs), float64(len(durs))/wall.Seconds(),
		ms(percentile(durs, 50)), ms(percentile(durs, 99)), ms(durs[len(durs)-1]))
	fmt.Fprintf(stdout, "Each client has its own token and session and calls, in turn, memory_write (a new project fact), memory_read (that key), memory_search and memory_list. %s, %s, %d CPUs.\n\n",
		m.platform, m.cpu, m.cpus)
	return nil
}

// httpOp is a client's jth call.
func httpOp(c *records, j int) (string, map[string]any) {
	key := fmt.Sprintf("load-%d", j/4)
	switch j % 4 {
	case 0:
		return "memory_write", map[string]any{"type": "semantic", "key": key, "body": c.body(memory.Semantic), "description": c.Description(), "tags": c.Tags()}
	case 1:
		return "memory_read", map[string]any{"key": key, "type": "semantic"}
	case 2:
		return "memory_search", map[string]any{"query": c.Query()}
	}
	return "memory_list", map[string]any{}
}

// serverURL reads the server's log until it says where it serves.
func serverURL(r io.Reader) (string, error) {
	re := regexp.MustCompile(`url=(\S+/mcp)`)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("the server stopped before serving")
}

type withToken struct{ token string }

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}
