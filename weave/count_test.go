package weave

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// The counts Count gives are checked against tiktoken-go, the reference
// implementation of cl100k_base in Go, which the package used before it
// counted on its own.

var loadReference = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	return tiktoken.GetEncoding(tiktoken.MODEL_CL100K_BASE)
})

// reference returns tiktoken-go's cl100k_base.
func reference(tb testing.TB) *tiktoken.Tiktoken {
	tb.Helper()
	enc, err := loadReference()
	if err != nil {
		tb.Fatalf("load tiktoken-go: %v", err)
	}
	return enc
}

// referenceCount is tiktoken-go's count of s.
func referenceCount(tb testing.TB, s string) int {
	return len(reference(tb).EncodeOrdinary(s))
}

// sameCount fails tb unless Count agrees with tiktoken-go on s.
func sameCount(tb testing.TB, what, s string) {
	tb.Helper()
	if got, want := shared.Count(s), referenceCount(tb, s); got != want {
		tb.Errorf("%s: Count = %d, tiktoken-go %d\n%q", what, got, want, s)
	}
}

// TestCountRepositoryFiles compares counts on every file of the
// repository's testdata and README, whole and line by line.
func TestCountRepositoryFiles(t *testing.T) {
	var files []string
	err := filepath.WalkDir("../testdata", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	if len(files) < 10 {
		t.Fatalf("only %d files found", len(files))
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !utf8.ValidString(s) {
			continue
		}
		sameCount(t, path, s)
		for i, line := range strings.SplitAfter(s, "\n") {
			sameCount(t, path+":"+strconv.Itoa(i+1), line)
			sameCount(t, path+":"+strconv.Itoa(i+1)+" without its newline", strings.TrimSuffix(line, "\n"))
		}
	}
}

// Bits of text the generator strings together: each is a case the
// pre-tokenizer's alternatives treat apart.
var (
	genWords = []string{
		"hello", "World", "THE", "a", "I", "don", "can", "we", "they", "you", "it",
		"naïve", "café", "Straße", "ǅemal", "ﬁne", "ſtar", "İstanbul", "KELVIN", "Ωmega",
		"привет", "Ελλάδα", "שלום", "مرحبا", "हिन्दी", "ภาษาไทย", "ქართული", "Հայերեն",
		"日本語", "中文字", "漢", "한국어", "한", "ㄱㄴ", "ひらがな", "カタカナ", "ｶﾀｶﾅ",
		"e\u0301", "a\u0308\u0301", "\u0301", "\u093f", "x\u20dd", "Ꭰ", "ᚠᛇᚻ",
		"tokenizer", "Tokenization", "antidisestablishmentarianism", "pneumonoultramicroscopic",
		"ab", "AbC", "mcp", "JSON", "sqlite3", "go1", "v2",
	}
	genContractions = []string{
		"'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'Ve", "'m", "'M",
		"'ll", "'LL", "'Ll", "'lL", "'d", "'D", "'r", "'v", "'l", "'", "''", "'''", "'x",
		"’s", "‘t", "'\u017f", "'\u212a", "'\u0130", "'S'", "'s'", "'ss", "'lll", "'ree",
	}
	genDigits = []string{
		"0", "1", "12", "123", "1234", "12345", "123456", "1234567", "31415926535",
		"٣", "١٢٣٤", "०१२", "Ⅻ", "½", "²", "①②③④", "𝟙𝟚", "٫", "1.5", "1,000", "-7", "+42", "0x1F",
	}
	genSpaces = []string{
		" ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r", "\r\n",
		"\r\n\r\n", "\v", "\f", " \n", "\n ", " \n ", "\t\n\t", "\u00a0", "\u0085", "\u1680",
		"\u2000", "\u2007", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
		"\ufeff", " \u00a0", "\u3000\u3000", " \r", "\r ", "\n\u2028", "\u2028\n", " \t \n \t ",
	}
	genSymbols = []string{
		".", ",", "!", "?", "...", "—", "–", "-", "--", "---", "***", "**", "`", "```", "~~~",
		"#", "##", "###", "|", "||", "/", "\\", "(", ")", "[]", "{}", "<|endoftext|>", "<|fim_prefix|>",
		"<", ">", "=>", "::", ":=", "&&", "@", "$", "%", "^", "&", "*", "_", "__", "+", "=", "==",
		"\"", "«", "»", "„", "“", "”", "•", "·", "…", "€", "£", "¥", "©", "®", "™", "°", "§", "¶",
		"😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "☕", "🇫🇷", "\u200d", "\ufe0f", "\x00", "\x1b", "\x7f",
		"\ufffd", "\U0010ffff", "\ue000", "�", ".\n", "!\n\n", "?\r\n", ":\n", ";\r", ")\n\n\n",
	}
)

// genText strings together n random bits of every kind.
func genText(r *rand.Rand, n int) string {
	var b strings.Builder
	kinds := [][]string{genWords, genWords, genContractions, genDigits, genSpaces, genSpaces, genSymbols}
	for range n {
		k := kinds[r.Intn(len(kinds))]
		b.WriteString(k[r.Intn(len(k))])
		if r.Intn(4) == 0 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// TestCountGenerated compares counts on many strings mixing words of many
// scripts, contractions in every case, numbers, every kind of white space
// and symbols, in short and long mixes.
func TestCountGenerated(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	n := 20_000
	if testing.Short() || raceEnabled {
		n = 2_000
	}
	for i := range n {
		s := genText(r, 1+r.Intn(12))
		sameCount(t, "short "+strconv.Itoa(i), s)
		if t.Failed() {
			return
		}
	}
	for i := range n / 20 {
		s := genText(r, 50+r.Intn(400))
		sameCount(t, "long "+strconv.Itoa(i), s)
		if t.Failed() {
			return
		}
	}
}

// TestCountPairs compares counts on every pair and triple of the bits
// that exercise white space against what follows it.
func TestCountPairs(t *testing.T) {
	bits := append(append(append([]string{"a", "Ab", "1", "12345", "'s", "'LL", "'"}, genSpaces...), genSymbols[:20]...), "日本", "é", "\u0301")
	step := 1
	if raceEnabled {
		step = 7
	}
	for _, a := range bits {
		for _, b := range bits {
			sameCount(t, "pair", a+b)
			for i := 0; i < len(genSpaces); i += step {
				sameCount(t, "triple", a+genSpaces[i]+b)
			}
		}
	}
}

// TestCountInvalidUTF8 checks that bytes that are not UTF-8 count as
// tiktoken-go counts them.
func TestCountInvalidUTF8(t *testing.T) {
	for _, s := range []string{
		"\xff", "\xff\xfe", "a\x80b", "hello \xc3", "\xc3(", "\xe2\x82", "\xe2\x82 x",
		"\xf0\x9f\x98", "\xf0\x9f\x98\x80\x80", "don\xff't", "12\xff34", " \xff\n", "\xed\xa0\x80",
	} {
		sameCount(t, "invalid", s)
	}
}

// TestCountLongRunsExact checks long one-class runs, which an earlier
// Count cut into pieces and undercounted, and the inputs where the cuts
// showed it: Count equals the encoding on all of them.
func TestCountLongRunsExact(t *testing.T) {
	for name, run := range longRuns {
		for _, n := range []int{255, 256, 257, 775, 2000} {
			sameCount(t, fmt.Sprintf("%s of %d", name, n), "Before the run: "+string([]rune(run)[:n])+" and after it.\n")
		}
	}
	for _, s := range []string{strings.Repeat("\n", 258), "x" + strings.Repeat("ab", 129), "x" + strings.Repeat("ab", 1000),
		"Note: " + strings.Repeat("❤\ufe0f", 300) + "\n", strings.Repeat("!\u0301", 300)} {
		sameCount(t, "run", s)
	}
}

// FuzzCount compares Count and the uncut encoding with tiktoken-go on any
// valid UTF-8.
func FuzzCount(f *testing.F) {
	for _, s := range []string{
		"hello world", "I'm here, aren'T you? We'LL see.", "  \n\n  x", "a \u00a0b", "1234567",
		"```go\nfunc main() {}\n```\n", "\t\t- item\r\n", "👨‍👩‍👧 emoji", "漢字とかな", " !!!\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || len(s) > 4<<10 {
			return
		}
		sameCount(t, "fuzz", s)
	})
}

// TestCountEveryRune compares counts with code points placed where each
// alternative of the pre-tokenizer looks at them: alone, after a space, an
// apostrophe, a letter and a digit, before them, and doubled. It takes
// every code point of the first two planes, where the scripts in use are,
// and a sample of the others (the race detector's run samples all).
func TestCountEveryRune(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: over a hundred thousand code points")
	}
	step := func(r rune) rune {
		if r < 0x20000 && !raceEnabled {
			return 1
		}
		return 61
	}
	var b strings.Builder
	flush := func() {
		sameCount(t, "runes", b.String())
		b.Reset()
	}
	for r := rune(0); r <= utf8.MaxRune; r += step(r) {
		if !utf8.ValidRune(r) {
			continue
		}
		c := string(r)
		for _, s := range []string{c, " " + c, "'" + c, "a" + c, "1" + c, c + "a", c + "1", c + "'s", c + c, "\n" + c + " "} {
			b.WriteString(s)
			b.WriteString("|")
		}
		if b.Len() > 900 {
			flush()
		}
		if t.Failed() {
			t.Fatalf("at U+%04X", r)
		}
	}
	flush()
}

