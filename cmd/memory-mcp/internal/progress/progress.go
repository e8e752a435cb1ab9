// Package progress draws a progress bar on a terminal, and nothing
// anywhere else: a pipe, a file or a log never sees it. It imports the
// standard library and golang.org/x/term.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// terminal is a writer that knows whether it is a terminal without a file
// descriptor to ask.
type terminal interface {
	IsTerminal() bool
}

// IsTerminal reports whether v is a terminal: not a pipe, a file or
// /dev/null.
func IsTerminal(v any) bool {
	if t, ok := v.(terminal); ok {
		return t.IsTerminal()
	}
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// redrawEvery is the shortest time between two drawings of a bar that has
// no total, or whose percentage did not move.
const redrawEvery = 100 * time.Millisecond

// barWidth is the width of the bar between its brackets.
const barWidth = 30

// Bar draws one line on a terminal showing how far a long operation has
// got. It is safe for use by several goroutines.
type Bar struct {
	w     io.Writer // nil: not a terminal, draw nothing
	label string
	unit  string // "bytes" counts in sizes; anything else is a noun for a count
	now   func() time.Time

	mu    sync.Mutex
	total int64 // 0: unknown
	done  int64
	shown string // what is on the line now
	at    time.Time
}

// New returns a bar labelled label on w, drawn only when w is a terminal.
// total is how many units the operation has (0 when unknown); unit is
// "bytes" or the noun counted, e.g. "records".
func New(w io.Writer, label string, total int64, unit string) *Bar {
	p := &Bar{label: label, unit: unit, total: max(total, 0), now: time.Now}
	if IsTerminal(w) {
		p.w = w
	}
	return p
}

// Add counts n more units done.
func (p *Bar) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.draw()
}

// Set says how many units are done, and how many in all when total > 0.
func (p *Bar) Set(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	if total > 0 {
		p.total = total
	}
	p.draw()
}

// draw puts the line on the terminal when it changed, at most every
// redrawEvery unless the operation just reached its end. p.mu is held.
func (p *Bar) draw() {
	if p.w == nil {
		return
	}
	line := p.line()
	if line == p.shown {
		return
	}
	now := p.now()
	end := p.total > 0 && p.done >= p.total
	if p.shown != "" && !end && now.Sub(p.at) < redrawEvery && !p.movedPercent(line) {
		return
	}
	// Carriage return, the line, then clear what a longer line left.
	fmt.Fprintf(p.w, "\r%s\033[K", line)
	p.shown, p.at = line, now
}

// movedPercent reports whether line shows another whole percent than the
// line on the terminal: each percent is drawn, however fast they come.
func (p *Bar) movedPercent(line string) bool {
	pct := func(s string) string {
		if i := strings.Index(s, "%"); i >= 3 {
			return s[i-3 : i]
		}
		return ""
	}
	return p.total > 0 && pct(line) != pct(p.shown)
}

// line is the text of the bar: with a total, a bar, the percentage and the
// counts; without, the count so far.
func (p *Bar) line() string {
	count := func(n int64) string {
		if p.unit == "bytes" {
			return Size(n)
		}
		return fmt.Sprint(n)
	}
	if p.total <= 0 {
		if p.unit == "bytes" {
			return fmt.Sprintf("%s %s", p.label, count(p.done))
		}
		return fmt.Sprintf("%s %d %s", p.label, p.done, p.unit)
	}
	done := min(p.done, p.total)
	fill := int(done * barWidth / p.total)
	return fmt.Sprintf("%s [%s%s] %3d%% %s/%s", p.label, strings.Repeat("=", fill), strings.Repeat(" ", barWidth-fill),
		done*100/p.total, count(done), count(p.total))
}

// Finish clears the line, leaving the terminal as it was for the
// command's own summary.
func (p *Bar) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w != nil && p.shown != "" {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = ""
	}
}

// WatchFile draws p from the size of the file at path, growing while fn
// runs: for copies that report no progress of their own.
func (p *Bar) WatchFile(path string, fn func() error) error {
	if p.w == nil {
		return fn()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(redrawEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if fi, err := os.Stat(path); err == nil {
					p.Set(fi.Size(), 0)
				}
			}
		}
	}()
	err := fn()
	close(stop)
	<-done
	if fi, serr := os.Stat(path); err == nil && serr == nil {
		p.Set(fi.Size(), 0)
	}
	return err
}

// Size is n bytes in words, like 1.5 MiB.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
