package memory

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestWriteAheadLogStaysSmall: the background checkpoints keep the log
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
	fi, err := os.Stat(s.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	db, _ := os.Stat(s.Path())
	t.Logf("wal %d KiB, db %d KiB", fi.Size()>>10, db.Size()>>10)
	if fi.Size() > 16<<20 {
		t.Errorf("the write-ahead log is %d MiB after 1,600 writes", fi.Size()>>20)
	}
}
