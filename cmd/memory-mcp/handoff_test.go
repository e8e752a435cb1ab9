package main

import (
	"fmt"
	"io"
	"sort"
	"testing"
)

// The goroutine that reads a call answers it and hands the reading on:
// with more calls blocked than workers are kept, the input is still read
// and answered, every blocked call is answered once released, and a call
// on the input's last line, with no line end, is answered before the
// server stops.
func TestReadingGoesOnWhileCallsRun(t *testing.T) {
	ls := startLines(t, true)
	ls.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	ls.next(t)
	ls.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const blocked = 3 * maxIdle
	for i := range blocked {
		ls.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","method":"tools/call","params":{"name":"test_wait","arguments":{}}}`, i))
	}
	ls.send(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if f := ls.next(t); f != `{"jsonrpc":"2.0","id":"p","result":{}}` {
		t.Fatalf("ping: %s", f)
	}
	ls.send(t, `{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"test_empty","arguments":{}}}`)
	if f := ls.next(t); f != `{"jsonrpc":"2.0","id":"e","result":{"content":[]}}` {
		t.Fatalf("a call while others block: %s", f)
	}
	if n := ls.direct.taken.Load(); n != blocked+1 {
		t.Fatalf("%d calls answered directly, want %d", n, blocked+1)
	}
	ls.once.Do(func() { close(ls.hold) })
	var got []string
	for range blocked {
		got = append(got, ls.next(t))
	}
	sort.Strings(got)
	var want []string
	for i := range blocked {
		want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","result":{"content":[{"type":"text","text":"released"}]}}`, i))
	}
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("released calls answered:\n%s\nwant\n%s", got, want)
	}

	if _, err := io.WriteString(ls.in, `{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"test_empty","arguments":{}}}`); err != nil {
		t.Fatal(err)
	}
	ls.in.Close()
	if f := ls.next(t); f != `{"jsonrpc":"2.0","id":"last","result":{"content":[]}}` {
		t.Fatalf("the last line's call: %s", f)
	}
	if err := <-ls.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	ls.done <- nil // for the cleanup
}
