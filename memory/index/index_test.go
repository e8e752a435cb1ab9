package index

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

func TestAnalyze(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"The tests are running", []string{"test", "run"}},
		{"ÜBER Straße", []string{"uber", "strass"}},
		{"école Ecole", []string{"ecol", "ecol"}},
		{"e\u0301cole", []string{"ecol"}}, // decomposed accent
		{"go make test", []string{"go", "make", "test"}},
		{"use --force", []string{"use", "--force", "forc"}},
		{"run ./cmd/x build", []string{"run", "./cmd/x", "cmd", "x", "build"}},
		{"set max_conns.", []string{"set", "max_conns", "max", "conn"}},
		{"api.v2 (foo)", []string{"api.v2", "api", "v2", "foo"}},
		{"中文搜索", []string{"中文", "文搜", "搜索"}},
		{"字", []string{"字"}},
		{"go语言", []string{"go", "语言"}},
		{"configure configured configuring", []string{"configur", "configur", "configur"}},
		{"the and of", nil},
	} {
		if got := Analyze(c.in); !cmp.Equal(got, c.want) {
			t.Errorf("Analyze(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStem(t *testing.T) {
	for in, want := range map[string]string{
		"tests": "test", "testing": "test", "tested": "test", "test": "test",
		"deploys": "deploi", "deploying": "deploi", "deploy": "deploi", "making": "make", "make": "make",
		"hopping": "hop", "hoping": "hope", "caresses": "caress", "ponies": "poni",
		"agreed": "agre", "go": "go", "v1": "v1", "running": "run", "status": "status",
	} {
		if got := Stem(in); got != want {
			t.Errorf("Stem(%q) = %q, want %q", in, got, want)
		}
	}
}

func search(parts []*Partition, q string, k int) []Result {
	return Search(parts, Query{Terms: Analyze(q), K: k}, DefaultParams)
}

func ids(rs []Result) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestRankingAndWhy(t *testing.T) {
	p := NewPartition()
	p.Put(Doc{ID: 1, Fields: [NumFields]string{"filler", "", "we run the tests in the ci pipeline"}})
	p.Put(Doc{ID: 2, Fields: [NumFields]string{"db-migrations", "How migrations run", "Apply database migrations with goose.", "db"}})
	p.Put(Doc{ID: 3, Fields: [NumFields]string{"deploys", "", "Deploys go through staging."}})
	got := search([]*Partition{p}, "database migrations", 10)
	if len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("results %v", ids(got))
	}
	if !cmp.Equal(got[0].Terms, []string{"databas", "migration"}) || !cmp.Equal(got[0].Fields, []Field{Key, Description, Body}) {
		t.Errorf("why: %q in %v", got[0].Terms, got[0].Fields)
	}
	if s := got[0].Score; s <= 0 || s >= 1 {
		t.Errorf("score %v", s)
	}
	// Updates replace, deletes remove.
	p.Put(Doc{ID: 2, Fields: [NumFields]string{"db-migrations", "", "Schema changes go through atlas."}})
	if got := search([]*Partition{p}, "goose", 10); len(got) != 0 {
		t.Errorf("old text still found: %v", ids(got))
	}
	if got := search([]*Partition{p}, "atlas", 10); len(got) != 1 {
		t.Errorf("new text not found: %v", ids(got))
	}
	p.Delete(2)
	if got := search([]*Partition{p}, "atlas migrations", 10); len(got) != 0 || p.Len() != 2 {
		t.Errorf("deleted document found: %v (len %d)", ids(got), p.Len())
	}
}

func TestExactPhraseFirst(t *testing.T) {
	p := NewPartition()
	// Many records hold the words; one holds them as the phrase.
	for i := range 300 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{fmt.Sprintf("n%d", i), "", "the build cache is warm after every nightly run"}})
	}
	p.Put(Doc{ID: 1000, Fields: [NumFields]string{"x", "", "notes: a nightly build warms the cache"}})
	got := search([]*Partition{p}, "nightly build warms the cache", 5)
	if len(got) == 0 || got[0].ID != 1000 {
		t.Fatalf("top %v, want 1000 first", ids(got))
	}
}

