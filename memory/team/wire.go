// Package team is team sync's server side and its wire: the change log in
// which the team server orders every change it accepts of its tokens'
// shared memory (workspace, tenant, system), the push that accepts
// changes, the pull that gives them back after a cursor, and the HTTP
// handler serving both. docs/sync.md describes the model and the wire.
//
// It imports memory, scope and the standard library; memory/teamsync (the
// machine's side) imports it for the wire types.
package team

import (
	"time"
)

// The paths of the two endpoints, under the team server's base URL.
const (
	PushPath = "/sync/v1/push"
	PullPath = "/sync/v1/pull"
)

// The operations of a change.
const (
	OpPut    = "put"
	OpDelete = "delete"
)

// The statuses of a pushed change.
const (
	Stored  = "stored"  // the server has it, now or from an earlier push
	Refused = "refused" // it never will: Reason says why
)

// Change is one change of one record, as pushed and as pulled.
type Change struct {
	// ID is the change's own id, chosen by the machine that made it
	// (letters, digits, '-' and '_', at most 64): a change pushed again is
	// recognised by it and stored once.
	ID string `json:"id"`
	// Machine names the machine that made it; a machine's changes never
	// conflict with each other.
	Machine string `json:"machine,omitempty"`
	// Seq is the server's order of the change; set in pulls.
	Seq int64 `json:"seq,omitempty"`
	// Base is the seq of the version the change was made on, 0 for none.
	Base  int64  `json:"base"`
	Scope string `json:"scope"` // workspace, tenant or system
	Type  string `json:"type"`
	Key   string `json:"key"`
	Op    string `json:"op"` // put or delete
	// Record is the new version, for a put.
	Record *Version `json:"record,omitempty"`
	// Tenant and User, when given, name whose memory the change is for,
	// and must be the token's.
	Tenant string `json:"tenant,omitempty"`
	User   string `json:"user,omitempty"`
	// At is when the server accepted it; set in pulls.
	At *time.Time `json:"at,omitempty"`
	// Replaced, in pulls, is the version this change replaced without its
	// machine having seen it: that version lost a conflict.
	Replaced *Change `json:"replaced,omitempty"`
}

// Version is a record's content as it travels.
type Version struct {
	Description string            `json:"description,omitempty"`
	Body        string            `json:"body"`
	Tags        []string          `json:"tags,omitempty"`
	Confidence  *float64          `json:"confidence,omitempty"` // absent: 0.5, or what the record held
	Metadata    map[string]string `json:"metadata,omitempty"`
	ExpiresAt   *time.Time        `json:"expires_at,omitempty"`
}

// PushRequest is the body of a push.
type PushRequest struct {
	Changes []Change `json:"changes"`
}

// Result is what became of one pushed change.
type Result struct {
	ID     string `json:"id"`
	Status string `json:"status"`           // Stored or Refused
	Seq    int64  `json:"seq,omitempty"`    // its place in the log, once stored
	Reason string `json:"reason,omitempty"` // why it was refused
}

// PushResponse answers a push: one result for each change, in order.
type PushResponse struct {
	Results []Result `json:"results"`
}

// Identity is whom a token speaks for.
type Identity struct {
	Tenant string `json:"tenant"`
	User   string `json:"user"`
	Admin  bool   `json:"admin"`
}

// PullResponse answers a pull: the changes the token may see after the
// cursor, in order, at most the limit asked for.
type PullResponse struct {
	Identity Identity `json:"identity"`
	Changes  []Change `json:"changes"`
	// Next is the cursor to pull after next: the last change's seq, or the
	// cursor given when there are none.
	Next int64 `json:"next"`
	// More says that changes past Next are waiting.
	More bool `json:"more"`
	// Lost says that the cursor's change is not in this log: the server's
	// database was restored from an older copy, or another server answers
	// at the URL. Nothing else is in the answer; the machine pulls from 0
	// and pushes what it holds again.
	Lost bool `json:"lost,omitempty"`
}

// Limits of one request.
const (
	MaxPush     = 500  // changes in one push
	MaxPull     = 1000 // changes in one pull
	DefaultPull = 500
)
