package stdio

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var idCases = []string{
	`0`, `1`, `12`, `-1`, `-0`, `007`, `1.0`, `1e2`, `1E2`, `1.5`, `123456789012345`, `1234567890123456`,
	`9007199254740992`, `9007199254740993`, `-9007199254740992`, `1e400`,
	`""`, `"a"`, `"req-1"`, `"a b"`, `"<x>"`, `"a&b"`, `"\u0041"`, `"\n"`, `"\""`, `"é"`, `"\u2028"`, `"\/"`,
	`true`, `false`, `{}`, `[]`, `[1]`, `{"a":1}`,
}

// Every id validID lets through comes back from the SDK's decoding and
// encoding as the same id; the others (fractions, numbers past 2^53, what
// JSON-RPC does not allow as an id) it refuses.
func TestIDsTheSDKEchoes(t *testing.T) {
	for _, raw := range idCases {
		if !json.Valid([]byte(raw)) {
			continue // not a member of a line that is JSON
		}
		echoed := false
		if msg, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":` + raw + `,"method":"ping"}`)); err == nil {
			frame, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: msg.(*jsonrpc.Request).ID, Result: json.RawMessage(`{}`)})
			var got struct{ ID json.RawMessage }
			echoed = json.Unmarshal(frame, &got) == nil && sameID(json.RawMessage(raw), got.ID)
		}
		if got := validID(json.RawMessage(raw)); got != echoed {
			t.Errorf("validID(%s) = %v, but the SDK echoing it is %v", raw, got, echoed)
		}
	}
	if !validID(json.RawMessage(`null`)) {
		t.Error("validID(null) = false")
	}
}

// sameID reports whether a and b are one JSON-RPC id: the same string, or
// the same whole number.
func sameID(a, b json.RawMessage) bool {
	decode := func(raw json.RawMessage) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		d.Decode(&v)
		return v
	}
	x, y := decode(a), decode(b)
	if nx, ok := x.(json.Number); ok {
		ny, ok := y.(json.Number)
		ix, err1 := nx.Int64()
		iy, err2 := ny.Int64()
		return ok && err1 == nil && err2 == nil && ix == iy
	}
	return cmp.Equal(x, y)
}
