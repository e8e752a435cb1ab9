package index

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWhenFavoursTimeWords checks that a question asking when ranks a
// record that says when above a shorter one holding the same words.
func TestWhenFavoursTimeWords(t *testing.T) {
	p := NewPartition()
	p.Put(Doc{ID: 1, Fields: [NumFields]string{"", "", "Omar: the pharmacology resit again, ugh."}})
	p.Put(Doc{ID: 2, Fields: [NumFields]string{"", "", "Omar: the pharmacology resit is on the 22nd of April, right after the long holidays with my family."}})
	p.Put(Doc{ID: 3, Fields: [NumFields]string{"", "", "Nadia: I will quiz you on the drug names."}})
	q := "When is Omar's pharmacology resit?"
	got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 2}, DefaultParams)
	if len(got) == 0 || got[0].ID != 2 {
		t.Errorf("top %v, want 2 first", ids(got))
	}
	prm := DefaultParams
	prm.When = 0
	if got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 2}, prm); len(got) > 0 && got[0].ID == 2 {
		t.Errorf("without the bonus 2 ranks first too: the test does not test it")
	}
	// The same words not asking when rank by words alone.
	q = "Omar's pharmacology resit"
	if got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 2}, DefaultParams); len(got) == 0 || got[0].ID != 1 {
		t.Errorf("not asking when: top %v, want 1 first", ids(got))
	}
}

// TestDateTerms checks that a record is found by the year and month it
// was written in, that why names the field they are kept in, and that a
// record without a date has none.
func TestDateTerms(t *testing.T) {
	p := NewPartition()
	p.Put(Doc{ID: 1, Fields: [NumFields]string{"", "", "Omar: I started running with a club."}, Created: time.Date(2024, 10, 6, 8, 0, 0, 0, time.UTC)})
	p.Put(Doc{ID: 2, Fields: [NumFields]string{"", "", "Omar: I started running again."}, Created: time.Date(2024, 7, 14, 8, 0, 0, 0, time.UTC)})
	p.Put(Doc{ID: 3, Fields: [NumFields]string{"", "", "Omar: running in October is cold."}})
	q := "What did Omar start in October 2024?"
	got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 3}, DefaultParams)
	if len(got) == 0 || got[0].ID != 1 {
		t.Fatalf("top %v, want 1 first", ids(got))
	}
	for i, term := range got[0].Terms {
		if term == "october" && got[0].TermFields[i] != 1<<Tags {
			t.Errorf("october matched in fields %b, want tags", got[0].TermFields[i])
		}
	}
	if !slices.Contains(got[0].Terms, "october") || !slices.Contains(got[0].Terms, "2024") {
		t.Errorf("why terms %v, want the month and year among them", got[0].Terms)
	}
	if got := Search([]*Partition{p}, Query{Terms: Analyze("2024"), K: 3}, DefaultParams); !slices.Equal(ids(got), []int64{2, 1}) {
		t.Errorf("by the year: %v, want the two dated records, newer first", ids(got))
	}
}

// TestAllWordsOutrankRepeats checks that coordination at full strength
// ranks the record holding every word of a question above one repeating
// two of them in a heavier field, which a square root of the share left
// above it.
func TestAllWordsOutrankRepeats(t *testing.T) {
	p := NewPartition()
	for i := range 50 {
		p.Put(Doc{ID: int64(i), Fields: [NumFields]string{fmt.Sprintf("n%d", i), "", "notes on the cellist and the rota"}})
	}
	p.Put(Doc{ID: 100, Fields: [NumFields]string{"", strings.Repeat("hiro cello ", 5), ""}})
	p.Put(Doc{ID: 101, Fields: [NumFields]string{"", "", "Hiro: I am back on the cello after years, rehearsing" + strings.Repeat(" again", 10) + " with the orchestra."}})
	q := "hiro cello orchestra"
	if got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 2}, DefaultParams); len(got) == 0 || got[0].ID != 101 {
		t.Errorf("top %v, want 101 first", ids(got))
	}
	prm := DefaultParams
	prm.Coord = 0.5
	if got := Search([]*Partition{p}, Query{Terms: Analyze(q), Phrase: Sequence(q), K: 2}, prm); len(got) > 0 && got[0].ID == 101 {
		t.Errorf("with coordination 0.5 101 ranks first too: the test does not test it")
	}
}
