package main

import (
	"runtime"
	"sync"
	"testing"
)

// Work lent a processor runs with one more than the limit, however many
// such works overlap, and the limit comes back when the last one ends;
// without a limit, lending changes nothing.
func TestProcessorsLend(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var p processors
	before := runtime.GOMAXPROCS(0)
	p.lend(func() {
		if n := runtime.GOMAXPROCS(0); n != before {
			t.Errorf("unlimited: lending made %d processors of %d", n, before)
		}
	})

	p.limit(1)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("limited to 1: %d processors", n)
	}
	var wg sync.WaitGroup
	hold := make(chan struct{})
	started := make(chan struct{}, 8)
	for range 8 {
		wg.Go(func() {
			p.lend(func() {
				if n := runtime.GOMAXPROCS(0); n != 2 {
					t.Errorf("lent work runs on %d processors, want 2", n)
				}
				started <- struct{}{}
				<-hold
			})
		})
	}
	for range 8 {
		<-started
	}
	// A limit set while work is lent keeps the loan.
	p.limit(1)
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("limit during a loan: %d processors, want 2", n)
	}
	close(hold)
	wg.Wait()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("after the loans: %d processors, want 1", n)
	}
}
