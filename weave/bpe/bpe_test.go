package bpe

import (
	"encoding/base64"
	"flag"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

var update = flag.Bool("update", false, "write cl100k_base.bpe again from tiktoken-go-loader's cl100k_base.tiktoken")

// TestEmbeddedTable checks that the table compiled into the binary is the
// one built afresh from tiktoken-go-loader's cl100k_base.tiktoken, the
// ranks tiktoken-go counts with; with -update it writes it.
func TestEmbeddedTable(t *testing.T) {
	data, err := fs.ReadFile(assets.Assets, "cl100k_base.tiktoken")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("cl100k_base.bpe", []byte(e.raw), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if e.raw != cl100kTable {
		t.Fatalf("cl100k_base.bpe (%d bytes) is not the table built from cl100k_base.tiktoken (%d bytes): write it again with go test ./weave/bpe -run TestEmbeddedTable -update", len(cl100kTable), len(e.raw))
	}
	// A lookup ends at the first empty slot: the longest run of full ones
	// bounds every lookup, whatever is looked up.
	run, longest := 0, 0
	for i := range 2 * len(e.table) / 4 { // twice round, for the run that wraps
		if le32(e.table, i%(len(e.table)/4)) == 0 {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	if longest > 64 {
		t.Errorf("longest run of full slots %d: probes are long", longest)
	}
	t.Logf("%d tokens, %d slots, longest run of full slots %d, %d bytes", e.Len(), len(e.table)/4, longest, len(e.raw))
}

// TestRankAgainstAMap looks up every token and many strings that are not
// tokens in the embedded table and in a Go map built straight from
// tiktoken-go-loader's file: the table neither misses a token nor finds
// one that is not there.
func TestRankAgainstAMap(t *testing.T) {
	data, err := fs.ReadFile(assets.Assets, "cl100k_base.tiktoken")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		tok, rank, _ := strings.Cut(line, " ")
		b, err := base64.StdEncoding.DecodeString(tok)
		if err != nil {
			t.Fatal(err)
		}
		r, err := strconv.Atoi(rank)
		if err != nil {
			t.Fatal(err)
		}
		want[string(b)] = r
	}
	e := load(t)
	check := func(s string) {
		t.Helper()
		w, inMap := want[s]
		got, ok := e.Rank([]byte(s))
		if ok != inMap || got != w && ok {
			t.Fatalf("Rank(%q) = %d, %v; the file says %d, %v", s, got, ok, w, inMap)
		}
		if r, ok2 := e.rank(s); ok2 != ok || int(r) != got {
			t.Fatalf("rank(%q) = %d, %v; Rank says %d, %v", s, r, ok2, got, ok)
		}
	}
	for tok := range want {
		check(tok)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ  .,'\n\t0123456789éü漢"
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	buf := make([]byte, 0, 24)
	for range n {
		buf = buf[:0]
		for range 1 + rng.IntN(12) {
			if rng.IntN(8) == 0 {
				buf = append(buf, byte(rng.IntN(256)))
			} else {
				buf = append(buf, letters[rng.IntN(len(letters))])
			}
		}
		check(string(buf))
	}
}

// TestUnmarshalErrors feeds unmarshal damaged tables: each is refused,
// none panics.
func TestUnmarshalErrors(t *testing.T) {
	good := load(t).raw
	bad := map[string]string{
		"empty":     "",
		"magic":     "bpe0" + good[4:],
		"short":     good[:len(good)-1],
		"long":      good + "x",
		"header":    good[:headerSize-1],
		"no tokens": magic + string(appendLE32(nil, 0, 2, 0)),
		"slots":     magic + string(appendLE32(nil, 2, 3, 0)) + good[headerSize:],
	}
	// Offsets that do not end at the size of the tokens.
	offs := []byte(good)
	offs[headerSize+4*100_256]++
	bad["offsets"] = string(offs)
	for name, raw := range bad {
		if _, err := unmarshal(raw); err == nil {
			t.Errorf("%s: unmarshal = nil error", name)
		}
	}
}

func load(tb testing.TB) *Encoding {
	tb.Helper()
	e, err := CL100K()
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// TestCL100K checks the embedded ranks load whole: every token is found
// at its own rank, and known tokens have their published ranks.
func TestCL100K(t *testing.T) {
	e := load(t)
	if e.Len() != 100_256 {
		t.Fatalf("Len = %d, want 100256", e.Len())
	}
	for r := range e.Len() {
		if got, ok := e.Rank([]byte(e.token(r))); !ok || got != r {
			t.Fatalf("Rank(token %d %q) = %d, %v", r, e.token(r), got, ok)
		}
	}
	for tok, want := range map[string]int{"!": 0, "hello": 15339, " world": 1917, " Conveyor": 100255} {
		if got, ok := e.Rank([]byte(tok)); !ok || got != want {
			t.Errorf("Rank(%q) = %d, %v; want %d", tok, got, ok, want)
		}
	}
	for _, tok := range []string{"", "<|endoftext|>", " hello world", strings.Repeat("x", 300)} {
		if r, ok := e.Rank([]byte(tok)); ok {
			t.Errorf("Rank(%q) = %d, want none", tok, r)
		}
	}
}

// TestCount checks counts worked out by hand from the ranks.
func TestCount(t *testing.T) {
	e := load(t)
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"<|endoftext|>", 7},
		{"I'm", 2},
		{"  x", 2},    // "  x" is " " + " x"
		{"\n\n\n", 1}, // one token
		{"1234567", 3},
	} {
		if got := e.Count(tt.in); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestParseErrors feeds Parse malformed ranks.
func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"IQ==",     // no rank
		"IQ== 1\n", // ranks must start at 0
		"IQ== 0\nIg== 2\n",
		"IQ== 0\nIQ== 1\n", // repeated token
		"I!== 0\n",         // not base64
		"IQ 0\n",           // not padded
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) = nil error", in)
		}
	}
	e, err := Parse([]byte("YQ== 0\nYg== 1\nYWI= 2\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Count("abab"); got != 2 {
		t.Errorf("Count = %d, want 2", got)
	}
}

// TestPieces checks where the pre-tokenizer cuts, on the cases where the
// pattern's alternatives and backtracking decide.
func TestPieces(t *testing.T) {
	for in, want := range map[string]string{
		"I'm here":         "I|'m| here",
		"they'RE":          "they|'RE",
		"it'Ll'lL":         "it|'Ll|'lL",
		"'sup":             "'s|up",
		"'r'x":             "'r|'x",
		"a   b":            "a|  | b",
		"a \n b":           "a| \n| b",
		"x  ":              "x|  ",
		"x\t1":             "x|\t|1",
		"12345":            "123|45",
		" !!\n\nz":         " !!\n\n|z",
		"\u00a0word":       "\u00a0word",
		"\n\u3000x":        "\n|\u3000x",
		"a\u3000\u3000b":   "a|\u3000|\u3000b",
		"e\u0301t":         "e|\u0301t",
		"foo\r\n\r\n  bar": "foo|\r\n\r\n| | bar",
	} {
		var got []string
		for i := 0; i < len(in); {
			j := nextPiece(in, i)
			got = append(got, in[i:j])
			i = j
		}
		if g := strings.Join(got, "|"); g != want {
			t.Errorf("pieces of %q = %q, want %q", in, g, want)
		}
	}
}

// TestCountAllocs checks that counting text whose pieces are short
// allocates nothing.
func TestCountAllocs(t *testing.T) {
	e := load(t)
	s := strings.Repeat("Use `make test`; it's 12345 times faster — naïve café 日本語.\n\n", 50)
	if n := testing.AllocsPerRun(10, func() { e.Count(s) }); n != 0 {
		t.Errorf("Count allocates %v times", n)
	}
}

// TestHeapMergeAsScan: the heap's merge of a long piece makes the same
// number of tokens as the scan tiktoken's merge is, on pieces of every
// length from 2 to 3,000 bytes drawn from small alphabets (many pairs of
// equal rank), text, runs of one character and repeated patterns.
func TestHeapMergeAsScan(t *testing.T) {
	e := load(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{"ab", "abc", "etaoin shrdlu", "=-", "-", " ", "\n", "\t ", "0123456789", "xyz", "日本語のテキスト", "aé", "AbCdE", "!?.,;:", "😀👍🏽", "ab=-_", "qwertyuiopasdfghjklzxcvbnm"}
	var h heapMerge
	check := func(p string) {
		t.Helper()
		if len(p) < 2 {
			return
		}
		scan := make([]part, len(p)+1)
		if got, want := h.count(e, p), e.merge(p, scan); got != want {
			t.Fatalf("heap merge %d tokens, scan %d, of %q", got, want, p)
		}
	}
	for n := 2; n <= 3000; n += 1 + n/16 {
		for _, a := range alphabets {
			runes := []rune(a)
			var b strings.Builder
			for b.Len() < n {
				b.WriteRune(runes[rng.IntN(len(runes))])
			}
			check(b.String())
			check(strings.Repeat(a, n/len(a)+1)[:n])
		}
	}
	for _, s := range []string{"x" + strings.Repeat("ab", 1000), strings.Repeat("\n", 258), strings.Repeat("❤\ufe0f", 500), strings.Repeat("a", 3000)} {
		check(s)
	}
}
