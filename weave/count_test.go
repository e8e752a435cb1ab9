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
)

// Count is checked against tiktoken-go's count of the whole text, which
// Count reaches in pieces.

// reference returns the encoding Count uses.
func reference(tb testing.TB) *tiktoken.Tiktoken {
	tb.Helper()
	enc, err := cl100k()
	if err != nil {
		tb.Fatalf("load cl100k_base: %v", err)
	}
	return enc
}

// referenceCount is tiktoken-go's count of s, whole.
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

// notBelow fails tb if Count is below tiktoken-go's count of s.
func notBelow(tb testing.TB, what, s string) {
	tb.Helper()
	if got, want := shared.Count(s), referenceCount(tb, s); got < want {
		tb.Errorf("%s: Count = %d, below tiktoken-go's %d\n%q", what, got, want, s)
	}
}

// cutInside reports whether pieces of at most max bytes cut s inside a
// pre-token anywhere.
func cutInside(s string, max int) bool {
	for len(s) > 0 {
		end, clean := nextPiece(s, max)
		if !clean {
			return true
		}
		s = s[end:]
	}
	return false
}

// smallPieces are piece sizes that cut ordinary text often, so that every
// kind of place a piece can end at is met.
var smallPieces = []int{1, 5, 16, 60}

// cutsAddUp checks count with small pieces on s: equal to tiktoken-go's
// count of the whole where every cut is clean, and never below it.
func cutsAddUp(tb testing.TB, what, s string) {
	tb.Helper()
	enc := reference(tb)
	want := referenceCount(tb, s)
	for _, max := range smallPieces {
		got := count(enc, s, max)
		if got < want || got != want && !cutInside(s, max) {
			tb.Errorf("%s: in pieces of %d bytes, count = %d, tiktoken-go %d\n%q", what, max, got, want, s)
		}
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
// and symbols, in short and long mixes, whole and in small pieces.
func TestCountGenerated(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	n := 20_000
	if testing.Short() || raceEnabled {
		n = 2_000
	}
	for i := range n {
		s := genText(r, 1+r.Intn(12))
		sameCount(t, "short "+strconv.Itoa(i), s)
		if i%4 == 0 {
			cutsAddUp(t, "short "+strconv.Itoa(i), s)
		}
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

// genProse writes about n bytes of what records hold: sentences of
// English, code, Chinese and Japanese with their punctuation, and emoji.
func genProse(r *rand.Rand, n int) string {
	sentences := []string{
		"The store keeps one row per record; its key is unique within a scope. ",
		"Don't run the migrations twice — they're idempotent, but it's slow.\n",
		"func (s *Store) Put(ctx context.Context, r Record) error {\n\tif err := s.check(r); err != nil {\n\t\treturn fmt.Errorf(\"put %s: %w\", r.Key, err)\n\t}\n\treturn nil\n}\n",
		"    for i := 0; i < len(xs); i++ { total += xs[i] * 2 } // sum\n",
		"| key | value |\n|---|---|\n| timeout | 30s |\n",
		"记忆服务把项目的事实保存在本地数据库中，每次对话开始时都会读取。",
		"如果预算太小，就只显示标题和一行说明。测试覆盖了所有的边界情况！",
		"このサーバーはプロジェクトの記憶を保存します。検索は全文索引で行います、",
		"設定ファイルは「memory.toml」です。トークンの上限は1500です。",
		"Ship it 🚀 when the tests pass ✅, not before ❌. Thanks 🙏🏽!\n",
		"👨‍👩‍👧‍👦 family, 🇫🇷 flag, ❤️ heart — all in one line 😀😀😀.\n",
		"Numbers: 3.14159, 1,000,000 and 0x1F; dates like 2024-05-13.\n",
		"Naïve café owners in Zürich said: «C'est la vie» (ça va).\n\n",
		"## Heading\n\n- item one\n- item two\n\n```sh\nmake test\n```\n",
	}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(sentences[r.Intn(len(sentences))])
	}
	return b.String()
}

// TestCountProse compares counts on long mixes of prose, code, CJK and
// emoji, which Count takes in many pieces: every cut is clean, and the
// count is tiktoken-go's.
func TestCountProse(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := range 200 {
		s := genProse(r, 200+r.Intn(8000))
		if cutInside(s, maxPiece) {
			t.Errorf("prose %d is cut inside a pre-token", i)
		}
		sameCount(t, "prose "+strconv.Itoa(i), s)
		if i%10 == 0 {
			cutsAddUp(t, "prose "+strconv.Itoa(i), s[:min(len(s), 600)])
		}
	}
}

// TestCountPairs compares counts on every pair and triple of the bits
// that exercise white space against what follows it, whole and in small
// pieces.
func TestCountPairs(t *testing.T) {
	bits := append(append(append([]string{"a", "Ab", "1", "12345", "'s", "'LL", "'"}, genSpaces...), genSymbols[:20]...), "日本", "é", "\u0301")
	step := 1
	if raceEnabled {
		step = 7
	}
	for _, a := range bits {
		for _, b := range bits {
			sameCount(t, "pair", a+b)
			cutsAddUp(t, "pair", a+b)
			for i := 0; i < len(genSpaces); i += step {
				sameCount(t, "triple", a+genSpaces[i]+b)
			}
		}
	}
}

// TestCountInvalidUTF8 checks that bytes that are not UTF-8 count as
// tiktoken-go counts them, whole and in pieces.
func TestCountInvalidUTF8(t *testing.T) {
	for _, s := range []string{
		"\xff", "\xff\xfe", "a\x80b", "hello \xc3", "\xc3(", "\xe2\x82", "\xe2\x82 x",
		"\xf0\x9f\x98", "\xf0\x9f\x98\x80\x80", "don\xff't", "12\xff34", " \xff\n", "\xed\xa0\x80",
		"ab\xe6\xbc cd", "\x80\x80\x80 x\xbf y", "漢\xe6\xbc漢 \xa2",
	} {
		sameCount(t, "invalid", s)
		cutsAddUp(t, "invalid", s)
	}
	notBelow(t, "continuation bytes", strings.Repeat("\x80", 3*maxPiece))
}

// adversarial returns runs with no clean cut: one character, or a few
// repeated or mixed at random, of every class the pre-tokenizer tells
// apart.
func adversarial(r *rand.Rand, n int) []string {
	alphabet := []string{"a", "b", "ab", "aa", "x", "e", "th", "ing", "漢", "字", "ー", "ก", "é",
		"\u0301", "😀", "❤\ufe0f", "7", "٣", "=", "-", "!", " ", "\t", "\n", "\r\n", "\u3000"}
	var runs []string
	for range n {
		parts := make([]string, 1+r.Intn(3))
		for i := range parts {
			parts[i] = alphabet[r.Intn(len(alphabet))]
		}
		var b strings.Builder
		for size := 2*maxPiece + r.Intn(3000); b.Len() < size; {
			if r.Intn(3) == 0 {
				b.WriteString(parts[r.Intn(len(parts))])
			} else {
				b.WriteString(parts[b.Len()%len(parts)])
			}
		}
		runs = append(runs, b.String())
	}
	return runs
}

// TestCountLongRunsNotBelow checks long runs of one class, alone and
// inside text, and the inputs that once showed a cut count short: the
// count is never below tiktoken-go's count of the whole.
func TestCountLongRunsNotBelow(t *testing.T) {
	for name, run := range longRuns {
		for _, n := range []int{255, 256, 257, 775, 2000} {
			notBelow(t, fmt.Sprintf("%s of %d", name, n), "Before the run: "+string([]rune(run)[:n])+" and after it.\n")
		}
	}
	for _, s := range []string{strings.Repeat("\n", 258), "x" + strings.Repeat("ab", 129), "x" + strings.Repeat("ab", 1000),
		"Note: " + strings.Repeat("❤\ufe0f", 300) + "\n", strings.Repeat("!\u0301", 300)} {
		notBelow(t, "run", s)
	}
	n := 300
	if testing.Short() || raceEnabled {
		n = 30
	}
	for i, s := range adversarial(rand.New(rand.NewSource(4)), n) {
		notBelow(t, "adversarial "+strconv.Itoa(i), s)
		if t.Failed() {
			return
		}
	}
}

// TestCountLongCJKRun counts a run of 63,000 CJK characters with no break,
// which tiktoken-go given it whole would take minutes over.
func TestCountLongCJKRun(t *testing.T) {
	s := strings.Repeat("漢", 63_000)
	if n := shared.Count(s); n < 63_000 {
		t.Errorf("Count = %d, fewer than one token a character", n)
	}
}

// BenchmarkCountLongCJKRun counts the run of TestCountLongCJKRun.
func BenchmarkCountLongCJKRun(b *testing.B) {
	s := strings.Repeat("漢", 63_000)
	shared.Preload()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		shared.Count(s)
	}
}

// FuzzCount compares Count with tiktoken-go on any valid UTF-8: equal
// unless Count cut inside a pre-token, and never below.
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
		if cutInside(s, maxPiece) {
			notBelow(t, "fuzz", s)
		} else {
			sameCount(t, "fuzz", s)
		}
		cutsAddUp(t, "fuzz", s)
	})
}

// TestCountEveryRune compares counts with code points placed where each
// alternative of the pre-tokenizer looks at them: alone, after a space, an
// apostrophe, a letter and a digit, before them, and doubled; and split
// at every clean cut around them. It takes every code point of the first
// two planes, where the scripts in use are, and a sample of the others
// (the race detector's run samples all).
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
	enc := reference(t)
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
		if r > 0x3000 && r%5 != 0 {
			continue // the white space and punctuation are all checked, the rest sampled
		}
		// Every place a piece may end around c, against the whole.
		s := "a" + c + " " + c + "a1" + c + "1 " + c + c + " x"
		want := referenceCount(t, s)
		for i := 1; i < len(s); i++ {
			if utf8.RuneStart(s[i]) && cleanCut(s, i) {
				if got := len(enc.EncodeOrdinary(s[:i])) + len(enc.EncodeOrdinary(s[i:])); got != want {
					t.Errorf("cut at %d of %q: %d tokens, whole %d", i, s, got, want)
				}
			}
		}
		if t.Failed() {
			t.Fatalf("at U+%04X", r)
		}
	}
	flush()
}

// TestCountConcurrent counts short and long texts, long runs cut in
// pieces among them, from several goroutines at once: each count is what
// it is alone.
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
