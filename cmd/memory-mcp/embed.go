package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/embed"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/secrets"
)

// semantic links a server to the embeddings endpoint the user configured.
// A nil *semantic is the default: no endpoint, nothing sent anywhere,
// keyword search only.
type semantic struct {
	client *embed.Client
	store  *memory.Store
	log    *slog.Logger
	wake   chan struct{} // the endpoint answered a query: try the queue now

	// queryTimeout bounds embedding a query: past it a search answers by
	// keyword.
	queryTimeout time.Duration
	// poll is how often an idle worker looks for records other
	// processes stored.
	poll time.Duration

	mu   sync.Mutex
	down bool // the worker's last call failed
	// quietUntil: a query found the endpoint answering too slowly;
	// until then searches answer by keyword without asking it.
	quietUntil time.Time
}

// quietFor is how long searches leave an endpoint that timed out alone;
// the worker keeps trying meanwhile and lifts the pause once it answers.
const quietFor = 30 * time.Second

// embedBatch is how many records one request to the endpoint carries.
const embedBatch = 32

func newSemantic(cfg Config, st *memory.Store, log *slog.Logger) (*semantic, error) {
	if cfg.EmbeddingsURL == "" {
		return nil, nil
	}
	c, err := embed.New(embed.Config{URL: cfg.EmbeddingsURL, Model: cfg.EmbeddingsModel, Key: cfg.EmbeddingsKey, Batch: embedBatch})
	if err != nil {
		return nil, fmt.Errorf("PROMETHEUS_MEMORY_EMBEDDINGS_URL is set, but %w (set PROMETHEUS_MEMORY_EMBEDDINGS_MODEL to the model's name, like nomic-embed-text; or unset the URL for keyword search only)", err)
	}
	return &semantic{client: c, store: st, log: log, wake: make(chan struct{}, 1),
		queryTimeout: 10 * time.Second, poll: 500 * time.Millisecond}, nil
}

// search answers a search in mode (the default: hybrid with an endpoint,
// keyword without). It returns the mode it answered in and a note for the
// reader when that is not what was asked, or when records still wait to
// be embedded. Only a query that passes the secret scan is sent.
func (a *app) search(ctx context.Context, p scope.Identity, mode memory.Mode, opts memory.SearchOptions) ([]memory.Hit, memory.Mode, string, error) {
	sm := a.sem
	if mode == "" {
		mode = memory.ModeKeyword
		if sm != nil {
			mode = memory.ModeHybrid
		}
	}
	keyword := func(note string) ([]memory.Hit, memory.Mode, string, error) {
		hits, err := a.store.Search(ctx, p, opts)
		return hits, memory.ModeKeyword, note, err
	}
	if mode == memory.ModeKeyword {
		return keyword("")
	}
	if sm == nil {
		return keyword(fmt.Sprintf("%s search needs an embeddings endpoint (set PROMETHEUS_MEMORY_EMBEDDINGS_URL and _MODEL); answered by keyword", mode))
	}
	if f, found := secrets.Scan(opts.Query); found {
		return keyword(fmt.Sprintf("the query looks like it holds a secret (rule %s), so it was not sent to the embeddings endpoint; answered by keyword", f.Rule))
	}
	if sm.quiet() {
		return keyword("the embeddings endpoint did not answer in time lately; answered by keyword")
	}
	qctx, cancel := context.WithTimeout(ctx, sm.queryTimeout)
	vs, err := sm.client.Embed(qctx, []string{opts.Query})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, mode, "", ctx.Err()
		}
		// The details go to the server's log only: on a team server the
		// caller is not the one who configured the endpoint.
		sm.log.Warn("embed query; answered by keyword", "err", err)
		if e := (*embed.Error)(nil); errors.As(err, &e) && e.Timeout {
			sm.mu.Lock()
			sm.quietUntil = time.Now().Add(quietFor)
			sm.mu.Unlock()
			return keyword("the embeddings endpoint gave no answer in time; answered by keyword")
		}
		return keyword("the embeddings endpoint could not be used; answered by keyword (the server's log says why)")
	}
	if changed, err := a.store.NoteDims(ctx, sm.client.Model(), len(vs[0])); err != nil {
		return nil, mode, "", err
	} else if changed {
		sm.log.Info("the embeddings model gives vectors of a new length: re-embedding every record", "model", sm.client.Model(), "dims", len(vs[0]))
	}
	sm.kick()
	var hits []memory.Hit
	if mode == memory.ModeSemantic {
		hits, err = a.store.SemanticSearch(ctx, p, opts, sm.client.Model(), vs[0])
	} else {
		hits, err = a.store.HybridSearch(ctx, p, opts, sm.client.Model(), vs[0])
	}
	if err != nil {
		return nil, mode, "", err
	}
	note := ""
	if n, err := a.store.EmbedWaiting(ctx, p, sm.client.Model()); err == nil && n > 0 {
		note = fmt.Sprintf("%d records are still waiting to be embedded; until then only their words can find them", n)
		if mode == memory.ModeSemantic {
			note = fmt.Sprintf("%d records are still waiting to be embedded; semantic search cannot find them yet", n)
		}
	}
	return hits, mode, note, nil
}