// TestCountAllocatesNothing checks that counting a block, long runs and
// all, allocates nothing once the encoding is loaded.
func TestCountAllocatesNothing(t *testing.T) {
	s := strings.Repeat("## Facts\n\nUse `make test`; it's 12345 times faster — naïve café 日本語.\n\n", 40) +
		longRuns["letter"][:3000] + longRuns["punct"][:1000] + "\n"
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it is given")
	}
	shared.Preload()
	if n := testing.AllocsPerRun(5, func() { shared.Count(s) }); n != 0 {
		t.Errorf("Count allocates %v times", n)
	}
}

// TestCountConcurrent counts short and long pieces (the stack's scratch
// and the pool's heap merge) from several goroutines at once: each count
// is what it is alone.
func TestCountConcurrent(t *testing.T) {
	texts := []string{
		"Use `make test`; it's faster — naïve café 日本語.\n",
		"x" + strings.Repeat("ab", 700),
		strings.Repeat("\n", 600) + "end",
		strings.Repeat("❤\ufe0f", 200),
		longRuns["cjk"][:3000],
	}
	want := make([]int, len(texts))
	for i, s := range texts {
		want[i] = shared.Count(s)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for k := range 60 {
				i := (g + k) % len(texts)
				if got := shared.Count(texts[i]); got != want[i] {
					t.Errorf("text %d: %d at once, %d alone", i, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}
