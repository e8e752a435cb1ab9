package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory/team"
)

// syncBench is one backend's team sync figures.
type syncBench struct {
	backend       string
	n             int
	push, pull    time.Duration // one machine pushing n changes; a new one pulling them
	tenants, each int
	idle          int64   // the server's resident set before any tenant is active
	active        []int   // tenants active at each step
	rss           []int64 // the resident set after each step
	seedRate      float64 // changes a second pushed straight to the endpoint
}

// runSync measures team sync on the store of b: a machine pushing
// cfg.n changes through memory-mcp sync, a new machine pulling them, and
// the team server's memory with tenants × each records as more of the
// tenants become active.
func runSync(ctx context.Context, cfg config, b backend, bin, tmp string, stderr io.Writer) (syncBench, error) {
	res := syncBench{backend: b.title(), n: cfg.n, tenants: cfg.syncTenants, each: cfg.syncEach}
	srvEnv := benchEnv(b, filepath.Join(tmp, "server"))
	tok := func(tenant, user string) (string, error) {
		out, err := benchCmd(ctx, bin, srvEnv, "", "token", "create", "--tenant", tenant, "--user", user)
		return strings.TrimSpace(out), err
	}
	srv, url, err := startBenchServer(ctx, bin, srvEnv)
	if err != nil {
		return res, err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()

	// One machine pushes n changes; a new one pulls them.
	alice, err := tok("bench", "alice")
	if err != nil {
		return res, err
	}
	// Machines are on SQLite; the server on b.
	machine := backend{name: "sqlite"}
	a := append(benchEnv(machine, filepath.Join(tmp, "alice")), "PROMETHEUS_MEMORY_TEAM_URL="+url, "PROMETHEUS_MEMORY_TEAM_TOKEN="+alice)
	var lines strings.Builder
	for i := range cfg.n {
		fmt.Fprintf(&lines, `{"scope":"tenant","type":"semantic","key":"fact-%06d","body":"fact %d of the sync benchmark, about deploys and tests"}`+"\n", i, i)
	}
	f := filepath.Join(tmp, "facts.jsonl")
	if err := os.WriteFile(f, []byte(lines.String()), 0o600); err != nil {
		return res, err
	}
	if _, err := benchCmd(ctx, bin, a, "", "import", f); err != nil {
		return res, err
	}
	start := time.Now()
	if _, err := benchCmd(ctx, bin, a, "", "sync"); err != nil {
		return res, err
	}
	res.push = time.Since(start)
	bob, err := tok("bench", "bob")
	if err != nil {
		return res, err
	}
	bm := append(benchEnv(machine, filepath.Join(tmp, "bob")), "PROMETHEUS_MEMORY_TEAM_URL="+url, "PROMETHEUS_MEMORY_TEAM_TOKEN="+bob)
	start = time.Now()
	if _, err := benchCmd(ctx, bin, bm, "", "sync"); err != nil {
		return res, err
	}
	res.pull = time.Since(start)
	fmt.Fprintf(stderr, "memory-bench: %s: pushed and pulled %d changes\n", b.title(), cfg.n)

	// Tenants of records each, pushed straight to the endpoint.
	toks := make([]string, cfg.syncTenants)
	start = time.Now()
	for t := range toks {
		if toks[t], err = tok(fmt.Sprintf("tenant-%03d", t), "u"); err != nil {
			return res, err
		}
		for i := 0; i < cfg.syncEach; i += team.MaxPush {
			var cs []team.Change
			for j := i; j < min(cfg.syncEach, i+team.MaxPush); j++ {
				cs = append(cs, team.Change{ID: team.NewID(), Scope: "tenant", Type: "semantic", Key: fmt.Sprintf("k-%05d", j), Op: team.OpPut,
					Record: &team.Version{Body: fmt.Sprintf("record %d of tenant %d: how this team builds, tests and ships", j, t)}})
			}
			if err := benchPush(ctx, url, toks[t], cs); err != nil {
				return res, err
			}
		}
	}
	res.seedRate = float64(cfg.syncTenants*cfg.syncEach) / time.Since(start).Seconds()
	fmt.Fprintf(stderr, "memory-bench: %s: %d tenants of %d records seeded\n", b.title(), cfg.syncTenants, cfg.syncEach)

	// A fresh server process, then more and more tenants pulling all.
	srv.Process.Kill()
	srv.Wait()
	if srv, url, err = startBenchServer(ctx, bin, srvEnv); err != nil {
		return res, err
	}
	if res.idle, err = rssOf(srv.Process.Pid); err != nil {
		return res, err
	}
	done := 0
	for _, k := range []int{1, 10, 50, 100} {
		if k > cfg.syncTenants {
			break
		}
		for ; done < k; done++ {
			for after := int64(0); ; {
				page, err := benchPull(ctx, url, toks[done], after)
				if err != nil {
					return res, err
				}
				if after = page.Next; !page.More {
					break
				}
			}
		}
		rss, err := rssOf(srv.Process.Pid)
		if err != nil {
			return res, err
		}
		res.active, res.rss = append(res.active, k), append(res.rss, rss)
	}
	return res, nil
}

func (r syncBench) write(w io.Writer) {
	fmt.Fprintf(w, "## Team sync on %s\n\n", r.backend)
	fmt.Fprintf(w, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(w, "| push: one machine, memory-mcp sync | %s changes in %.2f s: %.0f changes/s |\n", thousands(r.n), r.push.Seconds(), float64(r.n)/r.push.Seconds())
	fmt.Fprintf(w, "| pull: a new machine, memory-mcp sync | %s changes in %.2f s: %.0f changes/s |\n", thousands(r.n), r.pull.Seconds(), float64(r.n)/r.pull.Seconds())
	fmt.Fprintf(w, "| push straight to the endpoint (batches of %d) | %.0f changes/s |\n", team.MaxPush, r.seedRate)
	fmt.Fprintf(w, "| server resident set, %d tenants of %s records stored, none active | %s |\n", r.tenants, thousands(r.each), mib(r.idle))
	for i, k := range r.active {
		fmt.Fprintf(w, "| … after %d tenants pulled everything | %s |\n", k, mib(r.rss[i]))
	}
	fmt.Fprintln(w)
}

func benchEnv(b backend, home string) []string {
	os.MkdirAll(filepath.Join(home, "ws"), 0o755)
	return []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), b.env(filepath.Join(home, "memory.db")),
		"PROMETHEUS_WORKSPACE_ROOT=" + filepath.Join(home, "ws"), "PROMETHEUS_MEMORY_LOG_LEVEL=warn"}
}

