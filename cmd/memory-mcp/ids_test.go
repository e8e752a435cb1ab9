package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var errNotID = errors.New("not an id")

var idCases = []string{
	`0`, `1`, `12`, `-1`, `-0`, `007`, `1.0`, `1e2`, `1E2`, `1.5`, `123456789012345`, `1234567890123456`,
	`9007199254740992`, `9007199254740993`, `-9007199254740992`, `1e400`,
	`""`, `"a"`, `"req-1"`, `"a b"`, `"<x>"`, `"a&b"`, `"\u0041"`, `"\n"`, `"\""`, `"é"`, `"\u2028"`, "\"\xff\"", `"\/"`,
	`null`, `true`, `false`, `{}`, `[]`, `[1]`, `{"a":1}`,
}

// decodeID reads every id as a json.Decoder using numbers does, and the
// plain ids that canonicalID and idKey pass through untouched are those the
// round trip through the SDK's decoding leaves as they are.
func TestIDsAsTheDecoderReadsThem(t *testing.T) {
	for _, raw := range idCases {
		d := json.NewDecoder(bytes.NewReader([]byte(raw)))
		d.UseNumber()
		var want any
		wantErr := d.Decode(&want)
		switch want.(type) {
		case string, json.Number, nil:
		default:
			wantErr = errNotID // what JSON-RPC does not allow as an id
		}
		got, ok := decodeID(json.RawMessage(raw))
		if !json.Valid([]byte(raw)) {
			// Not a member of a valid line: never decoded.
		} else if ok != (wantErr == nil) || ok && !cmp.Equal(got, want) {
			t.Errorf("decodeID(%s) = %#v, %v; the decoder gives %#v, %v", raw, got, ok, want, wantErr)
		}

		var v any
		slow := raw
		if json.Unmarshal([]byte(raw), &v) == nil {
			b, _ := json.Marshal(v)
			slow = string(b)
		}
		if got := canonicalID(json.RawMessage(raw)); got != slow {
			t.Errorf("canonicalID(%s) = %s, want %s", raw, got, slow)
		}

		if !validID(json.RawMessage(raw)) {
			continue
		}
		req, ok := plainMessage(map[string]json.RawMessage{"method": json.RawMessage(`"m"`), "id": json.RawMessage(raw)}, []byte(`{}`))
		if !ok {
			continue
		}
		b, _ := json.Marshal(req.ID.Raw())
		if got, want := idKey(req.ID), canonicalID(b); got != want {
			t.Errorf("idKey of %s = %s, want %s", raw, got, want)
		}
	}
	for _, id := range []any{0.0, 5.0, -5.0, float64(1 << 53), float64(1<<53 + 2), float64(1 << 62), 1e300, "x", "<", "é", ""} {
		jid, err := jsonrpc.MakeID(id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(jid.Raw())
		if got, want := idKey(jid), canonicalID(b); got != want {
			t.Errorf("idKey(%v) = %s, want %s", id, got, want)
		}
	}
}