// quiet reports whether searches should leave the endpoint alone for now.
func (sm *semantic) quiet() bool {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return time.Now().Before(sm.quietUntil)
}

// kick wakes the worker.
func (sm *semantic) kick() {
	select {
	case sm.wake <- struct{}{}:
	default:
	}
}

// start runs embedLoop until the returned stop is called or ctx ends;
// stop waits a moment for the loop to hand its lease back.
func (sm *semantic) start(ctx context.Context) (stop func()) {
	if sm == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sm.embedLoop(ctx)
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

// embedLoop embeds queued records in the background until ctx ends:
// every record stored by any process, right after it is stored, in
// batches. Of the servers sharing the database, one at a time does it.
// While the endpoint is down the records wait in the queue, tried again
// after a growing pause (at most 30 seconds) or as soon as a search
// reaches the endpoint. A change of model queues every record again; its
// progress is logged.
func (sm *semantic) embedLoop(ctx context.Context) {
	model := sm.client.Model()
	holder := rand.Text()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		sm.store.ReleaseEmbedding(rctx, holder)
		cancel()
	}()
	if err := sm.store.WarmVectors(ctx, model); err != nil && ctx.Err() == nil {
		sm.log.Warn("embeddings", "err", err)
	}
	st, err := sm.store.EmbedStatus(ctx, model)
	if err != nil {
		sm.log.Warn("embeddings", "err", err)
	}
	queued, err := sm.store.QueueMissing(ctx, model)
	if err != nil {
		sm.log.Warn("embeddings", "err", err)
	}
	// Progress is worth telling when there is a backlog: a new model, or
	// records stored while no endpoint was there.
	total, done := 0, 0
	if queued > embedBatch || queued > 0 && len(st.Others) > 0 {
		total = queued
		what := "embedding records"
		if len(st.Others) > 0 {
			what = "embedding records with a new model"
		}
		sm.log.Info(what, "model", model, "records", queued, "endpoint", sm.client.Endpoint())
	}
	lastLog, lastLook := time.Now(), time.Now()
	var pause time.Duration
	for ctx.Err() == nil {
		waiting, err := sm.store.EmbedQueued(ctx, model)
		if err != nil || waiting == 0 {
			if err != nil && ctx.Err() == nil {
				sm.log.Debug("embeddings", "err", err)
			}
			if err == nil && total > 0 {
				sm.log.Info("embedded every queued record", "model", model, "records", done)
				total = 0
			}
			// A server with another model that holds the queue embeds
			// new records with its model only: look for them now and then.
			if err == nil && time.Since(lastLook) > lookEvery {
				lastLook = time.Now()
				if n, err := sm.store.QueueOthersEmbedded(ctx, model); err != nil && ctx.Err() == nil {
					sm.log.Debug("embeddings", "err", err)
				} else if n > 0 {
					continue
				}
			}
			sm.sleep(ctx, sm.poll)
			continue
		}
		var res memory.EmbedResult
		held, err := sm.store.LeaseEmbedding(ctx, holder, leaseFor)
		if err == nil && held {
			res, err = sm.store.EmbedPending(ctx, model, sm.client, embedBatch)
		}
		if !held {
			sm.sleep(ctx, 4*sm.poll) // another server embeds them, or the lease failed
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if res.Skipped > 0 {
			sm.log.Warn("records left without a vector: the endpoint refused their text, or it looked like a secret", "count", res.Skipped)
		}
		done += res.Embedded
		if err != nil {
			sm.setDown(err)
			pause = min(max(2*pause, time.Second), 30*time.Second)
			sm.sleep(ctx, pause)
			continue
		}
		sm.setUp()
		pause = 0
		if total > 0 && time.Since(lastLog) > 5*time.Second {
			sm.log.Info("embedding records", "model", model, "done", done, "of", total)
			lastLog = time.Now()
		}
		if res == (memory.EmbedResult{}) {
			sm.sleep(ctx, sm.poll) // only refused records are left
		}
	}
}

func (sm *semantic) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-sm.wake:
	}
}

