package teamsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory/team"
)

// client speaks the wire to one team server.
type client struct {
	url, token string
	hc         *http.Client
}

func newClient(c Config) *client {
	// A redirect is never followed: it would carry the token and the
	// team's memory to an address the user did not name.
	hc := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &client{url: baseURL(c.URL), token: c.Token, hc: hc}
}

// Error is a round that failed, in one line for people.
type Error struct {
	Kind string // unreachable, token, server, busy
	Msg  string
	// Wait is how long the server asked to be left alone, if it did.
	Wait time.Duration
}

func (e *Error) Error() string { return e.Msg }

// The kinds of Error.
const (
	Unreachable = "unreachable"
	BadToken    = "token"
	ServerError = "server"
	Busy        = "busy"
)

// do sends one request and decodes its JSON answer into out. A server
// that asks to be left alone for a few seconds is asked again after them,
// a few times.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	for i := 0; ; i++ {
		err := c.do1(ctx, method, path, body, out)
		var e *Error
		if i == 3 || !errors.As(err, &e) || e.Kind != Busy || e.Wait > 10*time.Second {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.Wait):
		}
	}
}

func (c *client) do1(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return &Error{Kind: Unreachable, Msg: "team server URL is not usable: " + c.url}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Kind: Unreachable, Msg: "team server unreachable at " + c.url}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return &Error{Kind: BadToken, Msg: "team server refused the token (revoked, or not one of its tokens): ask for a new one and run memory-mcp team join " + c.url}
	case resp.StatusCode == http.StatusForbidden:
		return &Error{Kind: BadToken, Msg: "team server refused this request: " + firstLine(resp.Body)}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &Error{Kind: Busy, Msg: "team server busy: " + firstLine(resp.Body), Wait: time.Duration(max(secs, 1)) * time.Second}
	case resp.StatusCode == http.StatusNotFound:
		return &Error{Kind: ServerError, Msg: "team server at " + c.url + " does not serve sync (is it memory-mcp serve --http, of this version or later?)"}
	case resp.StatusCode != http.StatusOK:
		return &Error{Kind: ServerError, Msg: fmt.Sprintf("team server answered %d: %s", resp.StatusCode, firstLine(resp.Body))}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(out); err != nil {
		return &Error{Kind: Unreachable, Msg: "team server's answer was cut off or is not JSON"}
	}
	return nil
}

func firstLine(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 300))
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// push sends one batch and returns one result for each change.
func (c *client) push(ctx context.Context, changes []team.Change) ([]team.Result, error) {
	var out team.PushResponse
	if err := c.do(ctx, http.MethodPost, team.PushPath, team.PushRequest{Changes: changes}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(changes) {
		return nil, &Error{Kind: ServerError, Msg: "team server answered a push with the wrong number of results"}
	}
	for i, r := range out.Results {
		if r.ID != changes[i].ID {
			return nil, &Error{Kind: ServerError, Msg: "team server answered a push out of order"}
		}
	}
	return out.Results, nil
}

// pull asks for the changes after the cursor.
func (c *client) pull(ctx context.Context, after int64, afterID string, limit int) (team.PullResponse, error) {
	var out team.PullResponse
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}}
	if afterID != "" {
		q.Set("after_id", afterID)
	}
	err := c.do(ctx, http.MethodGet, team.PullPath+"?"+q.Encode(), nil, &out)
	return out, err
}