// TestPhraseAsWritten checks that a quoted phrase is matched with its
// stop-words in place: many records hold its one searchable word beside a
// stop-word, one holds the phrase as written.
func TestPhraseAsWritten(t *testing.T) {
	p := NewPartition()
	for i := range 200 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{fmt.Sprintf("n%d", i), "", "the flag is set and then it is the flag it reads"}})
	}
	p.Put(Doc{ID: 1000, Fields: [NumFields]string{"x", "", "when it is is the flag it was wrong, a long note about things that go on and on"}})
	q := "is is the flag it"
	got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 5}, DefaultParams)
	if len(got) == 0 || got[0].ID != 1000 {
		t.Fatalf("top %v, want 1000 first", ids(got))
	}
}

// TestPhraseAmongManyHolders checks that a quote is found when thousands
// of records hold its words apart, more than its words alone rank, and
// the one holding it as written was written last: why names the words
// and the field they are in.
func TestPhraseAmongManyHolders(t *testing.T) {
	p := NewPartition()
	for i := range 3000 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{fmt.Sprintf("n%d", i), "", "logs logs and more logs, then a release, release notes and the release"}})
	}
	p.Put(Doc{ID: 5000, Fields: [NumFields]string{"x", "", "we read the logs release then the incident closed, and a long note about other things went on"}})
	q := "logs release then the"
	got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 5}, DefaultParams)
	if len(got) == 0 || got[0].ID != 5000 {
		t.Fatalf("top %v, want 5000 first", ids(got))
	}
	if !cmp.Equal(got[0].Terms, []string{"log", "releas"}) || !cmp.Equal(got[0].Fields, []Field{Body}) {
		t.Errorf("why: %q in %v", got[0].Terms, got[0].Fields)
	}
}

// TestHoldsPhraseMatchesBruteForce checks the phrase check against the
// terms read one by one, with term ids of one, two and three bytes.
func TestHoldsPhraseMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	p := NewPartition()
	// Words enough that later ones take two bytes, or three.
	var pad []string
	for i := range 17000 {
		pad = append(pad, "w"+strconv.Itoa(i))
	}
	p.Put(Doc{ID: 0, Fields: [NumFields]string{2: strings.Join(pad, " ")}})
	words := []string{"the", "of", "alpha", "beta", "gamma", "is", "w5", "w300", "w16500"}
	for n := uint32(1); n < 3000; n++ {
		var fields [NumFields]string
		for f := range NumFields {
			var ws []string
			for range r.Intn(10) {
				ws = append(ws, words[r.Intn(len(words))])
			}
			fields[f] = strings.Join(ws, " ")
		}
		p.Put(Doc{ID: int64(n), Fields: fields})
		var qs []string
		for range 1 + r.Intn(4) {
			qs = append(qs, words[r.Intn(len(words))])
		}
		q := phraseIDs(p, Query{Phrase: Sequence(strings.Join(qs, " "))})
		anchor := slices.IndexFunc(q, func(t uint32) bool { return !p.stop[t] })
		if anchor < 0 {
			continue
		}
		want := false
		for f := range NumFields {
			fl := p.field(n, f, nil)
			for j := 0; j+len(q) <= len(fl); j++ {
				want = want || slices.Equal(fl[j:j+len(q)], q)
			}
		}
		if got := holdsPhrase(p, n, q, anchor, 1<<NumFields-1); got != want {
			t.Fatalf("fields %q, phrase %q: holdsPhrase %v, want %v", fields, qs, got, want)
		}
	}
}

