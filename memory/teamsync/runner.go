package teamsync

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Run syncs in the background until ctx ends: at once, soon after a
// write here queues a change (it looks every second, so that changes the
// command line or hooks made in other processes go too), and every
// interval. While the server is down or refuses, it waits longer between
// tries, up to five minutes. It logs to log; nothing it does holds up a
// tool call beyond the moments its transactions take. every must be
// more than 0 (Start does not run it for 0).
func (s *Syncer) Run(ctx context.Context, every time.Duration, log *slog.Logger) {
	const look = time.Second
	wait := time.Duration(0) // until the next round
	backoff := time.Duration(0)
	var last time.Time
	for {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(wait, look)):
			}
			wait -= min(wait, look)
			if wait > 0 && backoff == 0 && s.queued(ctx) {
				wait = 0
			}
			if wait > 0 {
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		n, err := s.Round(ctx)
		last = time.Now()
		var se *Error
		switch {
		case errors.Is(err, context.Canceled) || ctx.Err() != nil:
			return
		case err != nil:
			backoff = min(max(2*backoff, 2*time.Second), 5*time.Minute)
			if errors.As(err, &se) && se.Wait > backoff {
				backoff = se.Wait
			}
			log.Warn("team sync", "err", err, "retry_in", backoff.String())
			wait = backoff
		default:
			if backoff > 0 {
				log.Info("team sync: the server answers again")
			}
			backoff = 0
			if n.Pushed+n.Pulled+n.Conflicts > 0 {
				log.Info("team sync", "pushed", n.Pushed, "pulled", n.Pulled, "conflicts", n.Conflicts)
			}
			wait = every - time.Since(last)
		}
	}
}

// queued reports whether a change waits to be sent.
func (s *Syncer) queued(ctx context.Context) bool {
	var any bool
	s.st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_outbox WHERE change_id IS NULL)`).Scan(&any)
	return any
}
