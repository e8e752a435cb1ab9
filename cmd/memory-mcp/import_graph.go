package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/jsonl"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/memory"
)

// importGraph turns a knowledge graph into project semantic records: one
// per entity, its observations as the body, its type in the description and
// tags, and each relation written into the records at both of its ends. The
// whole graph is read first: a relation may come before its entities.
func importGraph(c *cli, a *app, in io.Reader, bar *progress.Bar, res *importResult) error {
	var ents []*jsonl.Entity
	byName := map[string]*jsonl.Entity{}
	byKey := map[string]*jsonl.Entity{}
	type relation struct {
		line           int
		from, to, kind string
	}
	var rels []relation
	err := jsonl.Read(in, func(n int, line []byte, bad string) error {
		bar.Add(int64(len(line)))
		line = bytes.TrimSpace(line)
		if len(line) == 0 && bad == "" {
			return nil
		}
		res.Lines++
		if bad != "" {
			res.Refused = append(res.Refused, refusal{n, bad})
			return nil
		}
		var g jsonl.GraphLine
		if err := json.Unmarshal(line, &g); err != nil {
			res.Refused = append(res.Refused, refusal{n, jsonl.Reason(err)})
			return nil
		}
		switch g.Type {
		case "entity":
			if strings.TrimSpace(g.Name) == "" {
				res.Refused = append(res.Refused, refusal{n, "invalid_argument: name is empty"})
				return nil
			}
			if e := byName[g.Name]; e != nil {
				// The reference server keeps one entity per name; a repeat
				// adds its observations.
				e.Observations = append(e.Observations, g.Observations...)
				return nil
			}
			key := memory.Slug(g.Name)
			if other := byKey[key]; other != nil {
				res.Refused = append(res.Refused, refusal{n, fmt.Sprintf("conflict: name makes the same key %q as the entity on line %d; rename one", key, other.Line)})
				return nil
			}
			e := &jsonl.Entity{Line: n, Name: g.Name, Kind: g.EntityType, Observations: g.Observations}
			ents = append(ents, e)
			byName[g.Name], byKey[key] = e, e
		case "relation":
			if g.From == "" || g.To == "" || g.RelationType == "" {
				res.Refused = append(res.Refused, refusal{n, "invalid_argument: a relation needs from, to and relationType"})
				return nil
			}
			for _, f := range []struct{ name, v string }{{"from", g.From}, {"to", g.To}, {"relationType", g.RelationType}} {
				if err := memory.ScanField(f.name, f.v); err != nil {
					res.Refused = append(res.Refused, refusal{n, reason(err)})
					return nil
				}
			}
			rels = append(rels, relation{n, g.From, g.To, g.RelationType})
		default:
			res.Refused = append(res.Refused, refusal{n, `invalid_argument: type must be "entity" or "relation"`})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range rels {
		line := fmt.Sprintf("%s → %s → %s", r.from, r.kind, r.to)
		from, to := byName[r.from], byName[r.to]
		if from == nil && to == nil {
			res.Refused = append(res.Refused, refusal{r.line, "not_found: neither end of the relation is an entity in this file"})
			continue
		}
		if from != nil {
			from.Relations = append(from.Relations, line)
		}
		if to != nil && to != from {
			to.Relations = append(to.Relations, line)
		}
	}
	for _, e := range ents {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		w := e.Write()
		if old, err := a.Store.Peek(c.ctx, a.Proj.ID, memory.Selector{Key: w.Key, Type: w.Type, Scope: &w.Scope}); err == nil && old.Metadata["entity"] != e.Name {
			res.Refused = append(res.Refused, refusal{e.Line, "conflict: its key holds a memory not imported from this entity; rename the entity or delete that memory"})
			continue
		}
		if res.approx {
			res.dryRun(c.ctx, a.Store, a.Proj.ID, e.Line, w)
			continue
		}
		start := time.Now()
		got, created, err := a.Store.Put(c.ctx, a.Proj, w)
		res.count(e.Line, got, created, start, err)
	}
	return nil
}