// TestContextRaisesNeighbours checks that the turn written just after the
// best match rises above turns that share as many of the question's words
// but were said elsewhere, that why names its own words, and that a
// neighbour holding none of them is not raised.
func TestContextRaisesNeighbours(t *testing.T) {
	p := NewPartition()
	turns := []string{
		"Nadia: guess what, big news today.",
		"Omar: I found a flat above a bakery in Walthamstow.",
		"Nadia: lovely Omar, you will wake to the smell of warm bread every single morning there.",
		"Nadia: how was the concert?",
		"Omar: loud.",
		"Nadia: and the exam, Omar?",
		"Omar: fine.",
		"Nadia: the train, Omar?",
		"Omar: late again.",
	}
	for i, turn := range turns {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{2: turn}})
	}
	q := "Why did Omar pick the flat above the bakery?"
	query := Query{Terms: Analyze(q), Phrase: Sequence(q), K: 3}
	off := DefaultParams
	off.Context = 0
	if got := ids(Search([]*Partition{p}, query, off)); slices.Contains(got, 2) {
		t.Fatalf("without context the neighbour is already in the top 3: %v", got)
	}
	got := Search([]*Partition{p}, query, DefaultParams)
	if len(got) < 2 || got[0].ID != 1 || got[1].ID != 2 {
		t.Fatalf("top %v, want 1 then 2", ids(got))
	}
	if !cmp.Equal(got[1].Terms, []string{"omar"}) || !cmp.Equal(got[1].Fields, []Field{Body}) {
		t.Errorf("why: %q in %v", got[1].Terms, got[1].Fields)
	}
	if slices.Contains(ids(Search([]*Partition{p}, Query{Terms: query.Terms, Phrase: query.Phrase, K: 10}, DefaultParams)), 0) {
		t.Error("a neighbour holding no query word was raised")
	}
}

// TestEveryWordOutranksSome checks the coordination of query words: the
// record holding all three words, once each in a longer body, ranks above
// short records holding only the two rarer ones, which BM25F alone ranks
// first.
func TestEveryWordOutranksSome(t *testing.T) {
	p := NewPartition()
	for i := range 200 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{fmt.Sprintf("n%d", i), "", "config notes for the service root"}})
	}
	for i := range 3 {
		p.Put(Doc{ID: int64(500 + i), Fields: [NumFields]string{fmt.Sprintf("m%d", i), "", "gregres and flimester notes"}})
	}
	p.Put(Doc{ID: 1000, Fields: [NumFields]string{"x", "", "gregres came up in the build, flimester in the deploy, and the cache config was stale"}})
	q := "gregres config flimester"
	got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 5}, DefaultParams)
	if len(got) == 0 || got[0].ID != 1000 {
		t.Errorf("top %v, want 1000 first", ids(got))
	}
	prm := DefaultParams
	prm.Coord = 0
	if got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 5}, prm); len(got) > 0 && got[0].ID == 1000 {
		t.Errorf("without coordination 1000 ranks first too: the test does not test it")
	}
}

func TestPartitionStatistics(t *testing.T) {
	a, b, shared := NewPartition(), NewPartition(), NewPartition()
	a.Put(Doc{ID: 1, Fields: [NumFields]string{"", "", "postgres tuning notes"}})
	a.Put(Doc{ID: 2, Fields: [NumFields]string{"", "", "redis notes"}})
	shared.Put(Doc{ID: 3, Fields: [NumFields]string{"", "", "global postgres default"}})
	before := search([]*Partition{a, shared}, "postgres", 10)
	// B's volume must not move A's scores.
	for i := range 500 {
		b.Put(Doc{ID: int64(1000 + i), Fields: [NumFields]string{"", "", "postgres postgres everywhere"}})
	}
	after := search([]*Partition{a, shared}, "postgres", 10)
	if !cmp.Equal(before, after) {
		t.Errorf("scores moved with another partition:\n%v\n%v", before, after)
	}
	if got := ids(after); !cmp.Equal(got, []int64{1, 3}) && !cmp.Equal(got, []int64{3, 1}) {
		t.Errorf("ids %v", got)
	}
}

