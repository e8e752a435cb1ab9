// Package corpus is the text model of the benchmarks: the prose of the
// generated records and the questions asked of them. Every word is drawn by
// Zipf's law from a vocabulary of a few thousand, stop-words at its head, as
// in real prose, so term frequencies, and so the work of a full-text search,
// look like those of a real memory store: the commonest searchable words turn
// up in about a third of the records, most in a few percent or less.
//
// It knows nothing of records, scopes or types; the benchmarks decide what a
// record is and ask it for the words. It imports the standard library only,
// so the memory package's own benchmarks can use it too.
package corpus

import (
	"fmt"
	"math/rand"
	"strings"
)

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

// vocab is every word the corpus writes, by rank; vocab[:stops] are the
// stop-words. It is the same whatever a corpus's seed, so that words chosen
// by rank (TermAt) name the same record in every corpus.
var vocab, stops = newVocab()

func newVocab() ([]string, int) {
	var vocab []string
	seen := map[string]bool{}
	add := func(w string) {
		if !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	for _, w := range strings.Fields(stopWords) {
		add(w)
	}
	stops := len(vocab)
	for _, w := range strings.Fields(techWords) {
		add(w)
	}
	r := rand.New(rand.NewSource(1))
	onsets := strings.Fields("b c d f g h k l m n p r s t v w z br cr dr fl gr pl pr sk sl sp st tr ch sh th")
	vowels := strings.Fields("a e i o u ai ea ee io oa ou")
	codas := []string{"", "", "", "n", "r", "s", "t", "l", "x", "m", "nd", "st"}
	for len(vocab) < vocabSize {
		var b strings.Builder
		for range 2 + r.Intn(2) {
			b.WriteString(onsets[r.Intn(len(onsets))])
			b.WriteString(vowels[r.Intn(len(vowels))])
		}
		b.WriteString(codas[r.Intn(len(codas))])
		add(b.String())
	}
	return vocab, stops
}

// Corpus writes text from one seeded random stream: two corpora made with
// the same seed write the same text, call for call. It is not safe for
// concurrent use.
type Corpus struct {
	r    *rand.Rand
	zipf *rand.Zipf
}

// New returns a corpus whose text is seeded with seed.
func New(seed int64) *Corpus {
	r := rand.New(rand.NewSource(seed))
	return &Corpus{r: r, zipf: rand.NewZipf(r, 1.07, 2, vocabSize-1)}
}

// Intn returns a number in [0, n) from the corpus's stream, for the choices
// a benchmark makes about a record's text (its length, say), so that one
// seed fixes all of it. It panics if n <= 0.
func (c *Corpus) Intn(n int) int { return c.r.Intn(n) }

// Word is one word of running text, stop-words included.
func (c *Corpus) Word() string { return vocab[c.zipf.Uint64()] }

// Term is a word worth searching for, as frequent as in the text.
func (c *Corpus) Term() string {
	for {
		if i := int(c.zipf.Uint64()); i >= stops {
			return vocab[i]
		}
	}
}

// TermAt is the searchable word of the given frequency rank, 0 the
// commonest, counting round again past the rarest. Chosen by a hash of a
// record's number (see Mix), such words name a record by its number alone.
func TermAt(rank uint64) string {
	return vocab[stops+int(rank%uint64(len(vocab)-stops))]
}

// Text is about n words of prose in sentences of 6 to 15 words.
func (c *Corpus) Text(n int) string {
	var b strings.Builder
	next, start := 6+c.r.Intn(10), true
	for i := range n {
		w := c.Word()
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

// Steps is a numbered procedure of about n words, one step a line.
func (c *Corpus) Steps(n int) string {
	var b strings.Builder
	for i := 1; n > 0; i++ {
		k := 5 + c.r.Intn(8)
		fmt.Fprintf(&b, "%d. %s\n", i, c.Text(k))
		n -= k
	}
	return b.String()
}

// Description is one sentence of 5 to 12 words, for a list.
func (c *Corpus) Description() string { return c.Text(5 + c.r.Intn(8)) }

// Tags are 0 to 3 labels, each count as likely, from the 60 commonest
// searchable words.
func (c *Corpus) Tags() []string {
	var out []string
	for range c.r.Intn(4) {
		out = append(out, TermAt(uint64(c.r.Intn(60))))
	}
	return out
}

// Query is a question in plain words, 4 to 6 of them worth searching for,
// drawn as in the text, with now and then a stop-word between them.
func (c *Corpus) Query() string {
	words := []string{"how", "do", "we"}
	for k := 4 + c.r.Intn(3); k > 0; k-- {
		if c.r.Intn(3) == 0 {
			words = append(words, queryFillers[c.r.Intn(len(queryFillers))])
		}
		words = append(words, c.Term())
	}
	return strings.Join(words, " ")
}

// Mix is splitmix64: a well-spread hash of i under seed, for the choices
// about record i that must depend on its number alone, such as where it
// lives and what it is called.
func Mix(seed int64, i int) uint64 {
	z := uint64(seed)*0x9e3779b97f4a7c15 + uint64(i)*0xbf58476d1ce4e5b9
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
