package embed

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Queue is the store's queue of records waiting to be embedded, shared by
// every process on the database. The memory package's Store keeps it; it
// is an interface here so that this package need not import memory.
type Queue interface {
	// WarmVectors loads model's vectors for searching.
	WarmVectors(ctx context.Context, model string) error
	// OtherModels reports whether vectors of another model are stored.
	OtherModels(ctx context.Context, model string) (bool, error)
	// QueueMissing queues every record without a vector of model and
	// returns how many are queued.
	QueueMissing(ctx context.Context, model string) (int, error)
	// QueueOthersEmbedded queues the records with another model's vector
	// but none of model, returning how many.
	QueueOthersEmbedded(ctx context.Context, model string) (int, error)
	// EmbedQueued counts the records still to try with model.
	EmbedQueued(ctx context.Context, model string) (int, error)
	// LeaseEmbedding takes or renews the queue for holder for d; it
	// reports false while another holder has it.
	LeaseEmbedding(ctx context.Context, holder string, d time.Duration) (bool, error)
	// ReleaseEmbedding hands holder's lease back.
	ReleaseEmbedding(ctx context.Context, holder string) error
	// EmbedPending embeds up to n queued records with c.
	EmbedPending(ctx context.Context, model string, c *Client, n int) (Result, error)
}

// Result is what one EmbedPending call did.
type Result struct {
	Embedded int // records given a vector
	Skipped  int // records left without one: refused by the endpoint, or shaped like a secret
	Dropped  int // queued records gone or changed since
}

// Batch is how many records one request to the endpoint carries.
const Batch = 32

// Worker embeds the records of a Queue in the background, and embeds
// search queries. Of the workers sharing a database, one at a time holds
// the queue.
type Worker struct {
	client *Client
	queue  Queue
	log    *slog.Logger
	wake   chan struct{} // the endpoint answered a query: try the queue now

	// QueryTimeout bounds embedding a query: past it a search answers
	// by keyword.
	QueryTimeout time.Duration
	// Poll is how often an idle worker looks for records other
	// processes stored.
	Poll time.Duration

	mu   sync.Mutex
	down bool // the worker's last call failed
	// quietUntil: a query found the endpoint answering too slowly;
	// until then searches answer by keyword without asking it.
	quietUntil time.Time
}

// quietFor is how long searches leave an endpoint that timed out alone;
// the worker keeps trying meanwhile and lifts the pause once it answers.
const quietFor = 30 * time.Second

// NewWorker returns a worker embedding q's records with c, logging to log.
func NewWorker(c *Client, q Queue, log *slog.Logger) *Worker {
	return &Worker{client: c, queue: q, log: log, wake: make(chan struct{}, 1),
		QueryTimeout: 10 * time.Second, Poll: 500 * time.Millisecond}
}

// Client is the endpoint the worker embeds with.
func (w *Worker) Client() *Client { return w.client }

// Query embeds one search query within QueryTimeout. After a timeout,
// Quiet reports true for a while. Its errors are the Client's.
func (w *Worker) Query(ctx context.Context, text string) ([]float32, error) {
	qctx, cancel := context.WithTimeout(ctx, w.QueryTimeout)
	vs, err := w.client.Embed(qctx, []string{text})
	cancel()
	if e := (*Error)(nil); errors.As(err, &e) && e.Timeout && ctx.Err() == nil {
		w.mu.Lock()
		w.quietUntil = time.Now().Add(quietFor)
		w.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// Quiet reports whether searches should leave the endpoint alone for now.
func (w *Worker) Quiet() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Now().Before(w.quietUntil)
}

// Kick wakes the worker.
func (w *Worker) Kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Start runs the worker until the returned stop is called or ctx ends;
// stop waits a moment for it to hand its lease back. A nil worker does
// nothing.
func (w *Worker) Start(ctx context.Context) (stop func()) {
	if w == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.loop(ctx)
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
		}
	}
}