func TestAccept(t *testing.T) {
	p := NewPartition()
	for i := range 20 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{"", "", "alpha beta"}, Tag: uint32(10 * i)})
	}
	accept := func(c Candidate) bool {
		if c.Part != 0 || c.Tag != uint32(10*c.ID) {
			t.Errorf("asked about %+v", c)
		}
		return c.ID%2 == 1
	}
	got := Search([]*Partition{p}, Query{Terms: Analyze("alpha"), K: 5, Accept: accept}, DefaultParams)
	if len(got) != 5 {
		t.Fatalf("%d results", len(got))
	}
	for _, r := range got {
		if r.ID%2 != 1 {
			t.Errorf("rejected id %d returned", r.ID)
		}
	}
}

// TestPruningMatchesExhaustive checks on random corpora that MaxScore
// returns the same top k as scoring every posting.
func TestPruningMatchesExhaustive(t *testing.T) {
	vocab := make([]string, 300)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dq", i)
	}
	word := func(r *rand.Rand) string {
		// Zipf-like: a few words are everywhere.
		return vocab[int(math.Pow(r.Float64(), 3)*float64(len(vocab)))]
	}
	text := func(r *rand.Rand, n int) string {
		s := ""
		for range n {
			s += word(r) + " "
		}
		return s
	}
	for seed := range int64(40) {
		r := rand.New(rand.NewSource(seed))
		parts := []*Partition{NewPartition(), NewPartition()}
		n := 50 + r.Intn(400)
		for i := range n {
			p := parts[r.Intn(2)]
			p.Put(Doc{ID: int64(i), Fields: [NumFields]string{text(r, 1+r.Intn(2)), text(r, r.Intn(6)), text(r, r.Intn(60)), text(r, r.Intn(3))}})
			if r.Intn(10) == 0 {
				p.Delete(int64(r.Intn(i + 1)))
			}
		}
		for range 20 {
			q := Analyze(text(r, 1+r.Intn(5)))
			k := 1 + r.Intn(15)
			accept := func(c Candidate) bool { return c.ID%7 != 0 }
			prm := DefaultParams
			prm.Phrase = 0 // compare the ranking the pruning decides
			fast := Search(parts, Query{Terms: q, K: k, Accept: accept}, prm)
			slow := Search(parts, Query{Terms: q, K: k, Accept: accept, Exhaustive: true}, prm)
			if len(fast) != len(slow) {
				t.Fatalf("seed %d %q: %d results, exhaustive %d", seed, q, len(fast), len(slow))
			}
			for i := range fast {
				if math.Abs(fast[i].Raw-slow[i].Raw) > 1e-9 {
					t.Fatalf("seed %d %q k %d: rank %d scores %v, exhaustive %v", seed, q, k, i, fast[i].Raw, slow[i].Raw)
				}
			}
			// Where scores differ clearly, the ids agree.
			if len(fast) > 0 && !slices.Equal(distinctIDs(fast), distinctIDs(slow)) {
				t.Fatalf("seed %d %q: ids %v, exhaustive %v", seed, q, ids(fast), ids(slow))
			}
		}
	}
}

// distinctIDs are the ids whose scores differ from their neighbours'.
func distinctIDs(rs []Result) []int64 {
	var out []int64
	for i, r := range rs {
		if (i == 0 || rs[i-1].Raw-r.Raw > 1e-9) && (i == len(rs)-1 || r.Raw-rs[i+1].Raw > 1e-9) {
			out = append(out, r.ID)
		}
	}
	return out
}

func TestCompaction(t *testing.T) {
	p := NewPartition()
	for i := range 2000 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{"", "", fmt.Sprintf("common word%d", i)}})
	}
	for i := range 1800 {
		p.Delete(int64(i))
	}
	if p.Len() != 200 {
		t.Fatalf("len %d", p.Len())
	}
	got := search([]*Partition{p}, "common", 300)
	if len(got) != 200 {
		t.Fatalf("%d results after deletes", len(got))
	}
	if got := search([]*Partition{p}, "word1999", 3); len(got) != 1 || got[0].ID != 1999 {
		t.Errorf("word1999: %v", ids(got))
	}
	if len(p.docs) >= 2000 {
		t.Errorf("never compacted: %d documents kept", len(p.docs))
	}
}

