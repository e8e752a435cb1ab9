package index

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
)

// benchPartitions are a project's partition of n records' worth of
// generated prose and a shared one a sixth its size.
func benchPartitions(n int) []*Partition {
	c := corpus.New(1)
	parts := []*Partition{NewPartition(), NewPartition()}
	for i := range n {
		p := parts[0]
		if i%6 == 0 {
			p = parts[1]
		}
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{
			corpus.TermAt(uint64(i)%1000) + "-" + strconv.Itoa(i), c.Description(), c.Text(15 + c.Intn(200)), c.Term(),
		}})
	}
	return parts
}

// BenchmarkSearch ranks the top 10 for a question of four to six
// searchable words, with the phrase bonus, as the store searches.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{5_000, 20_000, 100_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			if testing.Short() && n > 20_000 {
				b.Skip("-short: skipping the largest size")
			}
			parts := benchPartitions(n)
			c := corpus.New(3)
			qs := make([]Query, 64)
			for i := range qs {
				text := c.Query()
				qs[i] = Query{Terms: Analyze(text), Phrase: Sequence(text), K: 10}
			}
			b.ResetTimer()
			for i := range b.N {
				Search(parts, qs[i%len(qs)], DefaultParams)
			}
		})
	}
}

// BenchmarkSearchWhen ranks the top 10 for a question asking when, which
// ranks a larger pool and looks for time words among it.
func BenchmarkSearchWhen(b *testing.B) {
	for _, n := range []int{5_000, 20_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			parts := benchPartitions(n)
			c := corpus.New(3)
			qs := make([]Query, 64)
			for i := range qs {
				text := "when did we " + strings.TrimPrefix(c.Query(), "how do we ")
				qs[i] = Query{Terms: Analyze(text), Phrase: Sequence(text), K: 10}
			}
			b.ResetTimer()
			for i := range b.N {
				Search(parts, qs[i%len(qs)], DefaultParams)
			}
		})
	}
}

// BenchmarkSearchPhrase ranks the top 10 for five consecutive words of a
// record's body, as a person quoting it would search.
func BenchmarkSearchPhrase(b *testing.B) {
	for _, n := range []int{5_000, 20_000, 100_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			if testing.Short() && n > 20_000 {
				b.Skip("-short: skipping the largest size")
			}
			parts := benchPartitions(n)
			qs := make([]Query, 0, 64)
			// The bodies benchPartitions wrote, from the same stream.
			c := corpus.New(1)
			for i := range n {
				c.Description()
				body := c.Text(15 + c.Intn(200))
				c.Term()
				if i%(n/64) != 0 || len(qs) == cap(qs) {
					continue
				}
				ws := strings.Fields(strings.ReplaceAll(body, ".", ""))
				at := (i / 7) % (len(ws) - 4)
				text := strings.Join(ws[at:at+5], " ")
				qs = append(qs, Query{Terms: Analyze(text), Phrase: Sequence(text), K: 10})
			}
			b.ResetTimer()
			for i := range b.N {
				Search(parts, qs[i%len(qs)], DefaultParams)
			}
		})
	}
}

// BenchmarkAnalyze analyses a record's worth of prose.
func BenchmarkAnalyze(b *testing.B) {
	text := corpus.New(1).Text(120)
	b.SetBytes(int64(len(text)))
	for range b.N {
		Analyze(text)
	}
}

// BenchmarkPartitionHeap loads 10,000 documents of generated prose into
// partitions, as a process's first search does, and reports the heap the
// partitions keep per document (B/doc) once loaded and trimmed.
func BenchmarkPartitionHeap(b *testing.B) {
	const n = 10_000
	var kept float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		parts := benchPartitions(n)
		for _, p := range parts {
			p.Trim()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(parts)
	}
	b.ReportMetric(kept/n, "B/doc")
}

// BenchmarkRunShare measures the phrase check on one record of about 120
// words of generated prose, for a question with a stop-word in it.
func BenchmarkRunShare(b *testing.B) {
	c := corpus.New(1)
	p := NewPartition()
	p.Put(Doc{ID: 1, Fields: [NumFields]string{"some-key", c.Description(), c.Text(120), c.Term()}})
	q := phraseIDs(p, Query{Phrase: Sequence("how do we " + c.Term() + " the " + c.Term() + " " + c.Term())})
	var sc scratch
	b.ReportAllocs()
	for b.Loop() {
		runShare(p, 0, q, &sc)
	}
}

// BenchmarkSearchCommonPhrase quotes a phrase every record holds, among
// other words: every record is a phrase holder, and only the top 10 are
// wanted.
func BenchmarkSearchCommonPhrase(b *testing.B) {
	p := NewPartition()
	c := corpus.New(5)
	for i := range 30_000 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{2: c.Text(20) + " read the release notes " + c.Text(20)}})
	}
	q := "read the release notes"
	query := Query{Terms: Analyze(q), Phrase: Sequence(q), K: 10}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		Search([]*Partition{p}, query, DefaultParams)
	}
}
