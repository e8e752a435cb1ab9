package main

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// corpus makes records of realistic text: every word is drawn by Zipf's law
// from a vocabulary of a few thousand, stop-words at its head, as in real
// prose, so term frequencies (and so the work of a full-text search) look
// like those of a real memory store: the commonest searchable words turn up
// in about a third of the records, most in a few percent or less.
//
// Record i's name (where it lives, its type and key) depends on i alone, so
// the benchmark can address any seeded record without asking the server;
// its text comes from the shared random stream. The Go benchmarks in
// memory/bench_test.go use the same text model.
type corpus struct {
	seed  int64
	files int // records 0..files-1 are the project's mirrored facts
	r     *rand.Rand
	zipf  *rand.Zipf
	vocab []string
	stops int // vocab[:stops] are stop-words
}

// vocabSize is how many distinct words the corpus draws from.
const vocabSize = 4500

// stopWords head the vocabulary in about their order of frequency in
// English; the server's search drops them from queries.
const stopWords = `the of and to a in is it that for on with as be this by are or not from at we
if when then can should will you`

// techWords follow, so the commonest searchable terms read like a code
// base's; invented words make up the long tail.
const techWords = `test tests build deploy release database migration schema service server client api
config configuration flag env environment variable secret token auth login user users session cache
queue worker job cron retry timeout error errors log logs logging metric metrics trace alert alerts
docker image container kubernetes cluster node pod helm terraform module package dependency version
branch commit merge rebase review pull request ci pipeline lint format vet race fuzz benchmark
integration unit e2e fixture mock stub golden snapshot coverage flaky slow fast cold warm
go python typescript rust sql sqlite postgres redis kafka grpc http json yaml toml markdown
file files directory path paths root workspace project repo repository monorepo script scripts
make makefile command commands shell bash terminal editor ide agent prompt model context memory
index search query rank score field column table row rows key keys value values type types
handler middleware router endpoint request response status header body payload stream frame
frontend backend ui css html component page layout style theme button form input validation
date time zone clock timestamp duration interval deadline cancel signal shutdown restart start
install upgrade downgrade rollback backup restore replica primary leader follower use run
storage disk cpu latency throughput load pressure limit quota budget cost price billing
customer tenant account team owner reviewer maintainer policy rule rules convention style guide
doc docs readme changelog license issue bug fix feature refactor cleanup rename move delete`

// queryFillers are the stop-words between a query's searchable words.
var queryFillers = strings.Fields("the a of to and in for with on")

func newCorpus(seed int64, files int) *corpus {
	r := rand.New(rand.NewSource(seed))
	c := &corpus{seed: seed, files: files, r: r, zipf: rand.NewZipf(r, 1.07, 2, vocabSize-1)}
	seen := map[string]bool{}
	add := func(w string) {
		if !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	for _, w := range strings.Fields(stopWords) {
		add(w)
	}
	c.stops = len(c.vocab)
	for _, w := range strings.Fields(techWords) {
		add(w)
	}
	onsets := strings.Fields("b c d f g h k l m n p r s t v w z br cr dr fl gr pl pr sk sl sp st tr ch sh th")
	vowels := strings.Fields("a e i o u ai ea ee io oa ou")
	codas := []string{"", "", "", "n", "r", "s", "t", "l", "x", "m", "nd", "st"}
	for len(c.vocab) < vocabSize {
		var b strings.Builder
		for range 2 + r.Intn(2) {
			b.WriteString(onsets[r.Intn(len(onsets))])
			b.WriteString(vowels[r.Intn(len(vowels))])
		}
		b.WriteString(codas[r.Intn(len(codas))])
		add(b.String())
	}
	return c
}

// mix is splitmix64: a well-spread hash of i, for choices that must depend
// on the record number alone.
func mix(seed int64, i int) uint64 {
	z := uint64(seed)*0x9e3779b97f4a7c15 + uint64(i)*0xbf58476d1ce4e5b9
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// name says where record i lives and what it is. Records below c.files are
// the benchmarked project's facts, mirrored to markdown. Of the rest, 30%
// are its episodes and 25% its scratch notes (neither has a file), 15%
// machine-wide facts and procedures (system and workspace scope), and 30%
// belong to another workspace sharing the database.
func (c *corpus) name(i int) (other bool, lvl scope.Level, t memory.Type, key string) {
	h := mix(c.seed, i)
	a := c.vocab[c.stops+int((h>>16)%1000)]
	b := c.vocab[c.stops+int((h>>32)%uint64(vocabSize-c.stops))]
	key = a + "-" + b + "-" + strconv.Itoa(i)
	if i < c.files {
		return false, scope.Project, memory.Semantic, key
	}
	switch u := h % 100; {
	case u < 30:
		return false, scope.Project, memory.Episodic, key
	case u < 55:
		return false, scope.Project, memory.Working, key
	case u < 65:
		return false, scope.System, memory.Semantic, key
	case u < 70:
		return false, scope.System, memory.Procedural, key
	case u < 75:
		return false, scope.Workspace, memory.Semantic, key
	default:
		return true, scope.Project, []memory.Type{memory.Semantic, memory.Procedural, memory.Episodic, memory.Working}[(h>>8)%4], key
	}
}

func (c *corpus) word() string { return c.vocab[c.zipf.Uint64()] }

// term is a word worth searching for, as frequent as in the text.
func (c *corpus) term() string {
	for {
		if i := int(c.zipf.Uint64()); i >= c.stops {
			return c.vocab[i]
		}
	}
}

// text is about n words of prose in sentences.
func (c *corpus) text(n int) string {
	var b strings.Builder
	next, start := 6+c.r.Intn(10), true
	for i := range n {
		w := c.word()
		if start {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		start = false
		if next--; next == 0 || i == n-1 {
			b.WriteByte('.')
			next, start = 6+c.r.Intn(10), true
		}
	}
	return b.String()
}

// steps is a numbered procedure of about n words.
func (c *corpus) steps(n int) string {
	var b strings.Builder
	for i := 1; n > 0; i++ {
		k := 5 + c.r.Intn(8)
		fmt.Fprintf(&b, "%d. %s\n", i, c.text(k))
		n -= k
	}
	return b.String()
}

// body is fresh text of the length typical for type t.
func (c *corpus) body(t memory.Type) string {
	switch t {
	case memory.Semantic:
		return c.text(15 + c.r.Intn(45))
	case memory.Procedural:
		return c.steps(30 + c.r.Intn(90))
	case memory.Episodic:
		return c.text(60 + c.r.Intn(190))
	}
	return c.text(10 + c.r.Intn(70))
}

// description is one line for a list.
func (c *corpus) description() string { return c.text(5 + c.r.Intn(8)) }

// tags are up to three labels from the commonest searchable words.
func (c *corpus) tags() []string {
	var out []string
	for range c.r.Intn(4) {
		out = append(out, c.vocab[c.stops+c.r.Intn(60)])
	}
	return out
}

// query is a question in plain words, 4 to 6 of them worth searching for,
// drawn from the same distribution as the text.
func (c *corpus) query() string {
	words := []string{"how", "do", "we"}
	for k := 4 + c.r.Intn(3); k > 0; k-- {
		if c.r.Intn(3) == 0 {
			words = append(words, queryFillers[c.r.Intn(len(queryFillers))])
		}
		words = append(words, c.term())
	}
	return strings.Join(words, " ")
}