// TestRunShareMatchesBruteForce compares runShare with the longest common
// run of query and field found by trying every pair of starts.
func TestRunShareMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	words := []string{"the", "of", "alpha", "beta", "gamma", "is"}
	var sc scratch
	for range 2000 {
		p := NewPartition()
		var fields [NumFields]string
		for f := range NumFields {
			var ws []string
			for range r.Intn(12) {
				ws = append(ws, words[r.Intn(len(words))])
			}
			fields[f] = strings.Join(ws, " ")
		}
		var doc uint32
		if r.Intn(2) == 0 {
			// Words enough before the record's that its term ids take
			// two bytes, or three.
			var pad []string
			size := 200
			if r.Intn(40) == 0 {
				size = 17000
			}
			for i := range size {
				pad = append(pad, "w"+strconv.Itoa(i))
			}
			p.Put(Doc{ID: 2, Fields: [NumFields]string{2: strings.Join(pad, " ")}})
			doc = 1
		}
		p.Put(Doc{ID: 1, Fields: fields})
		var qs []string
		n := 2 + r.Intn(5)
		if r.Intn(8) == 0 {
			n = 60 + r.Intn(20) // past the 64 places a word's set holds
		}
		for range n {
			qs = append(qs, words[r.Intn(len(words))])
		}
		q := phraseIDs(p, Query{Phrase: Sequence(strings.Join(qs, " "))})
		best := 0
		for f := range NumFields {
			fl := p.field(doc, f, nil)
			for i := range q {
				for j := range fl {
					n, content := 0, false
					for i+n < len(q) && j+n < len(fl) && q[i+n] == fl[j+n] {
						content = content || !p.stop[fl[j+n]]
						n++
						if content && n > best {
							best = n
						}
					}
				}
			}
		}
		want := 0.0
		if best >= 2 {
			want = float64(best-1) / float64(len(q)-1)
		}
		if got := runShare(p, doc, q, &sc); got != want {
			t.Fatalf("fields %q, query %q: runShare %v, want %v", fields, qs, got, want)
		}
	}
}

// TestBound16 checks that a bound kept in 16 bits is never below the value
// it bounds, nor more than one part in 128 above it.
func TestBound16(t *testing.T) {
	for _, v := range []float64{1e-3, 0.3, 0.7, 1, 1.0000001, 1.4285714285714286, 3.3333333, 17, 255 / 0.7, 1e4} {
		got := up16(v).float()
		if got < v*(1-1e-7) || got > v*(1+1.0/128) {
			t.Errorf("up16(%v) = %v", v, got)
		}
	}
	if !(up16(2.1) > up16(1.999) && up16(1.999) >= up16(1.99) && up16(1.99) > up16(1.5)) {
		t.Error("bounds out of order")
	}
}

// TestReplaceCompactsAndKeepsPhrases replaces documents until the
// partition compacts, several times over: each document's terms must
// survive the moves, so that phrases, fields and lengths are still its
// own.
func TestReplaceCompactsAndKeepsPhrases(t *testing.T) {
	p := NewPartition()
	const n = 400
	text := func(i, round int) [NumFields]string {
		return [NumFields]string{fmt.Sprintf("key%d", i), fmt.Sprintf("round%d note", round),
			fmt.Sprintf("the quick fox%d jumps over the lazy dog%d in round%d", i, i, round), "tag"}
	}
	for round := range 4 {
		for i := range n {
			p.Put(Doc{ID: int64(i), Fields: text(i, round), Tag: uint32(1000*round + i)})
		}
	}
	if p.Len() != n {
		t.Fatalf("len %d", p.Len())
	}
	if len(p.docs) >= 4*n {
		t.Fatalf("never compacted: %d documents kept", len(p.docs))
	}
	for _, i := range []int{0, 17, n - 1} {
		phrase := fmt.Sprintf("jumps over the lazy dog%d", i)
		got := Search([]*Partition{p}, Query{Terms: Analyze(phrase), Phrase: Sequence(phrase), K: 3}, DefaultParams)
		if len(got) == 0 || got[0].ID != int64(i) {
			t.Fatalf("%q: %v, want %d first", phrase, ids(got), i)
		}
		if !slices.Equal(got[0].Fields, []Field{Body}) {
			t.Errorf("%q: fields %v, want body", phrase, got[0].Fields)
		}
		if tag, ok := p.Tag(int64(i)); !ok || tag != uint32(3000+i) {
			t.Errorf("document %d tag %d %v, want %d", i, tag, ok, 3000+i)
		}
		n, _ := p.byID.find(p.docs, int64(i))
		if got, want := p.field(n, Description, nil), phraseIDs(p, Query{Phrase: Sequence("round3 note")}); !slices.Equal(got, want) {
			t.Errorf("document %d description terms %v, want %v", i, got, want)
		}
	}
	if got := search([]*Partition{p}, "round0", 5); len(got) != 0 {
		t.Errorf("round0 still found in %v", ids(got))
	}
}

