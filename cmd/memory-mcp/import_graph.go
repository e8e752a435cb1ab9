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
	"prom.codes/memory-mcp/scope"
)

// graphLine is one line of the reference MCP memory server's JSONL
// knowledge graph: an entity or a relation.
type graphLine struct {
	Type         string   `json:"type"`
	Name         string   `json:"name"`
	EntityType   string   `json:"entityType"`
	Observations []string `json:"observations"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	RelationType string   `json:"relationType"`
}

type entity struct {
	line      int
	name      string
	kind      string
	obs       []string
	relations []string
	refused   bool
}

// importGraph turns a knowledge graph into project semantic records: one
// per entity, its observations as the body, its type in the description
// and tags, and each relation written into the records at both of its ends.
// The whole graph is read first, since a relation may come before its
// entities.
func importGraph(c *cli, a *app, in io.Reader, bar *progress.Bar, res *importResult) error {
	var ents []*entity
	byName := map[string]*entity{}
	byKey := map[string]*entity{}
	type relation struct {
		line           int
		from, to, kind string
	}
	var rels []relation
	err := jsonl.Read(in, func(n int, line []byte, tooLong bool) error {
		bar.Add(int64(len(line)))
		line = bytes.TrimSpace(line)
		if len(line) == 0 && !tooLong {
			return nil
		}
		res.Lines++
		if tooLong {
			res.Refused = append(res.Refused, refusal{n, fmt.Sprintf("too_large: the line is longer than %d bytes", jsonl.MaxLine)})
			return nil
		}
		var g graphLine
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
				e.obs = append(e.obs, g.Observations...)
				return nil
			}
			key := memory.Slug(g.Name)
			if other := byKey[key]; other != nil {
				res.Refused = append(res.Refused, refusal{n, fmt.Sprintf("conflict: name makes the same key %q as the entity on line %d; rename one", key, other.line)})
				return nil
			}
			e := &entity{line: n, name: g.Name, kind: g.EntityType, obs: g.Observations}
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
			from.relations = append(from.relations, line)
		}
		if to != nil && to != from {
			to.relations = append(to.relations, line)
		}
	}
	for _, e := range ents {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		w := entityWrite(e)
		if res.DryRun {
			res.dryRun(c.ctx, a.Store, a.Proj.ID, e.line, w)
			continue
		}
		start := time.Now()
		got, created, err := a.Store.Put(c.ctx, a.Proj, w)
		res.count(e.line, got, created, start, err)
	}
	return nil
}

func entityWrite(e *entity) memory.Write {
	var b strings.Builder
	for _, o := range e.obs {
		fmt.Fprintf(&b, "- %s\n", strings.Join(strings.Fields(o), " "))
	}
	if len(e.relations) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("## Relations\n\n")
		for _, r := range e.relations {
			fmt.Fprintf(&b, "- %s\n", r)
		}
	}
	desc := e.name
	var tags []string
	if k := strings.TrimSpace(e.kind); k != "" {
		desc += " (" + k + ")"
		tag := memory.Slug(k)
		if len(tag) > memory.MaxTagLen {
			tag = tag[:memory.MaxTagLen]
		}
		tags = append(tags, tag)
	}
	tags = append(tags, "server-memory")
	meta := map[string]string{"entity": e.name}
	if e.kind != "" {
		meta["entity_type"] = e.kind
	}
	return memory.Write{
		Scope: scope.Project, Type: memory.Semantic, Key: memory.Slug(e.name),
		Description: strings.Join(strings.Fields(desc), " "), Body: b.String(), Tags: tags,
		Source: memory.FromCLI, Metadata: meta,
	}
}
