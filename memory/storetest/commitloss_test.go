package storetest_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/scope"
)

// cutProxy stands between the store and PostgreSQL on loopback and, when
// armed, cuts the connection that sends the next COMMIT: before the
// server gets it (the transaction never commits) or after (it commits,
// and its answer is lost on the way back).
type cutProxy struct {
	ln     net.Listener
	server string
	mu     sync.Mutex
	mode   string // "before", "after", "hold", "midway" or "" (pass everything)
	fired  chan struct{}
	held   []net.Conn  // server connections left open by "hold"
	down   atomic.Bool // refuse every new connection (set by "after, down")
}

func startCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, server: server}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.held {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.serve(c) }()
		}
	}()
	return p
}

func (p *cutProxy) arm(mode string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.fired = mode, make(chan struct{})
	return p.fired
}

func (p *cutProxy) peek() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

func (p *cutProxy) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.mode
	if m != "" {
		p.mode = ""
		close(p.fired)
	}
	return m
}

func (p *cutProxy) serve(client net.Conn) {
	defer client.Close()
	if p.down.Load() {
		return
	}
	server, err := net.Dial("tcp", p.server)
	if err != nil {
		return
	}
	var mute atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && !mute.Load() {
				client.Write(buf[:n])
			}
			if err != nil {
				client.Close()
				return
			}
		}
	}()
	defer func() {
		// What was sent is the server's to finish: close its side only
		// once it has had the time to; a held one stays open.
		p.mu.Lock()
		held := slices.Contains(p.held, server)
		p.mu.Unlock()
		if !held {
			time.AfterFunc(time.Second, func() { server.Close() })
			<-done
		}
	}()
	// hold cuts the client off and leaves the server's side open: the
	// server never learns its client is gone, and its process waits in
	// the transaction, holding what it locked.
	hold := func() {
		mute.Store(true)
		client.Close()
		p.mu.Lock()
		p.held = append(p.held, server)
		p.mu.Unlock()
	}
	r := bufio.NewReader(client)
	startup, midway := true, false
	for {
		var head []byte
		if startup {
			head = make([]byte, 4)
		} else {
			head = make([]byte, 5)
		}
		if _, err := io.ReadFull(r, head); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[len(head)-4:])
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		msg := append(head, body...)
		if midway {
			// The transaction began; its next statement never arrives.
			hold()
			return
		}
		if !startup && head[0] == 'Q' && strings.Contains(string(body), "pg_advisory_xact_lock(") && p.peek() == "midway" {
			p.take()
			midway = true
		}
		if !startup && head[0] == 'Q' && strings.EqualFold(strings.TrimRight(string(body), "\x00; "), "commit") {
			switch p.take() {
			case "before":
				server.Close()
				return
			case "hold":
				hold()
				return
			case "after, down":
				p.down.Store(true)
				fallthrough
			case "after":
				mute.Store(true)
				server.Write(msg)
				client.Close()
				return
			}
		}
		startup = false
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// A connection cut at COMMIT, before the server has it or after it has
// committed: the store finds out which, so the write is acknowledged once
// and saved once, and the uses it carried count once. Where the server
// does not notice the cut (a network gone quiet rather than closed), its
// process is left in the transaction holding the write lock, at COMMIT or
// in the middle: the store ends it rather than wait on the lock behind it.
func TestPostgresCommitCut(t *testing.T) {
	for _, mode := range []string{"before", "after", "hold", "midway"} {
		t.Run(mode, func(t *testing.T) {
			target, proxy, s, p, w := readOnceBehindProxy(t, "/work/cut")
			ctx := context.Background()
			fired := proxy.arm(mode)
			w.Key, w.Body = "cut", "written while the connection was cut"
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, _, err := s.Put(wctx, p, w); err != nil {
				t.Errorf("put across a cut %s commit: %v", mode, err)
			}
			select {
			case <-fired:
			default:
				t.Fatal("no commit was cut")
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			check := storetest.Open(t, target, nil)
			r, err := check.Peek(ctx, p.ID, memory.Selector{Key: "cut"})
			if err != nil || r.Body != w.Body {
				t.Errorf("the write after the cut = %+v, %v", r, err)
			}
			if r, err := check.Peek(ctx, p.ID, memory.Selector{Key: "used"}); err != nil || r.UseCount != 1 {
				t.Errorf("use count = %d, %v; want 1", r.UseCount, err)
			}
		})
	}
}

// readOnceBehindProxy opens a store on a fresh database through a proxy
// that can cut its connection, and writes a record at root and reads it
// once, so that a use waits to be counted. It returns the database's own
// URL, the proxy, the store, the project and the record's write.
func readOnceBehindProxy(t *testing.T, root string) (string, *cutProxy, *memory.Store, memory.Project, memory.Write) {
	t.Helper()
	target := storetest.NewPostgres(t)
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	s := storetest.Open(t, u.String(), nil)
	ctx := context.Background()
	p := memory.Project{ID: scope.IdentityOf(root)}
	w := memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "used", Body: "read once"}
	if _, _, err := s.Put(ctx, p, w); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, p.ID, memory.Selector{Key: "used"}); err != nil {
		t.Fatal(err)
	}
	return target, proxy, s, p, w
}

// A commit whose answer is lost while the database stays unreachable: the
// write is refused as of unknown outcome, never acknowledged; when it did
// commit, the uses it carried are not handed back to be written again.
func TestPostgresCommitOutcomeUnknown(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the store's patience for the database")
	}
	target, proxy, s, p, w := readOnceBehindProxy(t, "/work/unknown")
	ctx := context.Background()
	proxy.arm("after, down")
	w.Key, w.Body = "cut", "committed, its answer lost"
	if _, _, err := s.Put(ctx, p, w); err == nil || !strings.Contains(err.Error(), "may or may not have been saved") {
		t.Fatalf("put with its commit's outcome unknown: %v", err)
	}
	proxy.down.Store(false)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check := storetest.Open(t, target, nil)
	if r, err := check.Peek(ctx, p.ID, memory.Selector{Key: "cut"}); err != nil || r.Body != w.Body {
		t.Errorf("the write whose answer was lost = %+v, %v; it committed", r, err)
	}
	if r, err := check.Peek(ctx, p.ID, memory.Selector{Key: "used"}); err != nil || r.UseCount != 1 {
		t.Errorf("use count = %d, %v; want 1", r.UseCount, err)
	}
}
