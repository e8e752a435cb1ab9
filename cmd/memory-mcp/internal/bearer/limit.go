package bearer

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter holds a rate limiter per token.
type Limiter struct {
	rate  rate.Limit
	burst int

	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

// NewLimiter allows r requests a second to each key, up to burst at once.
func NewLimiter(r float64, burst int) *Limiter {
	return &Limiter{rate: rate.Limit(r), burst: max(burst, 1), keys: map[string]*rate.Limiter{}}
}

// Forget drops key's limiter.
func (l *Limiter) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
}

// allow takes one request of key's, or says how long until one would be
// allowed.
func (l *Limiter) allow(key string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	lim, ok := l.keys[key]
	if !ok {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.keys[key] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}
