package main

import (
	"runtime"
	"sync"
)

// processors is how many processors the Go code runs on, when the stdio
// server limits it (see oneProcessor), and lends one more to work that
// may block in a C call or the kernel: a goroutine blocked there keeps
// its processor until the runtime's monitor takes it back, which it does
// only on its next round, up to 20 ms later when the process has been
// quiet, and with one processor every call waits meanwhile. A recall's
// p99 at 10,000 records went from 6 to 15 ms that way, behind the
// checkpoints its commits of uses brought on.
type processors struct {
	mu   sync.Mutex
	base int // 0: not limited, nothing to lend
	lent int // works running on the borrowed processor
}

var procs processors

// limit runs the Go code on n processors, n > 0.
func (p *processors) limit(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.base = n
	runtime.GOMAXPROCS(n + min(p.lent, 1))
}

// lend runs work with one processor more than the limit, if there is
// one. Changing the number stops the world for some microseconds, so it
// is for work that takes longer: a checkpoint, a write in the
// background, the instructions' refresh.
func (p *processors) lend(work func()) {
	p.mu.Lock()
	if p.base == 0 {
		p.mu.Unlock()
		work()
		return
	}
	if p.lent == 0 {
		runtime.GOMAXPROCS(p.base + 1)
	}
	p.lent++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.lent--; p.lent == 0 {
			runtime.GOMAXPROCS(p.base)
		}
		p.mu.Unlock()
	}()
	work()
}

// limited returns the limit, or GOMAXPROCS where there is none: what the
// Go code runs on outside the loans.
func (p *processors) limited() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.base > 0 {
		return p.base
	}
	return runtime.GOMAXPROCS(0)
}
