package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/memory/embed"
	"prom.codes/memory-mcp/memory/semantic"
)

// newWorker is the embedding worker of the endpoint cfg names, or nil
// without one: nothing is sent anywhere, and search is by keyword only.
func newWorker(cfg Config, vx *semantic.Index, log *slog.Logger) (*embed.Worker, error) {
	if cfg.EmbeddingsURL == "" {
		return nil, nil
	}
	c, err := embed.New(embed.Config{URL: cfg.EmbeddingsURL, Model: cfg.EmbeddingsModel, Key: cfg.EmbeddingsKey, Batch: embed.Batch})
	if err != nil {
		return nil, fmt.Errorf("PROMETHEUS_MEMORY_EMBEDDINGS_URL is set, but %w (set PROMETHEUS_MEMORY_EMBEDDINGS_MODEL to the model's name, like nomic-embed-text; or unset the URL for keyword search only)", err)
	}
	return embed.NewWorker(c, queue{vx}, log), nil
}

// queue is the store's embedding queue as the worker sees it: its
// results in the worker's terms.
type queue struct{ *semantic.Index }

func (q queue) OtherModels(ctx context.Context, model string) (bool, error) {
	st, err := q.EmbedStatus(ctx, model)
	return len(st.Others) > 0, err
}

func (q queue) EmbedPending(ctx context.Context, model string, c *embed.Client, n int) (embed.Result, error) {
	res, err := q.Index.EmbedPending(ctx, model, c, n)
	return embed.Result(res), err
}

// errNoEmbeddings is the embed command's answer without configuration.
var errNoEmbeddings = errors.New("embed: no embeddings endpoint is configured; set PROMETHEUS_MEMORY_EMBEDDINGS_URL and PROMETHEUS_MEMORY_EMBEDDINGS_MODEL (see README, Semantic search)")

type embedOut struct {
	Model    string               `json:"model"`
	Endpoint string               `json:"endpoint"`
	Embedded int                  `json:"embedded"`
	Pruned   int64                `json:"pruned,omitempty"`
	Status   semantic.EmbedStatus `json:"status"`
}

func runEmbed(c *cli, args []string) error {
	f := newFlags(c, "embed").withJSON()
	prune := f.Bool("prune", false, "then delete the vectors of every other model")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		if a.Embed == nil {
			return errNoEmbeddings
		}
		client := a.Embed.Client()
		model := client.Model()
		queued, err := a.Vectors.QueueMissing(c.ctx, model)
		if err != nil {
			return err
		}
		out := embedOut{Model: model, Endpoint: client.Endpoint()}
		bar := progress.New(c.stderr, "embedding", int64(queued), "records")
		counted := 0
		for {
			res, err := a.Vectors.EmbedPending(c.ctx, model, client, embed.Batch)
			out.Embedded += res.Embedded
			// A refused record is tried again: count it once.
			n := min(res.Embedded+res.Skipped+res.Dropped, queued-counted)
			counted += n
			bar.Add(int64(n))
			if err != nil {
				bar.Finish()
				return fmt.Errorf("embed: %w (%d records embedded before; the rest stay queued)", err, out.Embedded)
			}
			if res == (semantic.EmbedResult{}) {
				break
			}
		}
		bar.Finish()
		if *prune {
			if out.Pruned, err = a.Vectors.PruneVectors(c.ctx, model); err != nil {
				return err
			}
		}
		if out.Status, err = a.Vectors.EmbedStatus(c.ctx, model); err != nil {
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