// lookEvery is how often an idle worker looks for records a server with
// another model embedded without its model.
const lookEvery = time.Minute

// leaseFor is how long one process keeps the queue to itself; it renews
// the lease with every batch.
const leaseFor = 30 * time.Second

// loop embeds queued records in the background until ctx ends: every
// record stored by any process, right after it is stored, in batches.
// While the endpoint is down the records wait in the queue, tried again
// after a growing pause (at most 30 seconds) or as soon as a search
// reaches the endpoint. A change of model queues every record again; its
// progress is logged.
func (w *Worker) loop(ctx context.Context) {
	model := w.client.Model()
	holder := rand.Text()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		w.queue.ReleaseEmbedding(rctx, holder)
		cancel()
	}()
	if err := w.queue.WarmVectors(ctx, model); err != nil && ctx.Err() == nil {
		w.log.Warn("embeddings", "err", err)
	}
	others, err := w.queue.OtherModels(ctx, model)
	if err != nil {
		w.log.Warn("embeddings", "err", err)
	}
	queued, err := w.queue.QueueMissing(ctx, model)
	if err != nil {
		w.log.Warn("embeddings", "err", err)
	}
	// Progress is worth telling when there is a backlog: a new model, or
	// records stored while no endpoint was there.
	total, done := 0, 0
	if queued > Batch || queued > 0 && others {
		total = queued
		what := "embedding records"
		if others {
			what = "embedding records with a new model"
		}
		w.log.Info(what, "model", model, "records", queued, "endpoint", w.client.Endpoint())
	}
	lastLog, lastLook := time.Now(), time.Now()
	var pause time.Duration
	for ctx.Err() == nil {
		waiting, err := w.queue.EmbedQueued(ctx, model)
		if err != nil || waiting == 0 {
			if err != nil && ctx.Err() == nil {
				w.log.Debug("embeddings", "err", err)
			}
			if err == nil && total > 0 {
				w.log.Info("embedded every queued record", "model", model, "records", done)
				total = 0
			}
			// A server with another model that holds the queue embeds
			// new records with its model only: look for them now and then.
			if err == nil && time.Since(lastLook) > lookEvery {
				lastLook = time.Now()
				if n, err := w.queue.QueueOthersEmbedded(ctx, model); err != nil && ctx.Err() == nil {
					w.log.Debug("embeddings", "err", err)
				} else if n > 0 {
					continue
				}
			}
			w.sleep(ctx, w.Poll)
			continue
		}
		var res Result
		held, err := w.queue.LeaseEmbedding(ctx, holder, leaseFor)
		if err == nil && held {
			res, err = w.queue.EmbedPending(ctx, model, w.client, Batch)
		}
		if !held {
			w.sleep(ctx, 4*w.Poll) // another server embeds them, or the lease failed
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if res.Skipped > 0 {
			w.log.Warn("records left without a vector: the endpoint refused their text, or it looked like a secret", "count", res.Skipped)
		}
		done += res.Embedded
		if err != nil {
			w.setDown(err)
			pause = min(max(2*pause, time.Second), 30*time.Second)
			w.sleep(ctx, pause)
			continue
		}
		w.setUp()
		pause = 0
		if total > 0 && time.Since(lastLog) > 5*time.Second {
			w.log.Info("embedding records", "model", model, "done", done, "of", total)
			lastLog = time.Now()
		}
		if res == (Result{}) {
			w.sleep(ctx, w.Poll) // only refused records are left
		}
	}
}

func (w *Worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-w.wake:
	}
}

// setDown logs the first failure of an outage; the records wait.
func (w *Worker) setDown(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.down {
		w.log.Warn("embeddings endpoint unavailable; records wait in the queue and are embedded when it is back", "err", err)
	}
	w.down = true
}

func (w *Worker) setUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down {
		w.log.Info("embeddings endpoint is back", "endpoint", w.client.Endpoint())
	}
	w.down = false
	w.quietUntil = time.Time{}
}
