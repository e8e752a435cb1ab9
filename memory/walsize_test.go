package memory

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestWriteAheadLogStaysSmall: SQLite's checkpoints keep the log
// bounded through a long run of writes with pauses, not as large as every
// page ever written.
func TestWriteAheadLogStaysSmall(t *testing.T) {
	s, _ := mustOpen(t)
	body := strings.Repeat("a reasonably long sentence about the deploy pipeline and its steps. ", 50)
	for round := 0; round < 4; round++ {
		for i := 0; i < 400; i++ {
			put(t, s, projA, Write{Type: Working, Key: fmt.Sprintf("note-%d-%d", round, i), Body: body})
		}
		time.Sleep(1200 * time.Millisecond)
	}
	// The last round's checkpoint comes a second after its last commit;
	// on a loaded machine that can be later than the pause above.
	var fi os.FileInfo
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if fi, err = os.Stat(s.Path() + "-wal"); err != nil {
			t.Fatal(err)
		}
		if fi.Size() <= 16<<20 || time.Now().After(deadline) {
			break
		}
	}
	db, _ := os.Stat(s.Path())
	t.Logf("wal %d KiB, db %d KiB", fi.Size()>>10, db.Size()>>10)
	if fi.Size() > 16<<20 {
		t.Errorf("the write-ahead log is %d MiB after 1,600 writes", fi.Size()>>20)
	}
}
