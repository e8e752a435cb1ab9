package server

import (
	"context"
	"testing"
	"time"
)

func TestSettle(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if settle(ctx, make(chan struct{}), time.Hour, time.Hour) {
			t.Error("settle reported true after its context ended")
		}
	})
	t.Run("quiet", func(t *testing.T) {
		start := time.Now()
		if !settle(context.Background(), make(chan struct{}), 10*time.Millisecond, time.Hour) {
			t.Fatal("settle reported false")
		}
		if took := time.Since(start); took < 10*time.Millisecond {
			t.Errorf("returned after %v, before the quiet period", took)
		}
	})
	t.Run("endless changes", func(t *testing.T) {
		// Changes keep coming faster than the quiet period: the maximum
		// delay ends the wait all the same.
		kick := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			for {
				select {
				case kick <- struct{}{}:
				case <-ctx.Done():
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		start := time.Now()
		if !settle(ctx, kick, time.Hour, 50*time.Millisecond) {
			t.Fatal("settle reported false")
		}
		if took := time.Since(start); took < 50*time.Millisecond {
			t.Errorf("returned after %v, before the maximum delay", took)
		}
	})
}
