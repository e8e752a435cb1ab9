package storetest_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/pgtest"
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
	mode   string // "before", "after" or "" (pass everything)
	fired  chan struct{}
}

func startCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, server: server}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
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
		// once it has had the time to.
		time.AfterFunc(time.Second, func() { server.Close() })
		<-done
	}()
	r := bufio.NewReader(client)
	startup := true
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
		if !startup && head[0] == 'Q' && strings.EqualFold(strings.TrimRight(string(body), "\x00; "), "commit") {
			switch p.take() {
			case "before":
				server.Close()
				return
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
// and saved once, and the uses it carried count once.
func TestPostgresCommitCut(t *testing.T) {
	for _, mode := range []string{"before", "after"} {
		t.Run(mode, func(t *testing.T) {
			target := pgtest.New(t)
			u, err := url.Parse(target)
			if err != nil {
				t.Fatal(err)
			}
			proxy := startCutProxy(t, u.Host)
			u.Host = proxy.ln.Addr().String()
			s := storetest.Open(t, u.String(), nil)
			ctx := context.Background()
			p := memory.Project{ID: scope.IdentityOf("/work/cut")}
			w := memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "used", Body: "read once"}
			if _, _, err := s.Put(ctx, p, w); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, p.ID, memory.Selector{Key: "used"}); err != nil {
				t.Fatal(err)
			}
			fired := proxy.arm(mode)
			w.Key, w.Body = "cut", "written while the connection was cut"
			if _, _, err := s.Put(ctx, p, w); err != nil {
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