// TestIncrementalMatchesFresh puts, replaces and deletes documents in one
// partition, never trimmed, until its lists have moved and been packed
// many times, and compares every search with a partition built afresh
// from the documents that remain.
func TestIncrementalMatchesFresh(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	vocab := make([]string, 2000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("v%dz", i)
	}
	text := func(n int) string {
		var ws []string
		for range n {
			ws = append(ws, vocab[int(math.Pow(r.Float64(), 2)*float64(len(vocab)))])
		}
		return strings.Join(ws, " ")
	}
	docs := map[int64]Doc{}
	p := NewPartition()
	for i := range 6000 {
		id := int64(r.Intn(2500))
		if r.Intn(8) == 0 {
			p.Delete(id)
			delete(docs, id)
			continue
		}
		d := Doc{ID: id, Fields: [NumFields]string{fmt.Sprintf("k%d", i), text(3), text(20 + r.Intn(80)), text(1)}}
		p.Put(d)
		docs[id] = d
	}
	fresh := NewPartition()
	for id := range int64(2500) {
		if d, ok := docs[id]; ok {
			fresh.Put(d)
		}
	}
	fresh.Trim()
	if p.Len() != fresh.Len() {
		t.Fatalf("%d documents, fresh %d", p.Len(), fresh.Len())
	}
	for range 200 {
		q := text(2 + r.Intn(4))
		query := Query{Terms: Analyze(q), Phrase: Sequence(q), K: 10}
		got, want := Search([]*Partition{p}, query, DefaultParams), Search([]*Partition{fresh}, query, DefaultParams)
		// Terms are summed in the order of their bounds, which differ.
		approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(a)) })
		if !cmp.Equal(got, want, approx) {
			t.Fatalf("%q:\n got %v\nwant %v", q, got, want)
		}
	}
}

// TestSearchWhileArraysMove searches while other goroutines put, delete and
// trim, so that the partitions' arrays are replaced as they grow, compact
// and shrink under the searches.
func TestSearchWhileArraysMove(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	vocab := make([]string, 500)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dq", i)
	}
	text := func(r *rand.Rand, n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[r.Intn(len(vocab))]
		}
		return strings.Join(ws, " ")
	}
	parts := []*Partition{NewPartition(), NewPartition()}
	for i := range 3000 {
		parts[i%2].Put(Doc{ID: int64(i), Fields: [NumFields]string{fmt.Sprintf("k%d", i), text(r, 3), text(r, 60), text(r, 1)}})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := parts[r.Intn(2)]
				id := int64(r.Intn(4000))
				switch {
				case i%50 == 49:
					p.Trim()
				case r.Intn(3) == 0:
					p.Delete(id)
				default:
					p.Put(Doc{ID: id, Fields: [NumFields]string{fmt.Sprintf("k%d", id), text(r, 3), text(r, 20+r.Intn(120)), text(r, 1)}})
				}
			}
		}()
	}
	for range 400 {
		q := text(r, 2+r.Intn(3))
		res := Search(parts, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 10}, DefaultParams)
		for _, h := range res {
			if h.ID < 0 || h.ID >= 4000 {
				t.Fatalf("hit %d was never put", h.ID)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestIsCJKEveryRune holds isCJK to the Unicode tables of the scripts it
// names, for every code point.
func TestIsCJKEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := isCJK(r), unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul); got != want {
			t.Fatalf("isCJK(%U) = %v, want %v", r, got, want)
		}
	}
}