func benchCmd(ctx context.Context, bin string, env []string, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Stdin = env, strings.NewReader(stdin)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", args[0], err, strings.TrimSpace(errOut.String()))
	}
	return string(out), nil
}

func startBenchServer(ctx context.Context, bin string, env []string) (*exec.Cmd, string, error) {
	srv := exec.CommandContext(ctx, bin, "serve", "--http", "127.0.0.1:0", "--rate", "1000000")
	srv.Env = append(append([]string{}, env[:len(env)-1]...), "PROMETHEUS_MEMORY_LOG_LEVEL=info")
	pipe, err := srv.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := srv.Start(); err != nil {
		return nil, "", err
	}
	u, err := serverURL(pipe)
	if err != nil {
		srv.Process.Kill()
		return nil, "", err
	}
	go io.Copy(io.Discard, pipe)
	return srv, strings.TrimSuffix(u, "/mcp"), nil
}

func benchPush(ctx context.Context, url, tok string, cs []team.Change) error {
	b, _ := json.Marshal(team.PushRequest{Changes: cs})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+team.PushPath, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out team.PushResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("push: %s %v", resp.Status, err)
	}
	for _, r := range out.Results {
		if r.Status != team.Stored {
			return fmt.Errorf("push: %s", r.Reason)
		}
	}
	return nil
}

func benchPull(ctx context.Context, url, tok string, after int64) (team.PullResponse, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s%s?after=%d&limit=%d", url, team.PullPath, after, team.MaxPull), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	var out team.PullResponse
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("pull: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// rssOf reads a process's resident set from /proc (Linux only).
func rssOf(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	m, err := parseStatus(f)
	return m.now, err
}
