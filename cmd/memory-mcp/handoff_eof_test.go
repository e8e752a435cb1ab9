package main

import (
	"fmt"
	"sort"
	"testing"
)

// The input ends while direct calls still run: each is answered, once,
// before the server stops, and nothing else is written. The last answer
// races the end of the session, so the session is run several times.
func TestInputEndsWhileCallsRun(t *testing.T) {
	for i := range 10 {
		t.Run(fmt.Sprint(i), inputEndsWhileCallsRun)
	}
}

func inputEndsWhileCallsRun(t *testing.T) {
	ls := startLines(t, true)
	ls.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	ls.next(t)
	ls.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const calls = 2*maxIdle + 1
	for i := range calls {
		ls.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test_wait","arguments":{}}}`, 100+i))
	}
	ls.send(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if f := ls.next(t); f != `{"jsonrpc":"2.0","id":"p","result":{}}` {
		t.Fatalf("ping: %s", f)
	}
	ls.in.Close()
	ls.once.Do(func() { close(ls.hold) })
	var got, want []string
	for i := range calls {
		got = append(got, ls.next(t))
		want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"released"}]}}`, 100+i))
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers:\n%s\nwant\n%s", got, want)
	}
	if err := <-ls.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	ls.done <- nil // for the cleanup
	if f, ok := <-ls.frames; ok {
		t.Fatalf("written after the last answer: %s", f)
	}
}
