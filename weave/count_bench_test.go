package weave

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// benchTexts are a recall-sized block of mixed markdown (about 6 KB of
// the README) and long prose (about 32 KB of conversation).
func benchTexts(b *testing.B) map[string]string {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		b.Fatal(err)
	}
	block := string(readme[:6<<10])
	block = block[:strings.LastIndexByte(block, '\n')+1]

	raw, err := os.ReadFile("../testdata/eval/conversations.json")
	if err != nil {
		b.Fatal(err)
	}
	var convs struct {
		Conversations []struct{ Turns []string }
	}
	if err := json.Unmarshal(raw, &convs); err != nil {
		b.Fatal(err)
	}
	var prose strings.Builder
	for prose.Len() < 32<<10 {
		for _, c := range convs.Conversations {
			for _, t := range c.Turns {
				prose.WriteString(t)
				prose.WriteString("\n")
			}
		}
	}
	return map[string]string{"block": block, "prose": prose.String()}
}

// BenchmarkCountText counts a block and long prose with Count, in pieces,
// and with tiktoken-go given the whole text.
func BenchmarkCountText(b *testing.B) {
	texts := benchTexts(b)
	shared.Preload()
	reference(b)
	for _, name := range []string{"block", "prose"} {
		s := texts[name]
		for _, impl := range []struct {
			name  string
			count func(string) int
		}{
			{"pieces", shared.Count},
			{"whole", func(s string) int { return referenceCount(b, s) }},
		} {
			b.Run(name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				b.ReportAllocs()
				for b.Loop() {
					impl.count(s)
				}
			})
		}
	}
}

// cl100kPattern is tiktoken-go's pre-tokenizer for cl100k_base.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// BenchmarkLoad loads cl100k_base afresh, as the first Count does: the
// ranks from tiktoken-go-loader's embedded file, then tiktoken-go's
// encoder. Beside the time and the bytes allocated, it reports the heap
// the loaded tables keep live (heap-B) and how much longer a full garbage
// collection takes while they are (gc-ns). Run it alone: tables other
// benchmarks loaded would be in every collection.
func BenchmarkLoad(b *testing.B) {
	loads := []struct {
		name string
		load func() (any, error)
	}{
		{"tiktoken-go", func() (any, error) {
			ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
			if err != nil {
				return nil, err
			}
			special := map[string]int{"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
			return tiktoken.NewCoreBPE(ranks, special, cl100kPattern)
		}},
	}
	for _, l := range loads {
		b.Run(l.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.load(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// What one load keeps live and adds to a full collection.
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			runtime.GC()
			gc := -time.Since(start)
			enc, err := l.load()
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			start = time.Now()
			runtime.GC()
			gc += time.Since(start)
			runtime.KeepAlive(enc)
			b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-B")
			b.ReportMetric(float64(gc.Nanoseconds()), "gc-ns")
		})
	}
}
