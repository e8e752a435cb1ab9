package memory

import (
	"context"
	"database/sql"
	"fmt"
)

// Backup writes a consistent copy of the database to dst, which must not
// exist, while other processes go on writing. The copy is made 0600. On
// PostgreSQL it returns an error wrapping ErrUnsupported that says what to
// use instead.
func (s *Store) Backup(ctx context.Context, dst string) error {
	return s.b.Backup(ctx, dst)
}

// RestoreFrom replaces the database's content with the database at src,
// after checking it, and first keeps a consistent copy of the replaced
// content at keep (which must not exist). Servers that have the database
// open see the restored content on their next read: every change counter
// moves past where it stood, so their caches read afresh. On PostgreSQL it
// returns an error wrapping ErrUnsupported.
//
// progress, when not nil, is told the pages copied and the pages in all as
// the copy goes.
func (s *Store) RestoreFrom(ctx context.Context, src, keep string, progress func(done, total int)) error {
	if s.pg {
		return s.b.Restore(ctx, src, keep, progress) // refused, with what to use instead
	}
	before, err := s.changeMarks(ctx)
	if err != nil {
		return fmt.Errorf("restore %s: %w", src, err)
	}
	if err := s.b.Restore(ctx, src, keep, progress); err != nil {
		return err
	}
	if err := s.markRestored(ctx, before); err != nil {
		return fmt.Errorf("restore %s: %w", src, err)
	}
	s.countMu.Lock()
	s.counts = nil
	s.countMu.Unlock()
	return nil
}

// marks are the change counters other processes compare against, as they
// stood before a restore, and the mirror's files then.
type marks struct {
	generation int64
	version    int64 // the highest mirror version of any project
	stems      map[[2]string]bool
	seq        int64                  // the highest search change
	searched   map[changeKey]struct{} // every record the search index may hold
	vectors    vectorMarks
}

// changeKey names a record as the search index's change sequence does.
type changeKey struct {
	project string
	rid     int64
}

func (s *Store) changeMarks(ctx context.Context) (marks, error) {
	m := marks{stems: map[[2]string]bool{}, searched: map[changeKey]struct{}{}}
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM changes`).Scan(&m.seq); err != nil {
		return m, err
	}
	crows, err := s.db.QueryContext(ctx, `SELECT project, rid FROM changes`)
	if err != nil {
		return m, err
	}
	for crows.Next() {
		var k changeKey
		if err := crows.Scan(&k.project, &k.rid); err != nil {
			crows.Close()
			return m, err
		}
		m.searched[k] = struct{}{}
	}
	crows.Close()
	if err := crows.Err(); err != nil {
		return m, err
	}
	if m.vectors, err = readVectorMarks(ctx, s.db); err != nil {
		return m, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce((SELECT n FROM generation WHERE id = 1), 0), coalesce((SELECT max(version) FROM mirror_versions), 0)`).Scan(&m.generation, &m.version); err != nil {
		return m, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT project, stem FROM mirror_files`)
	if err != nil {
		return m, err
	}
	defer rows.Close()
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return m, err
		}
		m.stems[k] = true
	}
	return m, rows.Err()
}

// markRestored moves every change counter past where it stood before the
// restore, so that a server that kept counts or mirror state from before
// reads them afresh: each file's row counts as changed, and each file the
// restore took away as gone.
func (s *Store) markRestored(ctx context.Context, before marks) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		steps := []string{
			`UPDATE generation SET n = n + @gen + 1 WHERE id = 1`,
			`UPDATE mirror_versions SET version = version + @v + 1`,
			`UPDATE mirror_files SET v = (SELECT version FROM mirror_versions m WHERE m.project = mirror_files.project)`,
		}
		for _, q := range steps {
			if _, err := tx.ExecContext(ctx, q, s.b.NamedArgs([]any{sql.Named("gen", before.generation), sql.Named("v", before.version)})...); err != nil {
				return err
			}
		}
		if err := restampChanges(ctx, tx, before); err != nil {
			return err
		}
		if err := restampVectorChanges(ctx, tx, before.vectors); err != nil {
			return err
		}
		for k := range before.stems {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM mirror_files WHERE project = $1 AND stem = $2`, k[0], k[1]).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO mirror_versions (project, version) SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = $3)`, k[0], before.version+1, k[0]); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO mirror_gone (project, stem, v) SELECT $1, $2, version FROM mirror_versions WHERE project = $3
				ON CONFLICT (project, stem) DO UPDATE SET v = excluded.v`, k[0], k[1], k[0]); err != nil {
				return err
			}
		}
		return nil
	})
}

// restampChanges gives every record the search index of a running server
// may hold, from before the restore or after it, a change past the last
// one such an index applied, so that it drops what the restore took away
// and reads what it brought back.
func restampChanges(ctx context.Context, tx *sql.Tx, before marks) error {
	keys := before.searched
	rows, err := tx.QueryContext(ctx, `SELECT project, rowid FROM records`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k changeKey
		if err := rows.Scan(&k.project, &k.rid); err != nil {
			rows.Close()
			return err
		}
		keys[k] = struct{}{}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var after int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM changes`).Scan(&after); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM changes`); err != nil {
		return err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO changes (seq, project, rid) VALUES ($1, $2, $3)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	seq := max(before.seq, after)
	for k := range keys {
		seq++
		if _, err := ins.ExecContext(ctx, seq, k.project, k.rid); err != nil {
			return err
		}
	}
	return nil
}

// vectorMarks are the vector change sequence as it stood before a restore:
// its last change and every record a vector index may hold.
type vectorMarks struct {
	seq  int64
	rids map[int64]struct{}
}

func readVectorMarks(ctx context.Context, db *sql.DB) (vectorMarks, error) {
	m := vectorMarks{rids: map[int64]struct{}{}}
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM embed_changes`).Scan(&m.seq); err != nil {
		return m, fmt.Errorf("read vector changes: %w", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT rid FROM embed_changes`)
	if err != nil {
		return m, fmt.Errorf("read vector changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rid int64
		if err := rows.Scan(&rid); err != nil {
			return m, fmt.Errorf("read vector changes: %w", err)
		}
		m.rids[rid] = struct{}{}
	}
	return m, rows.Err()
}

// restampVectorChanges gives every record a vector index of a running
// server may hold, from before a restore or after it, a change past the
// last one such an index applied: the restored database's sequence may
// stand past that index's while its rows name other records, and the
// index would keep the vectors of records the restore replaced.
func restampVectorChanges(ctx context.Context, tx *sql.Tx, before vectorMarks) error {
	rids := before.rids
	rows, err := tx.QueryContext(ctx, `SELECT rid FROM embed_changes UNION SELECT rid FROM embed_vectors`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var rid int64
		if err := rows.Scan(&rid); err != nil {
			rows.Close()
			return err
		}
		rids[rid] = struct{}{}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var after int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM embed_changes`).Scan(&after); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM embed_changes`); err != nil {
		return err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO embed_changes (seq, rid) VALUES ($1, $2)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	seq := max(before.seq, after)
	for rid := range rids {
		seq++
		if _, err := ins.ExecContext(ctx, seq, rid); err != nil {
			return err
		}
	}
	return nil
}
