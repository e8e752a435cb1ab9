package mirror

import (
	"errors"
	"testing"
	"time"
)

// TestRetryBusy: a busy file is tried again until it is free, for a
// bounded time; any other error is returned at once.
func TestRetryBusy(t *testing.T) {
	errBusy, errOther := errors.New("busy"), errors.New("other")
	isBusy := func(err error) bool { return errors.Is(err, errBusy) }
	tests := []struct {
		name  string
		fails []error // the errors of the first calls; then nil
		wait  time.Duration
		want  error
		calls int
	}{
		{"free at once", nil, time.Second, nil, 1},
		{"busy twice", []error{errBusy, errBusy}, time.Second, nil, 3},
		{"other error", []error{errOther, errBusy}, time.Second, errOther, 1},
		{"busy for good", []error{errBusy, errBusy, errBusy, errBusy, errBusy, errBusy, errBusy, errBusy}, 20 * time.Millisecond, errBusy, 0},
	}
	for _, tt := range tests {
		calls := 0
		err := retryBusy(func() error {
			calls++
			if calls <= len(tt.fails) {
				return tt.fails[calls-1]
			}
			return nil
		}, isBusy, tt.wait)
		if !errors.Is(err, tt.want) && !(err == nil && tt.want == nil) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		if tt.calls != 0 && calls != tt.calls {
			t.Errorf("%s: %d calls, want %d", tt.name, calls, tt.calls)
		}
		if tt.calls == 0 && (calls < 2 || calls >= len(tt.fails)) {
			t.Errorf("%s: %d calls; want a few, bounded by the wait", tt.name, calls)
		}
	}
}
