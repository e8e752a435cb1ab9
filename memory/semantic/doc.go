// Package semantic finds records by their meaning: it keeps the queue of
// records to embed and their vectors of each embeddings model in the
// store's embed_* tables, holds this process's copy of one model's
// vectors, and answers semantic and hybrid (keyword and meaning fused)
// searches.
//
// It may import memory, whose Store it works over (through DB, WriteTx,
// Now, Visible and Found), memory/excerpt, memory/index,
// memory/vector, scope and secrets; memory must not import it.
package semantic

import (
	"sync/atomic"

	"prom.codes/memory-mcp/memory"
)

// Index is the semantic side of one Store: its embedding queue and this
// process's copy of one model's vectors. Make one per Store and share
// it, so that what the embedding worker loads is what searches use. It
// is safe for concurrent use.
type Index struct {
	st      *memory.Store
	vectors vectorIndex // see SemanticSearch
	wanted  atomic.Bool // the database queues records for embedding (see wantEmbeddings)
}

// New returns the Index of st.
func New(st *memory.Store) *Index { return &Index{st: st} }

// Store returns the store s works over.
func (s *Index) Store() *memory.Store { return s.st }