// TestAnalyzerASCIIPaths holds the analyser's own scans for spaces and
// its trims of punctuation to the standard library's, on random text of
// ASCII, Unicode spaces, CJK and broken UTF-8.
func TestAnalyzerASCIIPaths(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	pieces := []string{"a", "Z", "9", " ", "\t", "\n", "\v", "\f", "\r", "\u0085", "\u00a0", "\u3000", "\u2028", ".", ",", ")", "(", "'", "\"", "`", "<", ">", "*", "[", "]", "{", "}", "語", "é", "\xff", "\xe3\x80", "_"}
	for range 20000 {
		var b strings.Builder
		for range r.Intn(12) {
			b.WriteString(pieces[r.Intn(len(pieces))])
		}
		s := b.String()
		want := strings.IndexFunc(s, unicode.IsSpace)
		if want < 0 {
			want = len(s)
		}
		if got := SpaceAt(s); got != want {
			t.Fatalf("SpaceAt(%q) = %d, want %d", s, got, want)
		}
		if got, want := trimSet(s, &openers, &closers), strings.TrimLeft(strings.TrimRight(s, ".,;:!?)]}'\"`>*"), "([{'\"`<*"); got != want {
			t.Fatalf("trimSet(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestContextNeverPassesAPhraseHolder: a neighbour is raised from its
// source's score on words alone, so a turn beside a record holding the
// query's phrase does not push out another record holding the phrase.
func TestContextNeverPassesAPhraseHolder(t *testing.T) {
	p := NewPartition()
	for i := range 40 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{2: fmt.Sprintf("filler note %d about the garden and the weather", i)}})
	}
	p.Put(Doc{ID: 100, Fields: [NumFields]string{2: "the blue heron migration route crosses the lake"}})
	p.Put(Doc{ID: 101, Fields: [NumFields]string{2: "that route again"}})
	long := strings.Repeat("the garden path and the weather by the old fence, ", 40)
	p.Put(Doc{ID: 200, Fields: [NumFields]string{2: long + "and the blue heron migration route, " + long}})
	q := "blue heron migration route"
	query := Query{Terms: Analyze(q), Phrase: Sequence(q), K: 2}
	got := ids(Search([]*Partition{p}, query, DefaultParams))
	if len(got) != 2 || !slices.Contains(got, 100) || !slices.Contains(got, 200) {
		t.Fatalf("top 2 %v, want the two records holding the phrase, 100 and 200", got)
	}
}

// Every field keeps its own terms when a document's are gathered in one
// slice: a run of more words than the analyser keeps on its stack (a long
// hyphenated key) is whole, a body's words are the body's only, and a
// record's date words are its tags', after every other field's.
func TestFieldsKeepTheirTerms(t *testing.T) {
	p := NewPartition()
	key := "alpha-bravo-charlie-delta-echo-foxtrot-golf-hotel-india-juliett"
	p.Put(Doc{ID: 1, Fields: [NumFields]string{key, "a description", "lambda lambda body words", "tagged"},
		Created: time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)})
	for q, want := range map[string][]Field{
		"juliett": {Key}, "india": {Key}, "lambda": {Body}, "description": {Description},
		"tagged": {Tags}, "march": {Tags}, key: {Key},
	} {
		got := search([]*Partition{p}, q, 5)
		if len(got) != 1 || !cmp.Equal(got[0].Fields, want) {
			t.Errorf("%q: %+v, want fields %v", q, got, want)
		}
	}
}
