package main

import (
	"context"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// nothingName is the name the do-nothing server gives at initialize, and
// so its row in a -compare report.
const nothingName = "go-sdk, no work"

// serveNothing serves, over in and out, an MCP server made with the same
// SDK as memory-mcp whose tools do nothing: create_entities, search_nodes
// and open_nodes (the tools -compare maps its calls onto for
// server-memory) answer at once with an empty result. Measured as a
// -peer, it is the floor of every figure: the client's and the SDK's own
// work for a call through stdio, with no store behind it.
func serveNothing(ctx context.Context, in io.Reader, out io.Writer) error {
	s := mcp.NewServer(&mcp.Implementation{Name: nothingName, Version: "1"}, nil)
	type entities struct {
		Entities []struct {
			Name         string   `json:"name"`
			EntityType   string   `json:"entityType"`
			Observations []string `json:"observations"`
		} `json:"entities"`
	}
	type query struct {
		Query string `json:"query"`
	}
	type names struct {
		Names []string `json:"names"`
	}
	empty := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}
	mcp.AddTool(s, &mcp.Tool{Name: "create_entities"}, func(context.Context, *mcp.CallToolRequest, entities) (*mcp.CallToolResult, any, error) {
		return empty, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "search_nodes"}, func(context.Context, *mcp.CallToolRequest, query) (*mcp.CallToolResult, any, error) {
		return empty, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "open_nodes"}, func(context.Context, *mcp.CallToolRequest, names) (*mcp.CallToolResult, any, error) {
		return empty, nil, nil
	})
	return s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
