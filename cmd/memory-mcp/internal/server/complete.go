package server

import (
	"context"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// recordTemplate is the address of one record, as a resource template.
const recordTemplate = "memory://{scope}/{type}/{key}"

// maxCompletions is the most values one completion may carry.
const maxCompletions = 100

// complete offers values for the record template's arguments and the
// recall prompt's, as the user types: scopes, types, and the keys the
// caller sees. Anything else gets no values, which is no error.
func (srv *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	arg := p.Argument
	var given map[string]string
	if p.Context != nil {
		given = p.Context.Arguments
	}
	var values []string
	var more bool
	var err error
	switch {
	case p.Ref.Type == "ref/resource" && p.Ref.URI == recordTemplate:
		switch arg.Name {
		case "scope":
			for _, l := range scope.Levels {
				values = append(values, l.String())
			}
			values = prefixed(values, arg.Value)
		case "type":
			for _, t := range memory.Types {
				values = append(values, string(t))
			}
			values = prefixed(values, arg.Value)
		case "key":
			values, more, err = srv.keys(ctx, arg.Value, given["scope"], given["type"])
		}
	case p.Ref.Type == "ref/prompt" && p.Ref.Name == "recall":
		switch arg.Name {
		case "query":
			values, more, err = srv.keys(ctx, arg.Value, "", "")
		case "max_tokens":
			values = prefixed([]string{"500", "1500", "3000", "6000"}, arg.Value)
		}
	}
	if err != nil {
		return nil, resourceError(err)
	}
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: nonNilStrings(values), HasMore: more}}
	if !more {
		res.Completion.Total = len(values)
	}
	return res, nil
}

// prefixed is the values that start with prefix.
func prefixed(values []string, prefix string) []string {
	return slices.DeleteFunc(values, func(v string) bool { return !strings.HasPrefix(v, prefix) })
}

// keys returns the keys the caller sees that start with prefix, at the
// scope and of the type given (a name that is neither matches nothing),
// and whether there are more than it returns. Records come in key order,
// so the reading stops at the first key past the prefix.
func (srv *Server) keys(ctx context.Context, prefix, level, typ string) ([]string, bool, error) {
	var opts memory.ListOptions
	if level != "" {
		l, err := scope.Parse(level)
		if err != nil {
			return nil, false, nil
		}
		opts.Scope = &l
	}
	if typ != "" {
		t, err := memory.ParseType("type", typ)
		if err != nil {
			return nil, false, nil
		}
		opts.Type = t
	}
	opts.Limit = 500
	var keys []string
	for {
		recs, next, err := srv.app.Store.List(ctx, srv.app.Project, opts)
		if err != nil {
			return nil, false, err
		}
		for _, r := range recs {
			switch {
			case strings.HasPrefix(r.Key, prefix):
				if len(keys) > 0 && keys[len(keys)-1] == r.Key {
					continue // the same key at another type
				}
				if len(keys) == maxCompletions {
					return keys, true, nil
				}
				keys = append(keys, r.Key)
			case r.Key > prefix:
				return keys, false, nil
			}
		}
		if next == "" {
			return keys, false, nil
		}
		opts.Cursor = next
	}
}

// cacheHints sets the caching hints of lists, reads and discovery. The
// lists are the same for every caller and change only with the server,
// so anyone may keep them a while. Everything else depends on the
// caller's identity, whose memory any write may change: only its own
// client may keep it, and it is stale at once.
func cacheHints(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	switch req.(type) {
	case *mcp.ListToolsRequest, *mcp.ListPromptsRequest, *mcp.ListResourcesRequest, *mcp.ListResourceTemplatesRequest:
		c.TTLMs, c.CacheScope = listTTL, "public"
	default:
		c.TTLMs, c.CacheScope = 0, "private"
	}
}

// listTTL is how long, in milliseconds, a client may keep a list.
const listTTL = 10 * 60 * 1000