// setDown logs the first failure of an outage; the records wait.
func (sm *semantic) setDown(err error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if !sm.down {
		sm.log.Warn("embeddings endpoint unavailable; records wait in the queue and are embedded when it is back", "err", err)
	}
	sm.down = true
}

func (sm *semantic) setUp() {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.down {
		sm.log.Info("embeddings endpoint is back", "endpoint", sm.client.Endpoint())
	}
	sm.down = false
	sm.quietUntil = time.Time{}
}

// errNoEmbeddings is the embed command's answer without configuration.
var errNoEmbeddings = errors.New("embed: no embeddings endpoint is configured; set PROMETHEUS_MEMORY_EMBEDDINGS_URL and PROMETHEUS_MEMORY_EMBEDDINGS_MODEL (see README, Semantic search)")

type embedOut struct {
	Model    string             `json:"model"`
	Endpoint string             `json:"endpoint"`
	Embedded int                `json:"embedded"`
	Pruned   int64              `json:"pruned,omitempty"`
	Status   memory.EmbedStatus `json:"status"`
}

func runEmbed(c *cli, args []string) error {
	f := newFlags(c, "embed").withJSON()
	prune := f.Bool("prune", false, "then delete the vectors of every other model")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		sm := a.sem
		if sm == nil {
			return errNoEmbeddings
		}
		model := sm.client.Model()
		queued, err := a.store.QueueMissing(c.ctx, model)
		if err != nil {
			return err
		}
		out := embedOut{Model: model, Endpoint: sm.client.Endpoint()}
		bar := c.progress("embedding", int64(queued), "records")
		counted := 0
		for {
			res, err := a.store.EmbedPending(c.ctx, model, sm.client, embedBatch)
			out.Embedded += res.Embedded
			// A refused record is tried again: count it once.
			n := min(res.Embedded+res.Skipped+res.Dropped, queued-counted)
			counted += n
			bar.add(int64(n))
			if err != nil {
				bar.finish()
				return fmt.Errorf("embed: %w (%d records embedded before; the rest stay queued)", err, out.Embedded)
			}
			if res == (memory.EmbedResult{}) {
				break
			}
		}
		bar.finish()
		if *prune {
			if out.Pruned, err = a.store.PruneVectors(c.ctx, model); err != nil {
				return err
			}
		}
		if out.Status, err = a.store.EmbedStatus(c.ctx, model); err != nil {
			return err
		}
		if f.JSON() {
			return printJSON(c.stdout, out)
		}
		fmt.Fprintf(c.stdout, "embedded %d records with %s (%d records have a vector of %d dimensions)\n", out.Embedded, model, out.Status.Vectors, out.Status.Dims)
		if out.Status.Refused > 0 {
			fmt.Fprintf(c.stdout, "%d records were refused by the endpoint (their text may be too long for the model); they are tried again on the next run\n", out.Status.Refused)
		}
		if out.Pruned > 0 {
			fmt.Fprintf(c.stdout, "deleted %d vectors of other models\n", out.Pruned)
		}
		for m, n := range out.Status.Others {
			fmt.Fprintf(c.stdout, "%d vectors of model %s are kept (switching back needs no new embedding); --prune deletes them\n", n, m)
		}
		return nil
	})
}

// probeClient is how doctor sees whether the endpoint answers: a
// redirect is an answer, and is not followed.
var probeClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// embedProbe embeds one short text with the configured model.
func (d *doctor) embedProbe(ctx context.Context, cfg Config) {
	const area = "embeddings"
	c, err := embed.New(embed.Config{URL: cfg.EmbeddingsURL, Model: cfg.EmbeddingsModel, Key: cfg.EmbeddingsKey, Timeout: 20 * time.Second})
	if err != nil {
		d.problem(area, err.Error(), "set PROMETHEUS_MEMORY_EMBEDDINGS_URL to the API's base URL, like http://localhost:11434/v1")
		return
	}
	vs, err := c.Embed(ctx, []string{"memory-mcp doctor"})
	if err != nil {
		d.problem(area, err.Error(), "check the model name (PROMETHEUS_MEMORY_EMBEDDINGS_MODEL) and key (PROMETHEUS_MEMORY_EMBEDDINGS_KEY), and that the server serves embeddings")
		return
	}
	d.ok(area, "%s embeds with %s (%d dimensions)", c.Endpoint(), c.Model(), len(vs[0]))
}
